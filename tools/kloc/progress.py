# SPDX-License-Identifier: GPL-2.0
"""Progress lines with elapsed time, for long jobs."""

from __future__ import annotations

import sys
import time

_START = time.monotonic()


def elapsed() -> float:
    return time.monotonic() - _START


def say(msg: str) -> None:
    """Print one progress line, prefixed with the elapsed time."""
    secs = int(elapsed())
    print(f'[kloc {secs // 60:3d}:{secs % 60:02d}] {msg}', file=sys.stderr, flush=True)
