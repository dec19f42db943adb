# SPDX-License-Identifier: GPL-2.0
"""Output files are written whole or not at all, and a full disk says so.

The disk-full tests fill a real 256 KiB tmpfs (mounting one needs root;
they skip where it cannot be mounted) after a good previous output is in
place, and check that the previous output is still there byte for byte.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
from dataclasses import asdict
from pathlib import Path
from typing import Any

# Hypothesis keeps a cache (of Unicode tables) in ./.hypothesis: not in the tree.
os.environ.setdefault('HYPOTHESIS_STORAGE_DIRECTORY',
                      os.path.join(tempfile.gettempdir(), 'kloc-hypothesis'))

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kloc import atomicfile
from kloc.bench import store
from kloc.series import mail
from kloc.errors import DiskFullError
from kloc.series.planning import InstallPlan, Step
from kloc.bench.store import ResultsError, BenchRun
from kloc.series.changes import Change

from .helpers import DATA, require_root, stock_parser

TOOLS = Path(__file__).resolve().parent.parent
KEY = {'tree': 'linux-6.1 6.1.192', 'a': 'slub', 'b': 'slab'}
SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def tmpfs(test: unittest.TestCase, size: str = '256k') -> Path:
    """A fresh tmpfs of size, unmounted when the test ends; skips if none can be mounted."""
    require_root(test, 'mounts a tmpfs')
    d = tempfile.mkdtemp(prefix='kloc-full-')
    test.addCleanup(os.rmdir, d)
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size}', 'kloc-test', d],
                       capture_output=True, text=True)
    if r.returncode:
        test.skipTest(f'cannot mount a tmpfs here: {r.stderr.strip()}')
    test.addCleanup(umount, d)
    return Path(d)


def umount(d: str) -> None:
    subprocess.run(['umount', d], check=True)


def fill(d: Path) -> None:
    """Fill the file system of d to the last byte."""
    with (d / 'filler').open('wb', buffering=0) as f:
        for chunk in (65536, 4096, 512, 1):
            try:
                while True:
                    f.write(b'\0' * chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
    st_ = os.statvfs(d)
    assert st_.f_bavail == 0, f'{d} still has {st_.f_bavail} blocks free'


def snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob('*'))
            if p.is_file()}


def kunit_run(kout: Path, kernel: str, console: str, topology: str = 'arm64_2n_its1') -> None:
    """A recorded KUnit run, as kunit_run.run_topology leaves it."""
    d = kout / kernel
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / console, d / f'{topology}.console')
    (d / f'{topology}.meta.json').write_text(json.dumps(
        {'kernel': kernel, 'topology': topology, 'seconds': 12.5, 'kunit_py_exit': 0,
         'kunit_dir': str(stock_parser())}))


def kloc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, '-m', 'kloc', *args], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(TOOLS)))


class Report(unittest.TestCase):
    def test_a_full_disk_keeps_the_previous_report(self) -> None:
        out = tmpfs(self)
        kout = out / 'kunit'
        kunit_run(kout, 'linux-6.12.57', 'its-6.12-its1-pass.console')
        r = kloc('report', '--out', str(out))
        self.assertEqual(r.returncode, 0, r.stderr)
        before = {n: (kout / n).read_bytes() for n in ('junit.xml', 'summary.txt')}
        # More runs: the new report is bigger than the space the old one frees.
        kunit_run(kout, 'linux-6.1.192', 'its-6.1-its1-pass.console')
        kunit_run(kout, 'linux-6.12.58', 'mutant-numa-unaware-lvl2.console')
        fill(out)
        r = kloc('report', '--out', str(out))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertNotIn('Traceback', r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn('disk full', lines[0])
        self.assertIn(str(kout / 'junit.xml'), lines[0])
        for name, data in before.items():
            self.assertEqual((kout / name).read_bytes(), data, f'{name} was changed')
        self.assertEqual(sorted(p.name for p in kout.iterdir()),
                         ['junit.xml', 'linux-6.1.192', 'linux-6.12.57', 'linux-6.12.58',
                          'summary.txt'], 'a temporary file was left behind')
        # Space again: the same command writes the new report.
        (out / 'filler').unlink()
        r = kloc('report', '--out', str(out))
        self.assertEqual(r.returncode, 1, r.stderr)    # the mutant fails
        self.assertIn('linux-6.12.58', (kout / 'summary.txt').read_text())


def plan(n: int, size: int, tag: str) -> InstallPlan:
    steps = []
    for i in range(n):
        rel = f'drivers/kloc/file{i}.c'
        after = ''.join(f'/* {tag} {i} line {j} */\n' for j in range(size // 24)).encode()
        steps.append(Step(Change(f'change{i}', f'kloc: change {i} of {tag}', f'Body {i}.\n',
                                 {}, ()), {rel: None}, {rel: after}))
    return InstallPlan({}, {}, steps)


class Patches(unittest.TestCase):
    def test_a_full_disk_keeps_the_previous_series(self) -> None:
        d = tmpfs(self)
        out = d / 'patches' / 'linux-6.12'
        old = mail.export(plan(3, 2000, 'old'), out, '6.12')
        self.assertEqual(len(old), 3)
        before = snapshot(d / 'patches')
        fill(d)
        with self.assertRaisesRegex(DiskFullError, f'{out}: disk full; the previous series'):
            mail.export(plan(4, 30000, 'new'), out, '6.12')
        self.assertEqual(snapshot(d / 'patches'), before)
        self.assertEqual(os.listdir(d / 'patches'), ['linux-6.12'],
                         'a temporary directory was left behind')

    def test_a_new_series_replaces_the_old_one_whole(self) -> None:
        with tempfile.TemporaryDirectory() as t:
            out = Path(t) / 'patches' / 'linux-6.12'
            mail.export(plan(4, 100, 'old'), out, '6.12')
            new = mail.export(plan(2, 100, 'new'), out, '6.12')
            self.assertEqual(sorted(p.name for p in out.iterdir()),
                             sorted(p.name for p in new))
            self.assertTrue(all('of new' in p.read_text() for p in new))
            self.assertEqual(os.listdir(out.parent), ['linux-6.12'])


class StoreOnAFullDisk(unittest.TestCase):
    def test_an_append_that_does_not_fit_keeps_the_earlier_runs(self) -> None:
        d = tmpfs(self)
        path = d / 'runs.jsonl'
        s = store.open_store(path, KEY)
        s.append(BenchRun('a', True, 5.1, {'pps_single': 8e4}))
        s.append(BenchRun('b', False, 60.0, None, 'the guest printed no result', 'Kernel panic'))
        before = path.read_bytes()
        fill(d)
        with self.assertRaisesRegex(DiskFullError, f'{path}: disk full; this run was not '
                                    'recorded, the 2 before it are kept'):
            s.append(BenchRun('a', False, 9.0, None, 'panic', 'x' * 60000))
        self.assertEqual(path.read_bytes(), before)
        self.assertEqual(len(s.runs), 2)
        again = store.open_store(path, KEY)
        self.assertEqual(again.runs, s.runs)

    def test_a_new_file_on_a_full_disk_says_so(self) -> None:
        d = tmpfs(self)
        fill(d)
        with self.assertRaisesRegex(DiskFullError, 'runs.jsonl: disk full'):
            store.open_store(d / 'runs.jsonl', dict(KEY, pad='x' * 8000))
        self.assertFalse((d / 'runs.jsonl').exists())

    def test_dropping_a_torn_line_needs_no_space(self) -> None:
        d = tmpfs(self)
        path = d / 'runs.jsonl'
        s = store.open_store(path, KEY)
        s.append(BenchRun('a', True, 5.1, {'pps_single': 8e4}))
        whole = path.read_bytes()
        with path.open('ab') as f:
            f.write(b'{"side": "b", "ok": tr')
        fill(d)
        again = store.open_store(path, KEY)
        self.assertEqual(again.runs, s.runs)
        self.assertEqual(path.read_bytes(), whole)


def _drop_torn_line_limited(path: str, limit: int) -> None:
    """In a child: open the store when no file may grow past limit bytes."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        store.open_store(Path(path), KEY)
    except Exception as e:    # what it raises does not matter here: what is left does
        print(type(e).__name__, e)


