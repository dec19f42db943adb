# SPDX-License-Identifier: GPL-2.0
"""What a built guest kernel was compiled from, by kbuild's own record: the .cmd file
kbuild writes beside each object (source_<obj> := the source, deps_<obj> := every
header it read). make review asks it whether a patch can change the guest at all.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kloc.guests.guest import Guest

_SOURCE = re.compile(r'^source_\S+ := (\S+)$', re.MULTILINE)
_DEPS = re.compile(r'^deps_\S+ := \\\n((?:.*\\\n)*)', re.MULTILINE)
# Files kbuild reads that no .cmd names as a source: what configures or drives
# the build itself, and the userspace the guest runs (the kselftest, from the tree).
BUILD_FILES = re.compile(r'(^|/)(Kconfig[^/]*|Makefile[^/]*|Kbuild[^/]*|[^/]*\.mk)$')
BUILD_DIRS = ('scripts/', 'tools/', 'usr/', 'include/config/', 'arch/x86/tools/')


def compiled(g: Guest) -> frozenset[str] | None:
    """Every source and header file (relative to the tree) the guest's last build read,
    or None where there is no build to ask."""
    return compiled_in(g.build_dir(), g.tree.path)


def compiled_in(bdir: Path, src: Path) -> frozenset[str] | None:
    """compiled() of the build dir bdir (O=) of the tree src."""
    if not (bdir / '.config').is_file():
        return None
    tree = os.path.realpath(src)
    base = os.path.realpath(bdir)
    names: set[str] = set()
    for cmd in bdir.rglob('.*.cmd'):
        try:
            text = cmd.read_text(errors='replace')
        except OSError:
            continue
        names.update(_SOURCE.findall(text))
        for block in _DEPS.findall(text):
            names.update(w for w in block.replace('\\\n', ' ').split()
                         if not w.startswith('$('))
    out: set[str] = set()
    for name in names:      # a few thousand distinct paths: plain string arithmetic
        full = os.path.normpath(os.path.join(base, name))
        if full.startswith(tree + os.sep):
            out.add(full[len(tree) + 1:])
    return frozenset(out) if out else None


def _drives_build(files: tuple[str, ...]) -> bool:
    """Whether any of files configures or drives a build, or is the guest's userspace."""
    return any(BUILD_FILES.search(f) or f.startswith(BUILD_DIRS) for f in files)


def untouched(g: Guest, files: tuple[str, ...]) -> str:
    """Why the patch's files cannot change g (one line), or '' if they may: a file g's
    build read, or one that drives any build, or the guest's userspace. The build's
    record is read only where the files alone do not settle it."""
    if not files or _drives_build(files):
        return ''
    return untouched_by(compiled(g), files, f'the {g.arch} guest ({g.name})')


# An object's line in its directory's Makefile: obj-$(CONFIG_X) += a.o b.o ...
_OBJ_LINE = re.compile(r'^\s*obj-\$\((CONFIG_\w+)\)\s*[:+]?=(.*)$')


def config_gate(tree: Path, rel: str) -> str | None:
    """The CONFIG_ symbol whose obj- line in the file's own Makefile (or Kbuild)
    names it (a .c or .S file compiled as one object), or None where no such line
    settles it (a header, obj-y, a composite object, no Makefile)."""
    p = Path(rel)
    if p.suffix not in ('.c', '.S') or '..' in p.parts:
        return None
    obj = p.with_suffix('.o').name
    for name in ('Kbuild', 'Makefile'):
        try:
            text = (tree / p.parent / name).read_text(errors='replace')
        except OSError:
            continue
        for line in text.replace('\\\n', ' ').splitlines():
            m = _OBJ_LINE.match(line)
            if m and obj in m.group(2).split():
                return m.group(1)
        return None
    return None


def not_configured(tree: Path, config: Path, files: tuple[str, ...], what: str) -> str:
    """Why a guest configured as config (a .config) cannot build any of files (one
    line), or '' where that is not settled: each is a .c or .S file whose own
    Makefile line is gated by a CONFIG_ symbol the .config does not set. Decided
    from the configuration alone, before a cold build."""
    if not files or _drives_build(files):
        return ''
    try:
        have = config.read_text(errors='replace').splitlines()
    except OSError:
        return ''
    gates = [config_gate(tree, f) for f in files]
    if any(g is None or f'{g}=y' in have or f'{g}=m' in have for g in gates):
        return ''
    why = ', '.join(f'{f} ({g})' for f, g in zip(files, gates))
    return (f'the patch changes no file {what} can build: its .config sets none of the '
            f'symbols their Makefile lines need: {why}')


def untouched_by(read: frozenset[str] | None, files: tuple[str, ...], what: str) -> str:
    """untouched() given what the guest's build read (compiled())."""
    if read is None or not files or _drives_build(files) or any(f in read for f in files):
        return ''
    return (f'the patch changes no file {what} builds from: kbuild\'s record of its '
            f'{len(read)} sources and headers names none of ' + ', '.join(files))
