# SPDX-License-Identifier: GPL-2.0
"""Kernel source trees: Debian's linux-source-X packages, or the user's KDIR.

Either is only read: kloc builds a copy of it in the cache, refreshed on every
use, with the package's series applied there (workcopy.py). A Tree's path is
that copy; its source is the tree it was made from.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kloc import filelock, paths, progress
from kloc.series import changes, planning
from kloc.series.state import STATE_DIR, InstallError, read_manifest
from kloc.series.treefiles import Faults, sha
from kloc.trees import archive, kernels, workcopy
from kloc.paths import cache_dir, dropped_edits_dir
from kloc.version import KernelVersion, VersionError, tree_version
from kloc.errors import KlocError

STAMP = '.kloc-extracted'
STOCK = 'stock'         # trees/linux-X/stock: Debian's tree as extracted, never written
# Files every usable tree has; a tree missing one is damaged.
KEY_FILES = ('Makefile', 'Kconfig', 'tools/testing/kunit/kunit.py',
             'scripts/checkpatch.pl', 'drivers/irqchip/irq-gic-v3-its.c')
# Checked by content too: the files the suites are about.
CONTENT_FILES = ('mm/percpu.c', 'drivers/net/loopback.c')


class TreeError(KlocError):
    """No usable kernel tree."""


@dataclass(frozen=True)
class Tree:
    path: Path                  # what kloc builds: a copy in the cache (copy=False: source)
    version: KernelVersion
    origin: str                 # 'debian', 'kdir'; 'mutant', 'review': copies of copies
    source: Path | None = None  # the tree the copy is of (debian, kdir): never written

    @property
    def label(self) -> str:
        return f'linux-{self.version}'


def check_tree(path: Path) -> KernelVersion:
    """Return the version of a complete kernel tree, or raise TreeError."""
    if not path.is_dir():
        raise TreeError(f'{path} is not a directory; set KDIR to the top of a kernel '
                        'source tree, or use KERNEL=' + '|'.join(kernels.names()))
    try:
        version = tree_version(path)
    except VersionError as e:
        raise TreeError(f'{e}; set KDIR to the top of a kernel source tree') from e
    missing = [f for f in KEY_FILES if not (path / f).is_file()]
    if missing:
        raise TreeError(f'{path} is not a complete kernel tree: missing {", ".join(missing)}')
    return version


def _copy(source: Path, copy: Path, version: KernelVersion, origin: str) -> Tree:
    """The tree kloc builds: copy, refreshed from source, the series applied."""
    try:
        # KLOC_FAULT_AFTER: tests/test_kdir_untouched.py kills a command in its writes
        workcopy.prepare(source, copy, version, changes.load_series(),
                         f'Linux {version} at {source}', Faults.from_env(os.environ))
    except workcopy.CopyError as e:
        raise TreeError(str(e)) from None
    return Tree(copy, version, origin, source)


def kdir_copy(kdir: Path, version: KernelVersion, cache: Path) -> Path:
    """Where a KDIR tree's copy lives (its build dirs beside it): one per tree."""
    key = hashlib.sha256(str(kdir).encode()).hexdigest()[:8]
    return paths.cache_subdir(cache, 'kdir') / f'linux-{version}-{key}' / 'src'


def user_tree(kdir: str, cache: Path, copy: bool = True) -> Tree:
    path = Path(kdir).expanduser().resolve()
    version = check_tree(path)
    if version < kernels.OLDEST:
        raise TreeError(f'{path} is Linux {version}; this package supports '
                        f'{kernels.OLDEST.series} and later')
    if not copy:
        return Tree(path, version, 'kdir', path)
    return _copy(path, kdir_copy(path, version, cache), version, 'kdir')


def source_dir() -> Path:
    """Where Debian's linux-source-X packages put their tarballs."""
    return Path(os.environ.get('KLOC_LINUX_SOURCE_DIR', '/usr/src'))


def tarball_path(kernel: str) -> Path:
    """Debian's linux-source tarball of kernel (it may be missing): where the package
    installs it, or for a kernel of another suite, where archive.py unpacks it."""
    k = kernels.get(kernel)
    if k is not None and k.suite:
        return archive.cached_source(cache_dir(), kernel) or \
            cache_dir() / 'debian' / f'linux-source-{kernel}_(not fetched)' / 'usr' / 'src' / \
            f'linux-source-{kernel}.tar.xz'
    return source_dir() / f'linux-source-{kernel}.tar.xz'


def _stamp_for(tarball: Path) -> dict[str, object]:
    st = tarball.stat()
    return {'tarball': str(tarball), 'size': st.st_size, 'mtime_ns': st.st_mtime_ns}


def checked_files(version: KernelVersion) -> list[str]:
    """Files whose content is checked on every use: the key files and the series'."""
    files = set(KEY_FILES) | set(CONTENT_FILES)
    files |= set(planning.series_files(version, changes.load_series()))
    return sorted(files)


