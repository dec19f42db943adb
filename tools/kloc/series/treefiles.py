# SPDX-License-Identifier: GPL-2.0
"""A kernel tree's files as kloc reads them and writes them in its copy of the tree
(trees/workcopy.py), and as git sees them (uncommitted()).

Every change written to the copy goes through a Writer: each write is atomic
(a new file renamed into place: never through a hard link, which the copy
shares with the tree), and each is counted, so that a test can make the
(N+1)-th one fail or kill the process (Faults) and check that the tree was
not touched. The faults are given as an argument; nothing here reads the
environment.
"""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

STATE_DIR = '.kloc'     # the series' record in a tree (state.py)

FAULT_AFTER_ENV = 'KLOC_FAULT_AFTER'
FAULT_MODE_ENV = 'KLOC_FAULT_MODE'


def sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def read_file(tree: Path, rel: str) -> bytes | None:
    """tree/rel's content; None if it is not a file."""
    p = tree / rel
    return p.read_bytes() if p.is_file() else None


def file_mode(tree: Path, rel: str) -> int | None:
    """tree/rel's permission bits; None if it does not exist."""
    try:
        return os.stat(tree / rel).st_mode & 0o777
    except FileNotFoundError:
        return None


def uncommitted(tree: Path) -> list[str]:
    """The files of a git tree with uncommitted changes, untracked ones git does not
    ignore included (kloc's copy has them), sorted; none in .kloc/ (the state an old
    kloc kept there). A rename or copy counts both its paths. Writes nothing.
    [] for a tree that is not a git tree, or where git fails."""
    if not (tree / '.git').exists():
        return []
    try:
        # --no-optional-locks: git status would otherwise refresh .git/index
        proc = subprocess.run(['git', '--no-optional-locks', '-C', str(tree), 'status',
                               '--porcelain', '--untracked-files=all', '-z'],
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if proc.returncode != 0:
        return []
    # -z: "XY path" each, and after a rename's or copy's, its old path on its own.
    files: list[str] = []
    fields = iter(proc.stdout.split('\0'))
    for entry in fields:
        if len(entry) > 3:
            files.append(entry[3:])
            if 'R' in entry[:2] or 'C' in entry[:2]:
                files.append(next(fields, ''))
    return sorted({f for f in files if f and not f.startswith(STATE_DIR + '/')})


def tmp_name(path: Path) -> Path:
    """Where a write to path is made before it is renamed into place."""
    return path.with_name(f'.{path.name}.kloc-tmp')


@dataclass(frozen=True)
class Faults:
    """Fault injection, for the tests: with after=N, the (N+1)-th write of an install
    or uninstall fails (mode 'fail': an OSError) or kills the process (mode 'kill':
    SIGKILL, as a power cut). on_write, if given, is told each write's number (from 0)
    before it is made: a test counts a run's writes with it. The default injects
    nothing."""
    after: int | None = None
    mode: str = 'kill'
    on_write: Callable[[int], None] | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Faults:
        """The faults a test asks a kloc command line for: KLOC_FAULT_AFTER=N and
        KLOC_FAULT_MODE=kill (the default) or fail. Read by the command line where it
        calls install() and uninstall(), never at import."""
        after = env.get(FAULT_AFTER_ENV, '')
        if after.isdigit():
            return cls(int(after), env.get(FAULT_MODE_ENV, 'kill'))
        return cls()


NO_FAULTS = Faults()


class Writer:
    """The writes of one command (an install, an uninstall, a roll-back), counted."""

    def __init__(self, faults: Faults = NO_FAULTS) -> None:
        self.faults = faults
        self.done = 0

    def tick(self) -> None:
        """Called before every change to the file system."""
        f = self.faults
        if f.on_write is not None:
            f.on_write(self.done)
        if f.after is not None and self.done >= f.after:
            if f.mode == 'kill':
                os.kill(os.getpid(), signal.SIGKILL)
            raise OSError(errno.EIO, f'injected fault after {self.done} writes')
        self.done += 1

    def write(self, path: Path, data: bytes, mode: int | None) -> None:
        """Replace path atomically with data (a new inode: hard-linked copies keep theirs)."""
        self.tick()
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode is None:
            mode = file_mode(path.parent, path.name) or 0o644
        tmp = tmp_name(path)
        try:
            with open(tmp, 'wb') as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def remove(self, tree: Path, rel: str) -> None:
        """Delete a file the package added, and the directories it leaves empty."""
        target = tree / rel
        if not target.exists():
            return
        self.tick()
        target.unlink()
        parent = target.parent
        while parent != tree and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent

    def put(self, tree: Path, rel: str, data: bytes | None, mode: int | None) -> bool:
        """Make tree/rel hold data (None: absent); True if anything was written."""
        if read_file(tree, rel) == data and (data is None or mode is None
                                             or file_mode(tree, rel) == mode):
            return False
        if data is None:
            self.remove(tree, rel)
        else:
            self.write(tree / rel, data, mode)
        return True
