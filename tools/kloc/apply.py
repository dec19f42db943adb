# SPDX-License-Identifier: GPL-2.0
"""Apply a unified diff to in-memory file contents with GNU patch, strictly."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from .errors import KlocError

Contents = dict[str, bytes | None]  # tree-relative path -> bytes, None = absent


class HunkError(KlocError):
    """A hook does not apply; the message names the file and the hunk."""


_TARGET = re.compile(r'^\+\+\+ b/(\S+)', re.MULTILINE)
_SOURCE = re.compile(r'^--- (\S+)', re.MULTILINE)


def touched_files(patch_text: str) -> list[str]:
    return _TARGET.findall(patch_text)


def _explain(output: str, patch: Path) -> str:
    current = '?'
    problems: list[str] = []
    for line in output.splitlines():
        m = re.match(r'(?:patching|checking) file (\S+)', line)
        if m:
            current = m.group(1)
            continue
        m = re.match(r'Hunk #(\d+) FAILED at (\d+)', line)
        if m:
            problems.append(f'{current}: hunk #{m.group(1)} (at line {m.group(2)}) '
                            'does not apply')
        elif 'Reversed (or previously applied) patch detected' in line:
            problems.append(f'{current}: already carries this change')
        elif "can't find file to patch" in line or 'No such file' in line:
            problems.append(f'{current}: file is missing from the tree')
    if not problems:
        problems.append(output.strip() or 'patch failed')
    return f'{patch.name}: ' + '; '.join(problems)


def apply_patch(patch: Path, state: Contents, label: str) -> Contents:
    """Return the contents of the files that patch touches, after applying it.

    Context must match exactly (no fuzz); offsets are accepted.
    """
    text = patch.read_text()
    files = touched_files(text)
    if not files:
        raise HunkError(f'{patch}: no "+++ b/..." lines; not a -p1 unified diff')
    with tempfile.TemporaryDirectory(prefix='kloc-apply-') as tmp:
        root = Path(tmp)
        for f in files:
            data = state.get(f)
            if data is not None:
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                (root / f).write_bytes(data)
        proc = subprocess.run(['patch', '-p1', '-F0', '-N', '--batch',
                               '--no-backup-if-mismatch', '-r', '-', '-d', tmp,
                               '-i', str(patch.resolve())],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise HunkError(f'{label}: ' + _explain(proc.stdout + proc.stderr, patch))
        out: Contents = {}
        for f in files:
            p = root / f
            out[f] = p.read_bytes() if p.exists() else None
        return out
