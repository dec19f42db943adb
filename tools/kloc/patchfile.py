# SPDX-License-Identifier: GPL-2.0
"""A patch or series given to make review: read, checked, described.

Accepted: a -p1 unified diff (diff -u, git diff), one git format-patch
mail, or several in one mbox, applied in order. Refused with the reason
and the fix: a missing or empty file, a binary patch, text that is not
UTF-8, a file with no "+++ b/" line.
"""

from __future__ import annotations

import email.header
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from .apply import touched_files
from .errors import KlocError


class PatchError(KlocError):
    """The patch cannot be reviewed as given."""


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
        parts = email.header.decode_header(raw)
        return ''.join(p.decode(c or 'utf-8', 'replace') if isinstance(p, bytes) else p
                       for p, c in parts)
    for line in text.splitlines():
        if line.startswith(('diff ', '--- ', 'Index: ')):
            break
        if line.strip():
            return line.strip()
    return path.name


def load(path: Path) -> PatchInfo:
    if not path.is_file():
        raise PatchError(f'PATCH={path}: no such file; give a patch made with git '
                         'format-patch or diff -u')
    data = path.read_bytes()
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
    files = touched_files(text)
    if not files:
        raise PatchError(f'PATCH={path} has no "+++ b/..." line: not a unified diff with '
                         'a/ and b/ prefixes; make it with git format-patch or diff -u a/ b/')
    mails = max(1, len(re.findall(r'^From [0-9a-f]{40} ', text, re.MULTILINE)))
    return PatchInfo(path.resolve(), _subject(text, path), text,
                     hashlib.sha256(data).hexdigest(), tuple(dict.fromkeys(files)), mails)