def _hashes(root: Path, files: list[str]) -> dict[str, str | None]:
    return {rel: sha((root / rel).read_bytes()) if (root / rel).is_file() else None
            for rel in files}


def _truncated(cur: bytes | None, expected: bytes | None) -> bool:
    """Whether cur looks like expected cut short: missing, or a proper prefix of it."""
    if expected is None:
        return False
    return cur is None or (len(cur) < len(expected) and expected.startswith(cur))


def _from_tarball(kernel: str, files: list[str]) -> dict[str, bytes | None]:
    """Some files as the tarball has them (one pass over it)."""
    tarball = tarball_path(kernel)
    with tempfile.TemporaryDirectory(prefix='kloc-orig-') as tmp:
        subprocess.run(['tar', '-xJf', str(tarball), *archive.TAR_SAFE, '-C', tmp,
                        '--strip-components=1', '--ignore-failed-read',
                        *[f'linux-source-{kernel}/{f}' for f in files]],
                       capture_output=True)
        return {f: (Path(tmp) / f).read_bytes() if (Path(tmp) / f).is_file() else None
                for f in files}


def _damage(dest: Path, version: KernelVersion, want: dict[str, str | None]) -> list[str]:
    """The checked files that are damaged: missing or cut short, or a saved original
    that is not the tarball's.

    A file that differs otherwise is somebody's edit, not damage: it is kept
    (for the files the package manages, install decides whether it can stay),
    and the run says so.
    """
    try:
        m = read_manifest(dest)
    except InstallError:
        m = None
    managed = m.files if m else {}
    bad, differ = [], []
    for rel, h in sorted(want.items()):
        p = dest / rel
        cur = sha(p.read_bytes()) if p.is_file() else None
        r = managed.get(rel)
        if r is None:
            if cur != h:
                differ.append(rel)
            continue
        orig = dest / STATE_DIR / 'orig' / rel
        saved = sha(orig.read_bytes()) if orig.is_file() else None
        if saved != h:
            bad.append(f'{rel} (its saved original)')
        elif cur != r.installed and cur != h:
            differ.append(rel)
    if not differ:
        return bad
    originals = _from_tarball(version.series, differ)
    planned: dict[str, bytes | None] = {}
    if any(rel in managed for rel in differ):
        try:
            planned = dict(planning.plan(dest, version, changes.load_series()).final)
        except InstallError:
            planned = {}
    for rel in differ:
        p = dest / rel
        cur_data = p.read_bytes() if p.is_file() else None
        if _truncated(cur_data, originals.get(rel)) or _truncated(cur_data, planned.get(rel)):
            bad.append(rel)
        else:
            progress.say(f'{dest / rel} differs from {tarball_path(version.series).name}: an '
                         'edit, not damage; it is kept')
    return bad


def _tree_is_good(dest: Path, kernel: str, want: dict[str, object]) -> str:
    """Return '' if dest is a finished, undamaged extraction of want, else why not."""
    try:
        stamp = json.loads((dest / STAMP).read_text())
    except (OSError, ValueError):
        return 'no completion stamp'
    if not isinstance(stamp, dict) or \
            {k: stamp.get(k) for k in want} != want:
        return 'the linux-source package changed since it was extracted'
    try:
        version = check_tree(dest)
    except TreeError as e:
        return str(e)
    if version.series != kernel:
        return f'it holds {version}, not {kernel}'
    hashes = stamp.get('hashes')
    if not isinstance(hashes, dict):
        return 'its stamp has no content hashes (made by an older kloc)'
    bad = _damage(dest, version, hashes)
    if bad:
        return f'damaged: {", ".join(bad)} differ from {want["tarball"]}'
    return ''


