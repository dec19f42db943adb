# SPDX-License-Identifier: GPL-2.0
"""The copy of a kernel tree that kloc builds; the tree itself is only read.

The source is the user's tree (KDIR) or Debian's extracted linux-source, and
nothing kloc runs writes it. Its files are hard-linked into a copy in the
cache: for a git tree, what `git ls-files -co --exclude-standard` names
(tracked files and untracked ones git does not ignore, so uncommitted edits
are tested as they are); for any other tree, every file, and such a tree
with in-tree build output is refused. The copy is refreshed in place: a file
already linked to the source's inode is left alone, so make sees the mtimes
it saw before and rebuilds only what changed; a file gone from the source
goes from the copy. On another filesystem, where no link can be made, the
files are copied (cp --reflink=auto, mtimes kept) and compared by size,
mtime and mode instead.

The package's series is then applied to the copy (apply_series()), each file
it changes written as a new inode (never through a link, which would write
the source) and only when its bytes differ, so its mtime, and the objects
built from it, survive a refresh. The copy keeps the series' record in
.kloc/ (the manifest and the originals, as state.py reads them), so that
review and mutants read it as they read any tree that carries the package.

One command refreshes a copy at a time (an exclusive lock beside it); it then
holds the lock shared until it exits, so that no other command refreshes the
files under its builds. Child processes are told (HELD_ENV) which copies
their parent holds, and use them as they are.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kloc import progress
from kloc.errors import KlocError
from kloc.series import state as st
from kloc.series.changes import Change
from kloc.series.planning import carries_package, plan_from, recover_original, series_files
from kloc.series.state import MANIFEST, ORIG, STATE_DIR, ManagedFile, Manifest
from kloc.series.treefiles import NO_FAULTS, Faults, Writer, file_mode, read_file, sha, \
    tmp_name
from kloc.version import KernelVersion

HELD_ENV = 'KLOC_HELD_COPIES'
# Files kloc writes into a source it extracted itself (trees/sources.py): not the tree's.
KLOC_FILES = frozenset({'.kloc-extracted'})
# A tree that is not a git tree, with these, was built in place: its copy would carry
# the build's output, and kbuild refuses an O= build of a tree configured in place.
BUILD_OUTPUT = ('.config', 'include/config', 'include/generated')
_CP_BATCH = 2000
_HELD: dict[Path, int] = {}      # copy -> the fd of its lock, held shared until exit


class CopyError(KlocError):
    """The tree cannot be copied as it is."""


@dataclass
class Refreshed:
    """What a refresh did."""
    files: int = 0                  # the source's files, as listed
    linked: int = 0                 # linked (or copied) into the copy anew
    removed: int = 0                # gone from the source, so from the copy
    written: list[str] = field(default_factory=list)    # by the series
    copied: bool = False            # another filesystem: copies, not links
    seconds: float = 0.0


def is_git(source: Path) -> bool:
    return (source / '.git').exists()


def listing(source: Path) -> list[str]:
    """The source's files as kloc copies them (relative paths, sorted)."""
    if is_git(source):
        proc = subprocess.run(['git', '--no-optional-locks', '-C', str(source), 'ls-files',
                               '-co', '--exclude-standard', '-z'],
                              capture_output=True)
        if proc.returncode != 0:
            err = proc.stderr.decode(errors='replace').strip().splitlines()
            raise CopyError(f'{source}: git ls-files failed ({err[-1] if err else "no message"}); '
                            'kloc copies the files git lists. Fix the repository (git status '
                            'shows the problem), or give a tree that is not a git tree')
        names = {n for n in proc.stdout.decode(errors='surrogateescape').split('\0') if n}
        return sorted(names)
    built = [b for b in BUILD_OUTPUT if os.path.lexists(source / b)]
    if built:
        raise CopyError(f'{source} is not a git tree and holds in-tree build output '
                        f'({", ".join(built)}): kloc would copy it into its builds. Run '
                        f'"make -C {source} mrproper" (it deletes that output), or make the '
                        'tree a git tree (kloc then copies only what git tracks or does not '
                        'ignore)')
    return sorted(rel for rel in _files(source) if rel not in KLOC_FILES)


