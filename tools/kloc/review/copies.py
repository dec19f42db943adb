# SPDX-License-Identifier: GPL-2.0
"""The patched copies under $KLOC_CACHE/review/: in use, and pruned.

Each review (and make known-failures) keeps a hard-linked copy of the tree
with the patch applied, and its build dirs beside it: about 1 GB for each
tree, series and patch. Only the KEEP most recently used stay; the others
are removed when a copy is used, except any copy another command is using
now (it holds a shared lock on the copy until it exits).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from pathlib import Path

from kloc import filelock, progress

KEEP = 4
_IN_USE = '.in-use'
_NAME = re.compile(r'^linux-.+-[0-9a-f]{16}$')
_HELD: dict[Path, int] = {}       # copy -> the fd of its shared lock, kept open


def _last_used(root: Path) -> float:
    mark = root / _IN_USE
    return (mark if mark.exists() else root).stat().st_mtime


def use(cache: Path, root: Path, keep: int = KEEP) -> None:
    """Mark root used now and in use until this process exits; then remove the
    copies beyond the keep most recently used that no command is using."""
    with filelock.exclusive(cache / 'review' / '.lock'):
        root.mkdir(parents=True, exist_ok=True)
        if root not in _HELD:
            fd = os.open(root / _IN_USE, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
            fcntl.flock(fd, fcntl.LOCK_SH)
            _HELD[root] = fd
        os.utime(root / _IN_USE)
        _prune(cache, keep)


def _prune(cache: Path, keep: int) -> None:
    copies = sorted((d for d in (cache / 'review').iterdir()
                     if d.is_dir() and _NAME.match(d.name)), key=_last_used, reverse=True)
    for old in copies[keep:]:
        if old in _HELD:
            continue
        with open(old / _IN_USE, 'a') as mark:
            try:
                fcntl.flock(mark, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue                # another command is using it
            progress.say(f'removing {old}: the review copies kept are the {keep} most '
                         'recently used')
            shutil.rmtree(old)
