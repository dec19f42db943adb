# SPDX-License-Identifier: GPL-2.0
"""One kloc command at a time writes a tree: an flock on the tree's .kloc/lock.

Every command that writes a tree (install, uninstall, the roll-back of an
interrupted one, a rebuilt manifest) holds the tree's lock from before it
reads the tree's state until after its last write, so no command ever sees
another's journal half-made or acts on a state another is changing. A
second command waits, saying once (a progress line) what it waits for; with
KLOC_WAIT=0 it refuses at once instead.

The lock file is made (mode 0600, empty: nothing is ever written in it) and
opened relative to the tree's folder without following symlinks: .kloc must
be a real folder and the lock a regular file, else the command is refused
and nothing is written through them. It stays in .kloc/ with the state;
when nothing else is left there, the holder removes it (and .kloc) as it
lets go, so a tree the package left is as it was before; a waiter that then
finds its lock file gone or replaced tries again. A tree that cannot be
written (read-only, or not the user's) is not locked: no command can write
it, and the first write would fail anyway. Nested uses in one process (an
install runs the roll-back) share the lock.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kloc import progress
from kloc.errors import KlocError

STATE_DIR = '.kloc'
LOCK = 'lock'
WAIT_ENV = 'KLOC_WAIT'

# Trees locked by this process (their real paths) and how deeply.
_held: dict[str, int] = {}


class TreeLockError(KlocError):
    """The tree's lock cannot be taken: busy and not to be waited for, or unsafe."""


def _wait() -> bool:
    v = os.environ.get(WAIT_ENV, '')
    if v in ('', '1'):
        return True
    if v == '0':
        return False
    shown = v if v.isprintable() else v.encode('unicode_escape').decode('ascii')
    raise TreeLockError(f'{WAIT_ENV}={shown} is not 0 or 1: give {WAIT_ENV}=0 to refuse at '
                        f'once when another kloc command is writing the tree, or {WAIT_ENV}=1 '
                        '(or nothing) to wait for it')


@contextmanager
def held(tree: Path, op: str) -> Iterator[None]:
    """Hold the tree's lock for the block, as command op (for the waiting message)."""
    key = os.path.realpath(tree)
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    fd = _acquire(tree, op)
    _held[key] = 1
    try:
        yield
    finally:
        del _held[key]
        if fd is not None:
            _release(tree, fd)


def _unsafe(path: Path, what: str) -> TreeLockError:
    try:
        target = f' (to {os.readlink(path)})'
    except OSError:
        target = ''
    return TreeLockError(f'{path} is {what}{target}, where kloc keeps its lock for the tree: '
                         'refused, nothing was written through it; remove it (it was not '
                         'made by kloc) and run the command again')


def _open(tree: Path) -> int | None:
    """The lock file, opened (made if missing, empty); None if the tree is not
    writable by this user."""
    state = tree / STATE_DIR
    try:
        tfd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(tree)) from None
    try:
        try:
            os.mkdir(STATE_DIR, 0o755, dir_fd=tfd)
        except FileExistsError:
            pass
        except OSError as e:
            if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                return None
            raise OSError(e.errno, e.strerror, str(state)) from None
        try:
            sfd = os.open(STATE_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=tfd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _unsafe(state, 'a symlink' if os.path.islink(state)
                              else 'not a folder') from None
            raise OSError(e.errno, e.strerror, str(state)) from None
    finally:
        os.close(tfd)
    path = state / LOCK
    try:
        fd = os.open(LOCK, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     0o600, dir_fd=sfd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise _unsafe(path, 'a symlink' if os.path.islink(path)
                          else 'not a regular file') from None
        if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return None
        raise OSError(e.errno, e.strerror, str(path)) from None
    finally:
        os.close(sfd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _unsafe(path, 'not a regular file')
    return fd


def _acquire(tree: Path, op: str) -> int | None:
    wait = _wait()
    said = False
    while True:
        fd = _open(tree)
        if fd is None:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    progress.say(f'{tree}: cannot be locked ({e.strerror}); make sure no '
                                 'other kloc command writes it meanwhile')
                    _release(tree, fd)
                    return None
                if not wait:
                    raise TreeLockError(
                        f'{tree}: another kloc command is writing this tree; {op} refused at '
                        f'once, as {WAIT_ENV}=0 asks; run it again when that one has finished '
                        f'(or without {WAIT_ENV}=0, to wait for it)') from None
                if not said:
                    progress.say(f'waiting for another kloc command on {tree} ({op} runs '
                                 'when it has finished)')
                    said = True
                fcntl.flock(fd, fcntl.LOCK_EX)
            st = os.fstat(fd)
            try:
                cur = os.lstat(tree / STATE_DIR / LOCK)
                same = (cur.st_dev, cur.st_ino) == (st.st_dev, st.st_ino)
            except FileNotFoundError:
                same = False
            if same:
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)                # its holder removed it as it let go: again


def _release(tree: Path, fd: int) -> None:
    """Let go; if .kloc/ holds nothing but the lock, remove both first."""
    state = tree / STATE_DIR
    try:
        if [p.name for p in state.iterdir()] == [LOCK]:
            cur = os.lstat(state / LOCK)
            st = os.fstat(fd)
            if (cur.st_dev, cur.st_ino) == (st.st_dev, st.st_ino):
                os.unlink(state / LOCK)
                os.rmdir(state)
    except OSError:
        pass                        # someone else's doing: it stays
    finally:
        os.close(fd)