def _files(root: Path, keep_dirs: frozenset[str] = frozenset()) -> Iterator[str]:
    """Every file and symlink under root, as a relative path; a symlink to a folder is
    one entry, not walked; a top-level folder in keep_dirs is not walked."""
    for top, dirs, files in os.walk(root):
        rel_top = os.path.relpath(top, root)
        prefix = '' if rel_top == '.' else rel_top + '/'
        if not prefix:
            dirs[:] = [d for d in dirs if d not in keep_dirs]
        yield from (prefix + name for name in files)
        yield from (prefix + d for d in dirs if os.path.islink(os.path.join(top, d)))


def _same(s: os.stat_result, d: os.stat_result, linking: bool) -> bool:
    if linking:
        return (s.st_dev, s.st_ino) == (d.st_dev, d.st_ino)
    return (stat.S_IFMT(s.st_mode) == stat.S_IFMT(d.st_mode) and s.st_size == d.st_size
            and s.st_mtime_ns == d.st_mtime_ns and s.st_mode == d.st_mode)


def _clear_way(dest: Path, rel: str) -> None:
    """Make dest/rel's parent a directory: a file or link in its place goes."""
    parent = dest
    for part in Path(rel).parent.parts:
        parent = parent / part
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            parent.unlink()
    (dest / rel).parent.mkdir(parents=True, exist_ok=True)


def _put(tmp: Path, target: Path) -> None:
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    os.replace(tmp, target)


def _copy_batch(source: Path, dest: Path, rels: list[str]) -> None:
    """Copy rels from source into dest (cp --reflink=auto, mtimes and modes kept)."""
    if not rels:
        return
    stage = dest.parent / f'.{dest.name}.stage-{os.getpid()}'
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    try:
        for i in range(0, len(rels), _CP_BATCH):
            batch = rels[i:i + _CP_BATCH]
            subprocess.run(['cp', '--reflink=auto', '--preserve=mode,timestamps', '-P',
                            '--parents', '-t', str(stage), '--', *batch],
                           cwd=source, check=True)
            for rel in batch:
                _clear_way(dest, rel)
                _put(stage / rel, dest / rel)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def mirror(source: Path, files: Iterable[str], dest: Path,
           skip: frozenset[str] = frozenset(), keep_dirs: frozenset[str] = frozenset(),
           dry: bool = False) -> Refreshed:
    """Make dest hold source's files (hard links, refreshed in place); a file in skip is
    the caller's to write; a top-level folder of dest in keep_dirs is left alone.

    A file in skip is never removed either (the caller writes it, or the series adds it).
    dry: count what would change, write nothing.
    Writes only inside dest: every change there is a new link or file renamed into
    place, never a write into an existing inode (which may be the source's).
    """
    r = Refreshed()
    dest.mkdir(parents=True, exist_ok=True)
    linking = os.stat(source).st_dev == os.stat(dest).st_dev
    r.copied = not linking
    to_copy: list[str] = []
    present: set[str] = set()
    src_top, dest_top = str(source) + '/', str(dest) + '/'     # strings: 86,000 files
    for rel in files:
        try:
            sst = os.lstat(src_top + rel)
        except FileNotFoundError:
            continue                        # tracked, deleted in the work tree
        if not (stat.S_ISREG(sst.st_mode) or stat.S_ISLNK(sst.st_mode)):
            continue                        # a submodule's folder, a fifo
        present.add(rel)
        if rel in skip:
            continue
        try:
            if _same(sst, os.lstat(dest_top + rel), linking):
                continue
        except (FileNotFoundError, NotADirectoryError):
            pass
        s, d = source / rel, dest / rel
        if dry:
            r.linked += 1
            continue
        if not linking:
            to_copy.append(rel)
            continue
        _clear_way(dest, rel)
        tmp = tmp_name(d)
        tmp.unlink(missing_ok=True)
        try:
            os.link(s, tmp, follow_symlinks=False)
        except OSError as e:
            if e.errno != errno.EXDEV:      # another filesystem: copies from here on
                raise
            linking, r.copied = False, True
            to_copy.append(rel)
            continue
        _put(tmp, d)
        r.linked += 1
    # a copy is compared by size, mtime and mode, as make would see it
    to_copy = [rel for rel in to_copy if not _unchanged_copy(source, dest, rel)]
    _copy_batch(source, dest, to_copy)
    r.linked += len(to_copy)
    r.files = len(present)
    r.removed = _remove_others(dest, present | skip, keep_dirs, dry)
    return r


