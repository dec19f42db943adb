# SPDX-License-Identifier: GPL-2.0
"""The one base class of every error kloc reports, and OS errors made plain.

A KlocError carries a message that names the problem and the fix; the
command line prints it on one line and exits 2. OS errors that reach the
command line (a read-only tree, OUT that is a file, a full disk, no
permission) are turned into the same kind of one-line message by
describe_os_error(), never a traceback.
"""

from __future__ import annotations

import errno
import os


class KlocError(Exception):
    """A condition kloc explains: the message names the path and the fix."""


class DiskFullError(KlocError):
    """A write failed because the disk (or quota) is full."""


_FIXES = {
    errno.ENOSPC: ('disk full', 'free some space (df -h) or point OUT/KLOC_CACHE at a '
                   'bigger disk, then run the same command again; files already written '
                   'are kept'),
    errno.EDQUOT: ('disk quota exceeded', 'free some space, then run the same command again'),
    errno.EROFS: ('read-only file system', 'remount it read-write, or use a writable '
                  'copy (KDIR=, OUT=, KLOC_CACHE=)'),
    errno.EACCES: ('permission denied', 'fix its permissions or owner, or use a path you '
                   'can write (KDIR=, OUT=, KLOC_CACHE=)'),
    errno.EPERM: ('operation not permitted', 'fix its permissions or owner, or use another '
                  'path'),
    errno.ENOTDIR: ('a file is in the way of a directory', 'move the file away, or give '
                    'another path (OUT= must name a directory)'),
    errno.EISDIR: ('a directory where a file was expected', 'move the directory away, or '
                   'give a file'),
    errno.ENOENT: ('no such file or directory', 'check the path'),
    errno.EEXIST: ('already exists', 'move it away, or give another path'),
}


def describe_os_error(e: OSError) -> str:
    """One line: what failed, on which path, and what to do."""
    what, fix = _FIXES.get(e.errno or 0, (e.strerror or str(e), 'check the path'))
    path = e.filename if e.filename is not None else '(unknown path)'
    if e.errno in (errno.EEXIST, errno.ENOTDIR) and e.filename is not None:
        blocker = _file_in_the_way(str(e.filename))
        if blocker:
            return (f'{blocker} is a file, where a directory is needed for {path}; move '
                    'it away, or give a directory (OUT= must name a directory)')
    extra = f' -> {e.filename2}' if e.filename2 is not None else ''
    return f'{path}{extra}: {what}; {fix}'


def _file_in_the_way(path: str) -> str:
    """The file (path itself or a parent of it) that stands where a directory must be."""
    p = os.path.abspath(path)
    while p and p != os.path.dirname(p):
        if os.path.isfile(p):
            return p
        p = os.path.dirname(p)
    return ''


def is_disk_full(e: OSError) -> bool:
    return e.errno in (errno.ENOSPC, errno.EDQUOT)
