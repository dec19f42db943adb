# SPDX-License-Identifier: GPL-2.0
"""An append-only results file: one JSON line per finished run.

The first line says what the runs are of (a key: kernels, guest config,
selftest options, topology). Each run is appended and flushed to disk the
moment it ends, so an interrupted comparison keeps every finished run and
resumes where it stopped. A line cut short by the interruption was not a
finished run and is dropped; a file made for other kernels or options is
refused, not mixed in.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from .errors import KlocError

FORMAT = 'kloc-runs-v1'


class ResultsError(KlocError):
    """The results file cannot be used for this comparison."""


@dataclass
class Run:
    side: str                       # 'a' or 'b'
    ok: bool
    seconds: float
    record: dict[str, object] | None = None
    why: str = ''                   # why a failed run failed
    console_tail: str = ''
    console: str = ''               # path of the full console log


@dataclass
class Store:
    path: Path
    key: dict[str, str]
    runs: list[Run] = field(default_factory=list)

    def ok_runs(self, side: str) -> list[Run]:
        return [r for r in self.runs if r.side == side and r.ok]

    def records(self, side: str, limit: int) -> list[dict[str, object]]:
        """The JSON records of the first limit good runs of a side."""
        return [r.record for r in self.ok_runs(side)[:limit] if r.record is not None]

    def failed_runs(self, side: str) -> list[Run]:
        return [r for r in self.runs if r.side == side and not r.ok]

    def append(self, run: Run) -> None:
        with self.path.open('a') as f:
            f.write(json.dumps(asdict(run), sort_keys=True) + '\n')
            f.flush()
            os.fsync(f.fileno())
        self.runs.append(run)


def _describe(key: dict[str, str], other: dict[str, str]) -> str:
    diff = sorted(k for k in set(key) | set(other) if key.get(k) != other.get(k))
    return ', '.join(f'{k}: {other.get(k)!r} in the file, {key.get(k)!r} now' for k in diff)


def open_store(path: Path, key: dict[str, str]) -> Store:
    """Load the runs already in path, or start the file with its key."""
    if not path.exists() or path.stat().st_size == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open('w') as f:
            f.write(json.dumps({'format': FORMAT, 'key': key}, sort_keys=True) + '\n')
        return Store(path, key)
    data = path.read_bytes()
    if not data.endswith(b'\n'):
        # The last run was being written when the job stopped: drop it.
        keep = data[:data.rfind(b'\n') + 1]
        path.write_bytes(keep)
        data = keep
    lines = data.decode().splitlines()
    try:
        head = json.loads(lines[0])
    except (ValueError, IndexError):
        head = None
    if not isinstance(head, dict) or head.get('format') != FORMAT:
        raise ResultsError(f'{path} is not a kloc results file; move it away or pass '
                           'another --out')
    if head.get('key') != key:
        raise ResultsError(f'{path} holds runs of another comparison '
                           f'({_describe(key, head.get("key") or {})}); move it away to '
                           'start over, or pass another --out')
    store = Store(path, key)
    for n, line in enumerate(lines[1:], 2):
        try:
            store.runs.append(Run(**json.loads(line)))
        except (TypeError, ValueError) as e:
            raise ResultsError(f'{path}:{n}: not a run record ({e}); the file was '
                               'edited by hand?') from None
    return store