def _unchanged_copy(source: Path, dest: Path, rel: str) -> bool:
    try:
        return _same(os.lstat(source / rel), os.lstat(dest / rel), False)
    except FileNotFoundError:
        return False


def _remove_others(dest: Path, present: set[str] | frozenset[str], keep_dirs: frozenset[str],
                   dry: bool) -> int:
    gone = [rel for rel in _files(dest, keep_dirs) if rel not in present]
    if not dry:
        for rel in gone:
            os.unlink(dest / rel)
    return len(gone)


# --- the series, on the copy -------------------------------------------------

Planned = tuple[dict[str, 'bytes | None'], dict[str, 'bytes | None']]


def _plan(source: Path, version: KernelVersion, series: list[Change]) -> Planned:
    """(the originals, the files as the copy has them) of every file the series manages.

    A source that carries the whole series already (git am of make patches) is used
    as it is, its originals recovered from the series; any other gets it applied."""
    rels = series_files(version, series)
    data = {rel: read_file(source, rel) for rel in rels}
    if all(carries_package(rel, data[rel], version, series) for rel in rels):
        originals: dict[str, bytes | None] = {}
        for rel in rels:
            found, orig = recover_original(rel, data[rel], version, series)
            originals[rel] = orig if found else data[rel]
        return originals, data
    p = plan_from(lambda rel: read_file(source, rel), source, version, series)
    return dict(p.pristine), dict(p.final)


def apply_series(copy: Path, source: Path, version: KernelVersion, series: list[Change],
                 planned: Planned | None = None, faults: Faults = NO_FAULTS) -> list[str]:
    """Make the copy's managed files the series applied to the source's; the files written.

    A file the series leaves as the source has it is mirror()'s to link; any other is
    written only where its bytes differ. InstallError (planning) if the series does not
    apply. planned: _plan()'s answer, if the caller has it. faults: for the tests, a
    write to fail or to be killed at (treefiles.Faults).
    """
    originals, final = planned or _plan(source, version, series)
    w = Writer(faults)
    written = []
    files = {}
    state = copy / STATE_DIR
    for rel in sorted(final):
        mode = file_mode(source, rel)
        files[rel] = ManagedFile(sha(originals[rel]), sha(final[rel]), mode)
        if final[rel] != read_file(source, rel) and w.put(copy, rel, final[rel], mode):
            written.append(rel)
        w.put(state / ORIG, rel, originals[rel], mode)
    manifest = Manifest(str(version), [c.name for c in series], files).to_json().encode()
    w.put(state, MANIFEST, manifest, 0o644)
    _prune_orig(state / ORIG, set(final))
    return written


def _prune_orig(orig: Path, managed: set[str]) -> None:
    for top, _, names in os.walk(orig):
        for name in names:
            rel = os.path.relpath(os.path.join(top, name), orig)
            if rel not in managed:
                os.unlink(os.path.join(top, name))


# --- one command's use of a copy ----------------------------------------------

def _held() -> list[str]:
    return [p for p in os.environ.get(HELD_ENV, '').split(os.pathsep) if p]