def _clean_leftovers(src: Path) -> None:
    """Half-extracted trees and half-deleted old ones of runs that were killed."""
    for p in src.glob('.tmp-src-*'):
        pid = p.name.rsplit('-', 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        progress.say(f'removing {p}, left by an interrupted extraction')
        shutil.rmtree(p, ignore_errors=True)
    for p in src.glob('.old-src-*'):
        shutil.rmtree(p, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _save_damaged(dest: Path, files: list[str]) -> None:
    """Keep a copy of the files that differ, in case they were somebody's work."""
    to = dropped_edits_dir()
    saved = []
    for rel in files:
        p = dest / rel.split(' (')[0]
        if p.is_file():
            (to / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, to / rel)
            saved.append(rel)
    if saved:
        progress.say(f'copies of the damaged files are in {to}: {", ".join(saved)}')


def debian_tree(kernel: str, cache: Path, copy: bool = True) -> Tree:
    """Extract Debian's linux-source-<kernel> once into the cache, and reuse it.

    Every use checks the key files and the files the package touches by
    content against the tarball's (or the package's, where installed). A
    damaged tree is extracted again, into a temporary directory that is
    renamed into place; an extraction that is killed leaves only that
    temporary directory, which the next run removes.
    """
    k = kernels.get(kernel)
    if k is None:
        raise TreeError(f'KERNEL={kernel} is not supported; use one of '
                        f'{", ".join(kernels.names())}, or KDIR=/path/to/tree')
    tarball = tarball_path(kernel)
    if not tarball.is_file() and k.suite:
        tarball = archive.fetch_source(cache, kernel, k.suite)
    if not tarball.is_file():
        raise TreeError(f'{tarball} is missing; install it with '
                        f'"apt-get install linux-source-{kernel}" (or run "make deps" as root)')
    # trees/linux-X/stock as extracted; trees/linux-X/src, kloc's copy, next to
    # trees/linux-X/build-ARCH: a tree and its copies for mutants keep the same
    # relative layout, so ccache can share.
    src = cache / 'trees' / f'linux-{kernel}'
    dest = src / STOCK
    want = _stamp_for(tarball)
    paths.cache_subdir(cache, 'trees', src.name)    # the user's alone, or refused
    # The copy is refreshed after the lock is let go: its own lock may wait for another
    # command, which may itself wait for this lock (a command holds its copy until exit).
    with filelock.exclusive(src / '.lock'):
        version = _checked_or_extracted(tarball, kernel, src, want)
    if not copy:
        return Tree(dest, version, 'debian', dest)
    return _copy(dest, src / 'src', version, 'debian')


def _checked_or_extracted(tarball: Path, kernel: str, src: Path,
                          want: dict[str, object]) -> KernelVersion:
    """src/STOCK, checked against the tarball, or extracted (again); under src/.lock."""
    dest = src / STOCK
    _clean_leftovers(src)
    if dest.exists():
        why = _tree_is_good(dest, kernel, want)
        if not why:
            return check_tree(dest)
        if why.startswith('its stamp has no content hashes'):
            why = _upgrade_stamp(dest, tarball, kernel, want)
            if not why:
                return check_tree(dest)
        progress.say(f'{dest} is unusable ({why}); extracting it again')
        damaged = re.match(r'damaged: (.*) differ from ', why)
        if damaged:
            _save_damaged(dest, damaged.group(1).split(', '))
        old = src / f'.old-src-{os.getpid()}'
        dest.rename(old)
        shutil.rmtree(old)
    version = _extract(tarball, kernel, src, want)
    progress.say(f'extracted Linux {version}')
    return version


def _extract(tarball: Path, kernel: str, src: Path, want: dict[str, object]) -> KernelVersion:
    tmp = src / f'.tmp-src-{os.getpid()}'
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    progress.say(f'extracting {tarball} into {src / STOCK}')
    done = False
    try:
        subprocess.run(['tar', '-xJf', str(tarball), *archive.TAR_SAFE, '-C', str(tmp),
                        '--strip-components=1'], check=True)
        archive.drop_setid(tmp)
        version = check_tree(tmp)
        if version.series != kernel:
            raise TreeError(f'{tarball} holds Linux {version}, not {kernel}')
        stamp = dict(want, hashes=_hashes(tmp, checked_files(version)))
        (tmp / STAMP).write_text(json.dumps(stamp, sort_keys=True))
        tmp.rename(src / STOCK)
        done = True
    except subprocess.CalledProcessError as e:
        raise TreeError(f'extracting {tarball} failed (tar exited {e.returncode}); check '
                        'the disk space (df -h) and the package (apt-get install '
                        f'--reinstall linux-source-{kernel})') from None
    finally:
        if not done:        # also on Ctrl-C and SIGTERM: no half tree is left
            shutil.rmtree(tmp, ignore_errors=True)
    return version


def _upgrade_stamp(dest: Path, tarball: Path, kernel: str, want: dict[str, object]) -> str:
    """Add content hashes to an older stamp, from the tarball itself; '' if the tree is good."""
    version = check_tree(dest)
    files = checked_files(version)
    progress.say(f'{dest}: checking its content against {tarball} (once)')
    with tempfile.TemporaryDirectory(prefix='kloc-stamp-') as tmp:
        top = f'linux-source-{kernel}'       # Debian's tarballs have this top directory
        subprocess.run(['tar', '-xJf', str(tarball), *archive.TAR_SAFE, '-C', tmp,
                        '--strip-components=1', '--ignore-failed-read',
                        *[f'{top}/{f}' for f in files]],
                       capture_output=True)
        hashes = _hashes(Path(tmp), files)
    bad = _damage(dest, version, hashes)
    if bad:
        return f'damaged: {", ".join(bad)} differ from {tarball}'
    stamp = dict(want, hashes=hashes)
    (dest / STAMP).write_text(json.dumps(stamp, sort_keys=True))
    return ''


def resolve(kernel: str, kdir: str, cache: Path, copy: bool = True) -> Tree:
    """KDIR wins over KERNEL. copy=False: the tree as it is, for a command that only
    reads it (kloc patches): no copy is made or refreshed."""
    if kdir:
        return user_tree(kdir, cache, copy)
    return debian_tree(kernel, cache, copy)
