# SPDX-License-Identifier: GPL-2.0
"""Where the package lives and where its caches go."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
QEMU_CONFIGS = PACKAGE_ROOT / 'tools' / 'qemu_configs'


def cache_dir() -> Path:
    """$KLOC_CACHE, else $XDG_CACHE_HOME/kloc, else ~/.cache/kloc."""
    explicit = os.environ.get('KLOC_CACHE')
    if explicit:
        return Path(explicit).expanduser().resolve()
    xdg = os.environ.get('XDG_CACHE_HOME') or str(Path.home() / '.cache')
    return Path(xdg).expanduser().resolve() / 'kloc'