class TornLine(unittest.TestCase):
    def test_dropping_a_torn_line_never_loses_whole_ones(self) -> None:
        """A rewrite that stops half-way (here: a file size limit) must not cost runs."""
        with tempfile.TemporaryDirectory() as t:
            path = Path(t) / 'runs.jsonl'
            s = store.open_store(path, KEY)
            for i in range(20):
                s.append(BenchRun('a' if i % 2 else 'b', True, 5.0 + i, {'i': i}))
            whole = path.read_bytes()
            with path.open('ab') as f:
                f.write(b'{"side": "b", "ok": tr')
            r = subprocess.run(
                [sys.executable, '-c', 'import sys; from tests.test_outputs import '
                 '_drop_torn_line_limited as f; f(sys.argv[1], int(sys.argv[2]))',
                 str(path), str(len(whole) // 2)],
                cwd=TOOLS, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(path.read_bytes().startswith(whole), r.stdout)
            self.assertEqual(store.open_store(path, KEY).runs, s.runs)


# --- the loader, on files of every shape ------------------------------------

def _finite() -> st.SearchStrategy[float]:
    return st.floats(allow_nan=False, allow_infinity=False)


_JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | _finite() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12)

_RUNS = st.builds(
    BenchRun, side=st.sampled_from(['a', 'b']), ok=st.booleans(), seconds=_finite(),
    record=st.none() | st.dictionaries(st.text(), _JSON, max_size=5), why=st.text(),
    console_tail=st.text(), console=st.text())

_KEYS = st.dictionaries(st.sampled_from(['tree', 'a', 'b', 'arch', 'qemu']),
                        st.sampled_from(['slub', 'slab', 'linux-6.1 6.1.192', 'x86_64', '']),
                        max_size=4)


def _line(run: BenchRun) -> bytes:
    return (json.dumps(asdict(run), sort_keys=True) + '\n').encode()


def _head(key: object) -> bytes:
    return (json.dumps({'format': store.FORMAT, 'key': key}, sort_keys=True) + '\n').encode()


# A line of a file that has been through anything: a real run, a run with a
# field of the wrong type or missing, any JSON value, any text, any bytes.
_GARBAGE = st.one_of(
    _RUNS.map(_line),
    st.tuples(_RUNS, st.sampled_from(list(asdict(BenchRun('a', True, 0.0)))), _JSON).map(
        lambda t: (json.dumps(dict(asdict(t[0]), **{t[1]: t[2]})) + '\n').encode()),
    st.tuples(_RUNS, st.sampled_from(list(asdict(BenchRun('a', True, 0.0))))).map(
        lambda t: (json.dumps({k: v for k, v in asdict(t[0]).items() if k != t[1]})
                   + '\n').encode()),
    _JSON.map(lambda v: (json.dumps(v) + '\n').encode()),
    st.text().map(lambda s: s.encode('utf-8', 'surrogatepass') + b'\n'),
    st.binary(max_size=40).map(lambda b: b + b'\n'),
    st.just(b'\n'),
    st.just(b'[' * 100000 + b'\n'))


class Loader(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.path = Path(self.tmp.name) / 'runs.jsonl'

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def load(self, data: bytes, key: dict[str, str] = KEY) -> store.Store | None:
        """The store of a file holding data, or None where it is refused as it must be."""
        self.path.write_bytes(data)
        try:
            return store.open_store(self.path, key)
        except ResultsError:
            self.assertEqual(self.path.read_bytes(), data, 'a refused file was changed')
            return None

    @SETTINGS
    @given(st.one_of(st.just(_head(KEY)), _KEYS.map(_head), _JSON.map(_head), _GARBAGE),
           st.lists(_GARBAGE, max_size=6), st.binary(max_size=60))
    def test_any_file_gives_a_store_or_a_results_error(self, head: bytes, lines: list[bytes],
                                                       tail: bytes) -> None:
        store = self.load(head + b''.join(lines) + tail)
        if store is not None:
            for r in store.runs:
                self.assertIn(r.side, ('a', 'b'))
                self.assertIsInstance(r.ok, bool)
                self.assertIsInstance(r.seconds, (int, float))
                self.assertTrue(r.record is None or isinstance(r.record, dict))
            self.assertTrue(self.path.read_bytes().endswith(b'\n'))

    @SETTINGS
    @given(st.lists(_RUNS, max_size=5), _RUNS, st.data())
    def test_a_partial_last_line_is_dropped(self, runs: list[BenchRun], torn: BenchRun,
                                            data: st.DataObject) -> None:
        whole = _head(KEY) + b''.join(map(_line, runs))
        line = _line(torn)
        cut = data.draw(st.integers(1, len(line) - 1), label='cut')
        store = self.load(whole + line[:cut])
        assert store is not None
        self.assertEqual(store.runs, runs)
        self.assertEqual(self.path.read_bytes(), whole)

    @SETTINGS
    @given(_KEYS, _KEYS, st.lists(_RUNS, max_size=3))
    def test_a_file_of_another_key_is_refused_and_kept(self, theirs: dict[str, str],
                                                       ours: dict[str, str],
                                                       runs: list[BenchRun]) -> None:
        store = self.load(_head(theirs) + b''.join(map(_line, runs)), ours)
        if theirs == ours:
            assert store is not None
            self.assertEqual(store.runs, runs)
        else:
            self.assertIsNone(store)

    @SETTINGS
    @given(_KEYS, st.lists(_RUNS, max_size=8))
    def test_what_the_store_writes_it_reads_back(self, key: dict[str, str],
                                                 runs: list[BenchRun]) -> None:
        self.path.unlink(missing_ok=True)
        s = store.open_store(self.path, key)
        for r in runs:
            s.append(r)
        self.assertEqual(store.open_store(self.path, key).runs, runs)


class AtomicFile(unittest.TestCase):
    def test_a_failed_write_leaves_the_old_file_and_no_temporary(self) -> None:
        d = tmpfs(self)
        path = d / 'junit.xml'
        atomicfile.write_text(path, '<ok/>\n')
        fill(d)
        with self.assertRaisesRegex(DiskFullError, f'{path}: disk full; the previous file'):
            atomicfile.write_text(path, '<new/>' * 10000)
        self.assertEqual(path.read_text(), '<ok/>\n')
        self.assertEqual(sorted(os.listdir(d)), ['filler', 'junit.xml'])


if __name__ == '__main__':
    unittest.main()
