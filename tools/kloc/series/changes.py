# SPDX-License-Identifier: GPL-2.0
"""The package's changes to a kernel tree, as an ordered series.

kunit/series lists change directories, relative to the package, one a line.
Each directory holds:
  message        the commit message: a subject line, a blank line, a body
  <X.Y>.patch    a unified diff (-p1) for trees of version X.Y and later;
                 the greatest X.Y not above the tree's version is used
  add            lines "SRC DST": copy SRC (relative to the package) to DST
                 (relative to the tree)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kloc.paths import PACKAGE_ROOT
from kloc.version import KernelVersion
from kloc.errors import KlocError


class SeriesError(KlocError):
    """The package's own series is malformed, or does not fit the tree."""


@dataclass(frozen=True)
class Addition:
    src: Path
    dst: str


@dataclass(frozen=True)
class Change:
    name: str
    subject: str
    body: str
    patches: dict[KernelVersion, Path]
    additions: tuple[Addition, ...]

    def patch_for(self, version: KernelVersion) -> Path | None:
        """The hook patch for this tree version; None when the change has none."""
        if not self.patches:
            return None
        fits = [v for v in self.patches if v <= version]
        if not fits:
            oldest = min(self.patches)
            raise SeriesError(f'{self.name}: no hook for Linux {version}; '
                              f'the oldest supported is {oldest.series}')
        return self.patches[max(fits)]

    def patch_or_none(self, version: KernelVersion) -> Path | None:
        """patch_for(), with None also when no hook is old enough for this version."""
        try:
            return self.patch_for(version)
        except SeriesError:
            return None


_PATCH_NAME = re.compile(r'(\d+)\.(\d+)\.patch')


def load_change(root: Path, name: str) -> Change:
    cdir = root / name
    try:
        message = (cdir / 'message').read_text()
    except OSError as e:
        raise SeriesError(f'{cdir}/message: {e.strerror}') from e
    subject, _, body = message.strip('\n').partition('\n')
    patches: dict[KernelVersion, Path] = {}
    for p in sorted(cdir.glob('*.patch')):
        m = _PATCH_NAME.fullmatch(p.name)
        if not m:
            raise SeriesError(f'{p}: hook patches are named X.Y.patch')
        patches[KernelVersion(int(m.group(1)), int(m.group(2)))] = p
    additions: list[Addition] = []
    add_file = cdir / 'add'
    if add_file.exists():
        for n, line in enumerate(add_file.read_text().splitlines(), 1):
            if not line.strip() or line.startswith('#'):
                continue
            parts = line.split()
            if len(parts) != 2:
                raise SeriesError(f'{add_file}:{n}: expected "SRC DST"')
            src = root / parts[0]
            if not src.is_file():
                raise SeriesError(f'{add_file}:{n}: {parts[0]} does not exist')
            additions.append(Addition(src, parts[1]))
    return Change(name, subject.strip(), body.strip('\n'), patches, tuple(additions))


def load_series(root: Path = PACKAGE_ROOT) -> list[Change]:
    listing = root / 'kunit' / 'series'
    names = [ln.strip() for ln in listing.read_text().splitlines()
             if ln.strip() and not ln.startswith('#')]
    return [load_change(root, n) for n in names]
