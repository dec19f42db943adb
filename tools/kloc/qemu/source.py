# SPDX-License-Identifier: GPL-2.0
"""The files kloc takes from Debian's qemu source package of exactly the QEMU it runs.

qemu-plugin.h (kloc-count is built against it), the plugin API reference,
and contrib/plugins/cache.c (QEMU's own cache model, for kloc-count's
cross-check): from the upstream tarball the suite's signed Sources index
names (trees/archive.py), with the parts of Debian's patches that change
them applied, from the .debian.tar of the same version. Where the mirror no
longer has that .debian.tar (bookworm-backports keeps a backport's upstream
tarball only), one line says the patches went unchecked. One route for
QEMU 10.0 (qemu/release.py) and for the installed QEMU (qemu/system.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Collection
from pathlib import Path

from kloc import progress
from kloc.errors import KlocError
from kloc.trees import archive

HEADER = 'qemu-plugin.h'
CACHE_PLUGIN = 'cache.c'
# Path in the source: the name kloc keeps it under.
FROM_SOURCE = {'include/qemu/qemu-plugin.h': HEADER,
               'docs/devel/tcg-plugins.rst': 'tcg-plugins.rst',
               'contrib/plugins/cache.c': CACHE_PLUGIN}
DONE = 'source-version'             # written last: the folder is complete
HUNK = re.compile(r'^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@')


class QemuSourceError(KlocError):
    """A file of the qemu source cannot be had."""


def file_diffs(patch: str, wanted: Collection[str]) -> str:
    """The parts of a unified diff (-p1 paths) that change the wanted paths, each part
    its ---/+++ lines and hunks; '' if it changes none of them."""
    lines = patch.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not (lines[i].startswith('--- ') and i + 1 < len(lines)
                and lines[i + 1].startswith('+++ ')):
            i += 1
            continue
        target = lines[i + 1][4:].split('\t')[0].strip()
        keep = target.split('/', 1)[-1] in wanted
        part = lines[i:i + 2]
        i += 2
        while i < len(lines) and (m := HUNK.match(lines[i])):
            old, new = int(m.group(1) or 1), int(m.group(2) or 1)
            part.append(lines[i])
            i += 1
            while i < len(lines) and (old or new or lines[i].startswith('\\')):
                c = lines[i][:1].replace('\n', ' ')   # a bare newline: empty context
                old -= c in ' -'
                new -= c in ' +'
                part.append(lines[i])
                i += 1
        if keep:
            out += part
    return ''.join(out)


def _debian_patches(a: archive.Archive, version: str, work: Path) -> list[tuple[str, str]]:
    """(name, text) of Debian's patches to this version, in series order; [] (saying
    so) where the mirror has no .debian.tar of it."""
    try:
        tarball = archive.source_file(a, 'qemu', version, 'debian', work)
    except archive.ArchiveError as e:
        why = 'the mirror no longer has it (404)' if '404' in str(e) else str(e)
        progress.say(f'Debian\'s patches to qemu {version} are not checked, as its '
                     f'.debian.tar cannot be had ({why}): the files are upstream\'s')
        return []
    x = work / 'debian-x'
    x.mkdir()
    r = subprocess.run(['tar', '-x', *archive.TAR_SAFE, '-f', str(tarball), '-C', str(x),
                        'debian/patches'], capture_output=True, text=True)
    if r.returncode or not (x / 'debian' / 'patches' / 'series').is_file():
        return []       # a version with no patches
    return read_series(x / 'debian' / 'patches', tarball.name)


def read_series(patches: Path, where: str) -> list[tuple[str, str]]:
    """(name, text) of each patch a debian/patches/series names, in its order: each a
    regular file inside that folder (not through a link, not by .. or an absolute
    path: the tarball is not kloc's), else QemuSourceError naming it."""
    inside = patches.resolve()
    series = patches / 'series'
    if any(f.is_symlink() for f in (patches.parent, patches, series)):
        raise QemuSourceError(f'{where}: debian/patches or its series is a symbolic link')
    found = []
    for line in series.read_text().splitlines():
        name = line.split('#', 1)[0].split()
        if not name:
            continue
        rel, p = Path(name[0]), patches / name[0]
        if rel.is_absolute() or '..' in rel.parts or p.is_symlink() or not p.is_file() \
                or p.resolve() != inside / rel:
            raise QemuSourceError(f'{where}: debian/patches/series names {name[0]}, which '
                                  'is no regular file in debian/patches')
        found.append((name[0], p.read_text(errors='replace')))
    return found


def apply_patches(top: Path, patches: list[tuple[str, str]], wanted: Collection[str]) -> None:
    """Apply to the wanted files under top what each (name, text) patch changes in them
    (and nothing else: the rest of the source is not there)."""
    for name, text in patches:
        diff = file_diffs(text, wanted)
        if not diff:
            continue
        progress.say(f'applying Debian\'s {name} to what kloc takes of {top.name}')
        r = subprocess.run(['patch', '-p1', '-s', '--batch', '--no-backup-if-mismatch',
                            '-d', str(top)], input=diff, capture_output=True, text=True)
        if r.returncode:
            raise QemuSourceError(f'Debian\'s {name} does not apply to {top.name}\'s '
                                  f'{", ".join(wanted)}: '
                                  f'{" ".join((r.stdout + r.stderr).split())[-400:]}')


def extract(a: archive.Archive, version: str, work: Path, into: Path,
            wanted: dict[str, str] | None = None) -> None:
    """The wanted files (FROM_SOURCE: path in the source, name kept) of qemu=version
    as Debian builds it, into a folder; work is a scratch folder."""
    wanted = dict(FROM_SOURCE if wanted is None else wanted)
    progress.say(f'downloading the upstream tarball of the qemu source {version} (for '
                 f'{", ".join(wanted.values())})')
    orig = archive.source_file(a, 'qemu', version, 'orig', work)
    x = work / 'src-x'
    x.mkdir()
    r = subprocess.run(['tar', '-x', *archive.TAR_SAFE, '-f', str(orig), '-C', str(x),
                        '--wildcards', '--no-anchored', *wanted],
                       capture_output=True, text=True)
    if r.returncode:
        raise QemuSourceError(f'extracting {", ".join(wanted)} from {orig.name} '
                              f'failed: {r.stderr.strip()[-400:]}')
    tops = [d for d in x.iterdir() if d.is_dir() and not d.is_symlink()]
    if len(tops) != 1:
        raise QemuSourceError(f'{orig.name} has no single top folder')
    top = tops[0]
    for rel in wanted:
        f = top / rel
        if f.is_symlink() or not f.is_file():
            raise QemuSourceError(f'{orig.name} holds no regular {top.name}/{rel}')
    apply_patches(top, _debian_patches(a, version, work), wanted)
    for rel, name in wanted.items():
        shutil.copyfile(top / rel, into / name)
