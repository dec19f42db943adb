# SPDX-License-Identifier: GPL-2.0
"""Reuse a kernel build dir whose inputs have not changed since its last build.

make decides what to rebuild from mtimes, but on a tree of 86,000 files a
build with nothing to do still costs 14 to 30 s here (kunit.py's olddefconfig,
make's walk of every directory, compile_commands.json). A build dir's stamp
records what its last successful build was made from, as make sees it: every
file of the source tree by path, size and mtime (.git/objects aside), the
inputs kloc passes (command, configuration fragments, compiler), and the image
it produced, by size and mtime. When all of that is as recorded, the image is
the one make would leave: the build is skipped and says so. Anything else,
including an image another command rebuilt since, builds as before.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from kloc.atomicfile import write_text

STAMP = '.kloc-built'
# A file each build that ran appends its image's path to, where the caller names one:
# make run's parts name their own, so that a part is credited with the builds it made,
# not with those other commands made in the cache while it ran (run/main.py).
BUILT_LOG = 'KLOC_BUILT_LOG'
BUILDING = '.kloc-building'    # while a build runs, and after one that did not finish


def tree_digest(src: Path, leave_out: Iterable[str] = ()) -> str:
    """The source tree as make sees it: each file's path, size and mtime, in walk
    order made stable; leave_out names files (relative) the caller adds itself."""
    skip = set(leave_out)
    h = hashlib.sha256()
    for root, dirs, files in os.walk(src):
        rel_root = os.path.relpath(root, src)
        if rel_root == '.git':
            dirs[:] = [d for d in dirs if d != 'objects']
        dirs.sort()
        for name in sorted(files):
            rel = name if rel_root == '.' else f'{rel_root}/{name}'
            if rel in skip:
                continue
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            h.update(f'{rel}\0{st.st_size}\0{st.st_mtime_ns}\n'.encode())
    return h.hexdigest()


def compiler(cc: str) -> str:
    """The compiler's own account of its version (a toolchain upgrade rebuilds)."""
    try:
        r = subprocess.run([cc, '--version'], capture_output=True, text=True, check=False)
    except OSError:
        return f'{cc}: not found'
    return r.stdout


def _image_state(image: Path) -> str:
    try:
        st = image.stat()
    except OSError:
        return 'missing'
    return f'{st.st_size}:{st.st_mtime_ns}'


def _file(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return 'missing'


def stamp(tree: str, inputs: Iterable[str], build_dir: Path, image: Path) -> str:
    """What a build of build_dir is made from: the tree's digest, the other inputs,
    the build dir's .config and the image."""
    h = hashlib.sha256(tree.encode())
    for part in inputs:
        h.update(b'\0' + part.encode())
    h.update(f'\0{_file(build_dir / ".config")}\0{_image_state(image)}'.encode())
    return h.hexdigest()


def unchanged(build_dir: Path, tree: str, inputs: Iterable[str], image: Path) -> bool:
    """Whether build_dir's last build was made from these very inputs."""
    try:
        recorded = (build_dir / STAMP).read_text().strip()
    except OSError:
        return False
    return image.is_file() and recorded == stamp(tree, inputs, build_dir, image)


def record(build_dir: Path, tree: str, inputs: Iterable[str], image: Path) -> None:
    """After a successful build: what it was made from; the build is over."""
    write_text(build_dir / STAMP, stamp(tree, inputs, build_dir, image) + '\n')
    (build_dir / BUILDING).unlink(missing_ok=True)
    log = os.environ.get(BUILT_LOG)
    if log:
        with open(log, 'a', encoding='utf-8') as f:
            f.write(f'{image}\n')


def built(log: Path, cache: Path) -> tuple[str, ...]:
    """The build dirs ('tree dir': cache/<trees, mutants, ...>/<tree>/<dir>/...) whose
    builds appended to log (BUILT_LOG), once each; a line that names no image in the
    cache is left out."""
    try:
        lines = log.read_text(encoding='utf-8', errors='replace').splitlines()
    except FileNotFoundError:
        return ()
    out = set()
    for line in lines:
        try:
            rel = Path(line).relative_to(cache)
        except ValueError:
            continue
        if len(rel.parts) > 3 and not {'..', '.'} & set(rel.parts):
            out.add(f'{rel.parts[1]} {rel.parts[2]}')
    return tuple(sorted(out))


def begin(build_dir: Path) -> None:
    """Before a build: a build that fails or is killed leaves no stamp, and a mark.

    kbuild writes an object's .cmd file in place, not renamed into place: a build
    killed while one was written leaves it cut short, and every later make of that
    dir stops on it ("unterminated call to function 'wildcard'"). So where the mark
    of an unfinished build is found, every .cmd file written since it goes; kbuild
    rebuilds each of those objects (from ccache, mostly) instead of trusting them.
    """
    (build_dir / STAMP).unlink(missing_ok=True)
    mark = build_dir / BUILDING
    try:
        since = mark.stat().st_mtime_ns
    except FileNotFoundError:
        since = None
    if since is not None:
        for top, _, files in os.walk(build_dir):
            for name in files:
                p = os.path.join(top, name)
                if name.endswith('.cmd') and os.lstat(p).st_mtime_ns >= since:
                    os.unlink(p)
    build_dir.mkdir(parents=True, exist_ok=True)
    write_text(mark, 'a build of this dir started and has not finished\n')
