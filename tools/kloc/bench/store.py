# SPDX-License-Identifier: GPL-2.0
"""An append-only results file: one JSON line per finished run.

The first line says what the runs are of (a key: kernels, guest config,
selftest options, topology). Each run is appended and flushed to disk the
moment it ends, so an interrupted comparison keeps every finished run and
resumes where it stopped. A line cut short by the interruption was not a
finished run and is dropped (cut off the file, in one step); a file made
for other kernels or options is refused, not mixed in. An append that fails
(a full disk) is cut back off, so the file keeps exactly the runs before it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kloc import atomicfile
from kloc.errors import DiskFullError, KlocError, is_disk_full

FORMAT = 'kloc-runs-v1'


class ResultsError(KlocError):
    """The results file cannot be used for this comparison."""


@dataclass
class BenchRun:
    side: str                       # 'a' or 'b'
    ok: bool
    seconds: float
    record: dict[str, object] | None = None
    why: str = ''                   # why a failed run failed
    console_tail: str = ''
    console: str = ''               # path of the full console log
    job: str = ''                   # the LAVA job it came from (its URL), for lab runs


@dataclass
class Store:
    path: Path
    key: dict[str, str]
    runs: list[BenchRun] = field(default_factory=list)

    def ok_runs(self, side: str) -> list[BenchRun]:
        return [r for r in self.runs if r.side == side and r.ok]

    def records(self, side: str, limit: int) -> list[dict[str, object]]:
        """The JSON records of the first limit good runs of a side."""
        return [r.record for r in self.ok_runs(side)[:limit] if r.record is not None]

    def seeds(self, side: str) -> set[int]:
        """The seeds of a side's good counted boots."""
        return {seed for r in self.ok_runs(side) if (seed := _seed(r)) is not None}

    def seeded(self, side: str, limit: int) -> list[dict[str, object]]:
        """The records of a side's good counted boots of seeds 0 to limit - 1, by seed,
        the first of each: boot k of one side pairs with boot k of the other, in
        whatever order they ended."""
        by_seed: dict[int, dict[str, object]] = {}
        for r in self.ok_runs(side):
            seed = _seed(r)
            if seed is not None and 0 <= seed < limit and r.record is not None:
                by_seed.setdefault(seed, r.record)
        return [by_seed[k] for k in sorted(by_seed)]

    def failed_runs(self, side: str) -> list[BenchRun]:
        return [r for r in self.runs if r.side == side and not r.ok]

    def append(self, run: BenchRun) -> None:
        """Add one run to the file, whole and on disk, or not at all."""
        line = (json.dumps(asdict(run), sort_keys=True) + '\n').encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            end = os.fstat(fd).st_size
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except BaseException as e:
                try:
                    os.ftruncate(fd, end)   # no half line; a torn one is dropped on load
                except OSError:
                    pass
                if isinstance(e, OSError) and is_disk_full(e):
                    raise DiskFullError(
                        f'{self.path}: disk full; this run was not recorded, the '
                        f'{len(self.runs)} before it are kept. Free some space (df -h), '
                        'then run the same command again: it resumes from them') from e
                raise
        finally:
            os.close(fd)
        self.runs.append(run)


def _seed(run: BenchRun) -> int | None:
    seed = (run.record or {}).get('seed')
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _describe(key: dict[str, str], other: object) -> str:
    if not isinstance(other, dict):
        return 'the file has no key'
    diff = sorted(k for k in set(key) | set(other) if key.get(k) != other.get(k))
    return ', '.join(f'{k}: {other.get(k)!r} in the file, {key.get(k)!r} now' for k in diff)


# The fields of a run record and the JSON types they may have.
_FIELDS: dict[str, tuple[type, ...]] = {
    'side': (str,), 'ok': (bool,), 'seconds': (int, float), 'record': (dict, type(None)),
    'why': (str,), 'console_tail': (str,), 'console': (str,), 'job': (str,)}


def _json(line: bytes) -> object:
    """The JSON value of one line; ValueError if it is none."""
    try:
        return json.loads(line.decode('utf-8'))
    except RecursionError:
        raise ValueError('nested too deeply') from None


def _run(path: Path, n: int, line: bytes) -> BenchRun:
    try:
        d = _json(line)
        if not isinstance(d, dict):
            raise ValueError('not a JSON object')
        for k, v in d.items():
            want = _FIELDS.get(k)
            if want is None:
                raise ValueError(f'unknown field {k!r}')
            if not isinstance(v, want) or (k == 'seconds' and isinstance(v, bool)):
                raise ValueError(f'{k} is {type(v).__name__}')
        if d.get('side') not in ('a', 'b'):
            raise ValueError(f'side {d.get("side")!r}')
        return BenchRun(**d)
    except (TypeError, ValueError) as e:
        raise ResultsError(f'{path}:{n}: not a run record ({e}); the file was '
                           'edited by hand?') from None


def open_store(path: Path, key: dict[str, str]) -> Store:
    """Load the runs already in path, or start the file with its key."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b''
    if not data:
        atomicfile.write_text(path, json.dumps({'format': FORMAT, 'key': key},
                                               sort_keys=True) + '\n')
        return Store(path, key)
    first, nl, _ = data.partition(b'\n')
    try:
        head = _json(first) if nl else None
    except ValueError:
        head = None
    if not isinstance(head, dict) or head.get('format') != FORMAT:
        raise ResultsError(f'{path} is not a kloc results file; move it away or pass '
                           'another --out')
    if head.get('key') != key:
        raise ResultsError(f'{path} holds runs of another comparison '
                           f'({_describe(key, head.get("key"))}); move it away to '
                           'start over, or pass another --out')
    # Everything after the last newline is a run cut short when the job
    # stopped: it was not a finished run.
    whole = data[:data.rfind(b'\n') + 1]
    store = Store(path, key)
    for n, line in enumerate(whole.split(b'\n')[1:-1], 2):
        store.runs.append(_run(path, n, line))
    if whole != data:
        _cut(path, len(whole))
    return store


def _cut(path: Path, size: int) -> None:
    """Drop the file's tail after size bytes, in one step that needs no space.

    A rewrite would need room for the whole file, and one that truncates
    first loses every run if it stops half-way; truncating to the end of the
    last whole line either happens or does not, and keeps the lines before.
    """
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)
