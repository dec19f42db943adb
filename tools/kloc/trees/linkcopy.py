# SPDX-License-Identifier: GPL-2.0
"""Hard-linked copies of a kernel tree, and writes that keep them apart.

A copy made with cp -al costs no disk and seconds of time. Its files share
inodes with the original, so every change to the copy must write a new
inode, never into the shared one.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from kloc import progress
from kloc.series.patching import Contents


def copy(src: Path, dest: Path) -> None:
    """Replace dest with a hard-linked copy of src."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    progress.say(f'copying {src} to {dest} (hard links)')
    subprocess.run(['cp', '-al', str(src), str(dest)], check=True)


def write(root: Path, contents: Contents) -> None:
    """Write each file as a new inode (None deletes it).

    Always written, even when unchanged: the fresh mtime makes make rebuild
    the object, which a build dir may hold from another variant; a
    hard-linked copy carries the original's older mtime.
    """
    for rel, data in contents.items():
        target = root / rel
        if data is None:
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + '.kloc-tmp')
        tmp.write_bytes(data)
        tmp.replace(target)
