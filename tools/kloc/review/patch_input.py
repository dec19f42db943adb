# SPDX-License-Identifier: GPL-2.0
"""A patch or series given to make review: read, checked, described.

Accepted: a -p1 unified diff (diff -u, git diff), one git format-patch
mail, or several in one mbox, applied in order; git's deletions, renames,
copies and mode changes included. Refused with the reason and the fix: a
missing or empty file, a directory, FIFO or device, a binary patch, text
that is not UTF-8, a file with no file change in it, a name outside the
tree, a symlink.
"""

from __future__ import annotations

import email.errors
import email.header
import errno
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from kloc.series.patching import PatchError, touched_files
from kloc.errors import describe_os_error


@dataclass(frozen=True)
class PatchInfo:
    path: Path
    subject: str
    text: str
    sha256: str
    files: tuple[str, ...]
    mails: int              # patches in the series (1 for a plain diff)


_SUBJECT = re.compile(r'^Subject: (.*(?:\n[ \t].*)*)', re.MULTILINE)
_BINARY = re.compile(r'^(GIT binary patch|Binary files .* differ)$', re.MULTILINE)


def _subject(text: str, path: Path) -> str:
    m = _SUBJECT.search(text)
    if m:
        raw = ' '.join(m.group(1).split())
        try:
            parts = email.header.decode_header(raw)
        except (ValueError, email.errors.HeaderParseError):
            return raw
        return ''.join(_decode(p, c) if isinstance(p, bytes) else p for p, c in parts)
    for line in text.splitlines():
        if line.startswith(('diff ', '--- ', 'Index: ')):
            break
        if line.strip():
            return line.strip()
    return path.name


def _decode(data: bytes, charset: str | None) -> str:
    try:
        return data.decode(charset or 'utf-8', 'replace')
    except LookupError:                    # a charset Python does not know
        return data.decode('utf-8', 'replace')


_KINDS = ((stat.S_ISDIR, 'a directory'), (stat.S_ISFIFO, 'a FIFO'),
          (stat.S_ISSOCK, 'a socket'), (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'))


def _read(path: Path) -> bytes:
    """The file's bytes; opened without blocking, so a FIFO is named, not waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            raise PatchError(f'PATCH={path}: no such file; give a patch made with git '
                             'format-patch or diff -u') from None
        if e.errno == errno.ENXIO:         # a socket
            raise PatchError(f'PATCH={path} is a socket; give a patch file') from None
        raise PatchError(f'PATCH={describe_os_error(e)}') from None
    try:
        mode = os.fstat(fd).st_mode
        for test, what in _KINDS:
            if test(mode):
                raise PatchError(f'PATCH={path} is {what}; give a patch file')
        os.set_blocking(fd, True)
        with os.fdopen(fd, 'rb', closefd=False) as f:
            return f.read()
    except OSError as e:
        raise PatchError(f'PATCH={describe_os_error(e)}') from None
    finally:
        os.close(fd)


def load(path: Path) -> PatchInfo:
    data = _read(path)
    if not data.strip():
        raise PatchError(f'PATCH={path} is empty: there is nothing to review; export the '
                         'change with git format-patch -1 (or diff -u a/ b/)')
    if b'\0' in data or _BINARY.search(data.decode('latin-1')):
        raise PatchError(f'PATCH={path} holds a binary patch: kloc applies text diffs '
                         'only; leave the binary file out of the series')
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise PatchError(f'PATCH={path} is not UTF-8 text (byte {e.start}); save it as '
                         'UTF-8') from None
    try:
        files = touched_files(text)
    except PatchError as e:
        raise PatchError(f'PATCH={path}: {e}') from None
    if not files:
        raise PatchError(f'PATCH={path} has no "+++ b/..." line: not a unified diff with '
                         'a/ and b/ prefixes (nor a git rename, deletion or mode change); '
                         'make it with git format-patch or diff -u a/ b/')
    mails = max(1, len(re.findall(r'^From [0-9a-f]{40} ', text, re.MULTILINE)))
    return PatchInfo(path.resolve(), _subject(text, path), text,
                     hashlib.sha256(data).hexdigest(), tuple(dict.fromkeys(files)), mails)