def release_all() -> None:
    """Let go of every copy this process holds, as if it exited: for a process that
    runs one job after another (tools/tests/run.py's workers), once a job is done."""
    mine = {str(copy) for copy in _HELD}
    for fd in _HELD.values():
        os.close(fd)
    _HELD.clear()
    rest = [p for p in _held() if p not in mine]     # what a parent holds stays
    if rest:
        os.environ[HELD_ENV] = os.pathsep.join(rest)
    else:
        os.environ.pop(HELD_ENV, None)


def _refresh(source: Path, copy: Path, version: KernelVersion, series: list[Change],
             dry: bool, faults: Faults = NO_FAULTS) -> Refreshed:
    """Refresh copy from source and apply the series there (dry: only count)."""
    # .kloc/ in the source is an old install's state, not the tree's
    files = [f for f in listing(source) if f.split('/', 1)[0] != STATE_DIR]
    planned = _plan(source, version, series)
    _, final = planned
    changed = frozenset(rel for rel, data in final.items() if data != read_file(source, rel))
    r = mirror(source, files, copy, skip=changed, keep_dirs=frozenset({STATE_DIR}), dry=dry)
    if dry:
        r.written = [rel for rel in sorted(changed) if read_file(copy, rel) != final[rel]]
        if not (copy / STATE_DIR / MANIFEST).is_file():
            r.written.append(f'{STATE_DIR}/{MANIFEST}')
        return r
    # the series writes through no link the source put in the copy
    st.check_tree(copy, final)
    r.written = apply_series(copy, source, version, series, planned, faults)
    return r


def prepare(source: Path, copy: Path, version: KernelVersion, series: list[Change],
            what: str, faults: Faults = NO_FAULTS) -> Refreshed | None:
    """Refresh copy from source and apply the series there; hold the copy until exit.

    Where another command holds the copy, this one shares it if it is fresh, else waits
    for it to finish. A second use in one process refreshes it again. None where a
    parent process holds it (fresh, and kept so). what:
    the tree's name in the progress lines.
    """
    if copy not in _HELD and str(copy) in _held():
        return None
    start = time.monotonic()
    copy.parent.mkdir(parents=True, exist_ok=True)
    fd = _HELD.get(copy)
    if fd is None:
        fd = os.open(copy.parent / f'{copy.name}.lock',
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        r = _locked(fd, source, copy, version, series, what, faults)
    except BaseException:
        _HELD.pop(copy, None)
        os.close(fd)
        raise
    if copy not in _HELD:
        _HELD[copy] = fd
        os.environ[HELD_ENV] = os.pathsep.join(_held() + [str(copy)])
    r.seconds = time.monotonic() - start
    how = 'copied (another filesystem: no hard links)' if r.copied else 'linked'
    series_note = (f'; the series written to {", ".join(r.written)}' if r.written
                   else '; the series as before')
    progress.say(f'{what}: copy {copy} refreshed in {r.seconds:.1f} s: {r.files} files, '
                 f'{r.linked} {how} anew, {r.removed} removed{series_note}')
    return r


def _locked(fd: int, source: Path, copy: Path, version: KernelVersion, series: list[Change],
            what: str, faults: Faults) -> Refreshed:
    """The refresh, under the copy's lock; returns holding it shared."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fcntl.flock(fd, fcntl.LOCK_SH)
        r = _refresh(source, copy, version, series, dry=True)
        if not (r.linked or r.removed or r.written):
            r.linked = 0
            return r                        # fresh: shared with the command using it
        fcntl.flock(fd, fcntl.LOCK_UN)
        progress.say(f'{what}: another command is using {copy} and the tree changed since '
                     'it was refreshed: waiting for that command to finish')
        fcntl.flock(fd, fcntl.LOCK_EX)
    r = _refresh(source, copy, version, series, dry=False, faults=faults)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return r
