# SPDX-License-Identifier: GPL-2.0
"""Kernel versions, as read from a tree's top-level Makefile."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kloc.errors import KlocError


class VersionError(KlocError):
    """The text is not a kernel version, or the tree has none."""


@dataclass(frozen=True, order=True)
class KernelVersion:
    major: int
    minor: int
    sublevel: int = 0

    def __str__(self) -> str:
        return f'{self.major}.{self.minor}.{self.sublevel}'

    @property
    def series(self) -> str:
        """The major.minor pair, e.g. '6.12'."""
        return f'{self.major}.{self.minor}'

    @classmethod
    def parse(cls, text: str) -> KernelVersion:
        """Parse '6.12' or '6.12.57'."""
        m = re.fullmatch(r'(\d+)\.(\d+)(?:\.(\d+))?', text.strip())
        if not m:
            raise VersionError(f'{text!r} is not a kernel version such as 6.12 or 6.1.120')
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


_FIELD = re.compile(r'^(VERSION|PATCHLEVEL|SUBLEVEL)\s*=\s*(\d*)\s*$', re.MULTILINE)


def version_from_makefile_text(text: str) -> KernelVersion:
    fields = {k: v for k, v in _FIELD.findall(text[:4096])}
    if not fields.get('VERSION') or not fields.get('PATCHLEVEL'):
        raise VersionError('no VERSION/PATCHLEVEL lines at the top of the Makefile')
    return KernelVersion(int(fields['VERSION']), int(fields['PATCHLEVEL']),
                         int(fields.get('SUBLEVEL') or 0))


def tree_version(tree: Path) -> KernelVersion:
    makefile = tree / 'Makefile'
    try:
        text = makefile.read_text(errors='replace')
    except OSError as e:
        raise VersionError(f'{tree} is not a kernel tree: cannot read {makefile}: '
                           f'{e.strerror}') from e
    try:
        return version_from_makefile_text(text)
    except VersionError as e:
        raise VersionError(f'{tree} is not a kernel tree: {e}') from e
