# SPDX-License-Identifier: GPL-2.0
"""One kloc command at a time in a part of the cache: an flock on a lock file."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on path (made, with its directory, if missing) for the
    block; another process asking for it waits until the block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, 'w') as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield
