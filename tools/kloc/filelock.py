# SPDX-License-Identifier: GPL-2.0
"""One kloc command at a time in a part of the cache: an flock on a lock file.

The lock file is opened without following symlinks (O_NOFOLLOW), never
truncated, and only if it is a regular file of the user's in a folder of
theirs that nobody else can write (paths.trusted_dir): a symlink planted
at a lock's path is refused with its path, and its target left alone.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kloc import paths


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on path (made, mode 0600, with its directory, if missing)
    for the block; another process asking for it waits until the block ends."""
    paths.trusted_dir(path.parent)
    fd = paths.open_state_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
