# SPDX-License-Identifier: GPL-2.0
"""A file's bytes, by their sha256: what names an image, a ramdisk or a results
file's kernel wherever kloc must tell one build from another."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open('rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()
