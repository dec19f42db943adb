# SPDX-License-Identifier: GPL-2.0
"""Write an output file whole or not at all.

The data goes to a temporary file in the same directory, is flushed to
disk, and is renamed over the target. A write that fails (a full disk, a
kill) leaves the previous file as it was and no temporary file behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kloc.errors import DiskFullError, is_disk_full


def write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace path with data atomically; mode defaults to the old file's, else 0644."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f'.{path.name}.', suffix='.kloc-tmp', dir=path.parent)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError) and is_disk_full(e):
            raise DiskFullError(f'{path}: disk full; the previous file is kept. Free some '
                                'space (df -h), then run the same command again') from e
        raise
    sync_dir(path.parent)


def write_text(path: Path, text: str, mode: int | None = None) -> None:
    write_bytes(path, text.encode(), mode)


def sync_dir(path: Path) -> None:
    """Make a rename in path durable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
