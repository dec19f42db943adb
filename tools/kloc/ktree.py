# SPDX-License-Identifier: GPL-2.0
"""Kernel source trees: Debian's linux-source-X packages, or the user's KDIR."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import progress
from .version import KernelVersion, VersionError, tree_version
from .errors import KlocError

SUPPORTED_KERNELS = ('6.12', '6.1')
STAMP = '.kloc-extracted'
# Files every usable tree has; a tree missing one is damaged.
KEY_FILES = ('Makefile', 'Kconfig', 'tools/testing/kunit/kunit.py',
             'scripts/checkpatch.pl', 'drivers/irqchip/irq-gic-v3-its.c')


class TreeError(KlocError):
    """No usable kernel tree."""


@dataclass(frozen=True)
class Tree:
    path: Path
    version: KernelVersion
    origin: str  # 'debian' or 'kdir'

    @property
    def label(self) -> str:
        return f'linux-{self.version}'


def check_tree(path: Path) -> KernelVersion:
    """Return the version of a complete kernel tree, or raise TreeError."""
    if not path.is_dir():
        raise TreeError(f'{path} is not a directory; set KDIR to the top of a kernel '
                        'source tree, or use KERNEL=6.12|6.1')
    try:
        version = tree_version(path)
    except VersionError as e:
        raise TreeError(f'{e}; set KDIR to the top of a kernel source tree') from e
    missing = [f for f in KEY_FILES if not (path / f).is_file()]
    if missing:
        raise TreeError(f'{path} is not a complete kernel tree: missing {", ".join(missing)}')
    return version


def user_tree(kdir: str) -> Tree:
    path = Path(kdir).expanduser().resolve()
    version = check_tree(path)
    if version < KernelVersion(6, 1):
        raise TreeError(f'{path} is Linux {version}; this package supports 6.1 and later')
    return Tree(path, version, 'kdir')


def _tarball(kernel: str) -> Path:
    return Path(f'/usr/src/linux-source-{kernel}.tar.xz')


def _stamp_for(tarball: Path) -> dict[str, object]:
    st = tarball.stat()
    return {'tarball': str(tarball), 'size': st.st_size, 'mtime_ns': st.st_mtime_ns}


def _tree_is_good(dest: Path, kernel: str, want: dict[str, object]) -> str:
    """Return '' if dest is a finished extraction of want, else why not."""
    try:
        stamp = json.loads((dest / STAMP).read_text())
    except (OSError, ValueError):
        return 'no completion stamp'
    if stamp != want:
        return 'the linux-source package changed since it was extracted'
    try:
        version = check_tree(dest)
    except TreeError as e:
        return str(e)
    if version.series != kernel:
        return f'it holds {version}, not {kernel}'
    return ''


def debian_tree(kernel: str, cache: Path) -> Tree:
    """Extract Debian's linux-source-<kernel> once into the cache, and reuse it."""
    if kernel not in SUPPORTED_KERNELS:
        raise TreeError(f'KERNEL={kernel} is not supported; use one of '
                        f'{", ".join(SUPPORTED_KERNELS)}, or KDIR=/path/to/tree')
    tarball = _tarball(kernel)
    if not tarball.is_file():
        raise TreeError(f'{tarball} is missing; install it with '
                        f'"apt-get install linux-source-{kernel}" (or run "make deps" as root)')
    # trees/linux-X/src, next to trees/linux-X/build-ARCH: a tree and its
    # copies for mutants keep the same relative layout, so ccache can share.
    src = cache / 'trees' / f'linux-{kernel}'
    dest = src / 'src'
    want = _stamp_for(tarball)
    if dest.exists():
        why = _tree_is_good(dest, kernel, want)
        if not why:
            return Tree(dest, check_tree(dest), 'debian')
        progress.say(f'{dest} is unusable ({why}); extracting it again')
        shutil.rmtree(dest)
    src.mkdir(parents=True, exist_ok=True)
    tmp = src / f'.tmp-src-{os.getpid()}'
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    progress.say(f'extracting {tarball} into {dest}')
    try:
        subprocess.run(['tar', '-xJf', str(tarball), '-C', str(tmp), '--strip-components=1'],
                       check=True)
        version = check_tree(tmp)
        if version.series != kernel:
            raise TreeError(f'{tarball} holds Linux {version}, not {kernel}')
        (tmp / STAMP).write_text(json.dumps(want, sort_keys=True))
        tmp.rename(dest)
    except (subprocess.CalledProcessError, TreeError):
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    progress.say(f'extracted Linux {version}')
    return Tree(dest, version, 'debian')


def uncommitted(path: Path) -> list[str]:
    """Tracked files of a git tree with uncommitted changes (not the package's own)."""
    if not (path / '.git').exists():
        return []
    try:
        proc = subprocess.run(['git', '-C', str(path), 'status', '--porcelain',
                               '--untracked-files=no', '-z'],
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if proc.returncode != 0:
        return []
    files = [e[3:] for e in proc.stdout.split('\0') if len(e) > 3]
    return sorted(f for f in files if not f.startswith('.kloc/'))


def resolve(kernel: str, kdir: str, cache: Path) -> Tree:
    """KDIR wins over KERNEL."""
    if kdir:
        return user_tree(kdir)
    return debian_tree(kernel, cache)
