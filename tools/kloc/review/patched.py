# SPDX-License-Identifier: GPL-2.0
"""The patched tree make review (and make known-failures) builds: the base with the
patch applied, a hard-linked copy in KLOC_CACHE/review/<key>/.

key = hash of the tree, the package series (series_hash()), the patch, the
base's uncommitted edits and the contents the copy gets written; its build
dirs sit beside it, so a second review of the same pair rebuilds nothing (a
changed config fragment rebuilds in place). copies.py keeps the most
recently used copies and prunes the others.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from kloc.paths import PACKAGE_ROOT
from kloc.review import copies
from kloc.review.patch_input import PatchInfo
from kloc.review.posted import Applied, apply_to, as_posted, stock_reader
from kloc.series import changes
from kloc.series.patching import DEFAULT_MODE
from kloc.series.planning import dirty_files, managed_files
from kloc.series.treefiles import read_file
from kloc.trees import linkcopy
from kloc.trees.sources import Tree


def series_hash() -> str:
    """What the package installs: every hook patch and added file, by its path in the
    package and its content (not where the package sits: a copy of it elsewhere
    resumes the same reviews)."""
    h = hashlib.sha256()
    for change in changes.load_series():
        files = list(change.patches.values()) + [a.src for a in change.additions]
        h.update(change.name.encode() + b'\0' + change.body.encode())
        for p in files:
            rel = p.relative_to(PACKAGE_ROOT) if p.is_relative_to(PACKAGE_ROOT) else p
            h.update(str(rel).encode() + b'\0' + p.read_bytes())
    return h.hexdigest()


def _dirty_digest(base: Tree, dirty: list[str]) -> str:
    h = hashlib.sha256()
    for rel in dirty:
        p = base.path / rel
        h.update(rel.encode() + b'\0' + (p.read_bytes() if p.is_file() else b'-') + b'\0')
    return h.hexdigest()


def _applied_digest(applied: Applied) -> str:
    h = hashlib.sha256()
    for rel, data in sorted(applied.contents.items()):
        h.update(rel.encode() + b'\0' + (b'-' if data is None else b'+' + data) + b'\0'
                 + str(applied.modes.get(rel, '')).encode() + b'\0')
    return h.hexdigest()


def _applied_now(base: Tree, patch: PatchInfo) -> Applied:
    """The patch applied to the base as it is: as posted, with the series on top, if
    the base carries the package (its managed files as they are: the install's)."""
    managed = managed_files(base.path)
    if not managed:
        return apply_to(base, patch, {})
    series = changes.load_series()
    planned = {rel: read_file(base.path, rel) for rel in managed}
    applied, _ = as_posted(base, patch, series, planned, stock_reader(base, series),
                           review_package=True)
    return applied


def patched_tree(base: Tree, patch: PatchInfo, cache: Path,
                 applied: Applied | None = None) -> tuple[Tree, bool]:
    """The base with the patch applied, made once per tree, series and patch.

    applied: the patch applied in memory (review.check()); else it is applied here, to
    the base tree as it is now: as posted, with the series on top (as_posted()),
    where the tree carries the package; as the tree has it where it does not.
    """
    if applied is None:
        applied = _applied_now(base, patch)
    # The key covers the base's uncommitted edits (a copy made before an edit is
    # not the base with the patch after it), and what the copy gets written: the
    # stock files patched, the package on top.
    key = hashlib.sha256('\0'.join([str(base.path), str(base.version), series_hash(),
                                    patch.sha256, _dirty_digest(base, dirty_files(base.path)),
                                    _applied_digest(applied)]).encode()).hexdigest()[:16]
    root = cache / 'review' / f'{base.label}-{key}'
    copies.use(cache, root)
    src, stamp = root / 'src', root / 'kloc-review.json'
    want = {'base': str(base.path), 'version': str(base.version), 'patch': patch.sha256,
            'files': sorted(patch.files)}
    if src.is_dir() and stamp.exists() and json.loads(stamp.read_text()) == want:
        return Tree(src, base.version, 'review'), True
    stamp.unlink(missing_ok=True)
    linkcopy.copy(base.path, src)
    linkcopy.write(src, applied.contents)
    # Each file written is a new inode, not the base's: its mode (the base's, or the
    # one the patch sets) can be set without touching the base.
    for rel, data in applied.contents.items():
        if data is not None:
            os.chmod(src / rel, applied.modes.get(rel, DEFAULT_MODE))
    stamp.write_text(json.dumps(want, indent=1) + '\n')
    return Tree(src, base.version, 'review'), False
