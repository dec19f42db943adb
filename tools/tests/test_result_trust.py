# SPDX-License-Identifier: GPL-2.0
"""Nothing under OUT names code kloc runs, and a damaged result is one line, exit 2.

A run's meta.json records the kunit.py directory whose parser read it; make
report (and review, kcidb, the LAVA comparison) import that parser only
when it is the kunit.py of a tree kloc resolved itself: a Debian tree it
extracted into its cache, or a tree it recorded there when it ran KUnit on
it. A planted parser must never run. make review reads the patched
kernel's runs with the base's parser.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from kloc import paths
from kloc.kunitpy import ktap, runner
from kloc.review import review
from kloc.trees.sources import Tree
from kloc.version import KernelVersion

from .helpers import DATA, debian_tree, stock_parser

TOOLS = Path(__file__).resolve().parents[1]
TOPO = 'arm64_2n_its1'
CONSOLE = 'its-6.12-its1-pass.console'


def planted(where: Path, marker: Path) -> Path:
    """A kunit.py directory whose kunit_parser.py, if ever imported, writes marker."""
    kdir = where / 'tools' / 'testing' / 'kunit'
    kdir.mkdir(parents=True)
    (kdir / 'kunit_parser.py').write_text(
        f'open({str(marker)!r}, "w").write("ran")\n'
        f'exec(open({str(ktap.kunit_dir(stock_tree().path) / "kunit_parser.py")!r}).read())\n')
    return kdir


@functools.cache
def stock_tree() -> Tree:
    """The 6.12 Debian tree in the user's cache (once, before a test points KLOC_CACHE
    elsewhere)."""
    return debian_tree('6.12')


def recorded_run(kout: Path, kunit_dir: object, kernel: str = 'linux-6.12.57',
                 **extra: object) -> Path:
    d = kout / kernel
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / CONSOLE, d / f'{TOPO}.console')
    meta = d / f'{TOPO}.meta.json'
    meta.write_text(json.dumps({'kernel': kernel, 'topology': TOPO, 'seconds': 12.5,
                                'kunit_py_exit': 0, 'kunit_dir': kunit_dir,
                                'origin': 'kdir', **extra}))
    return meta


class Base(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)
        self.marker = self.dir / 'marker'
        self.out = self.dir / 'out'
        self.kout = self.out / 'kunit'
        stock_parser()          # the Debian trees, extracted in the user's cache
        stock_tree()

    def kloc(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, '-m', 'kloc', *args], cwd=TOOLS,
                              capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=str(TOOLS), **env))

    def one_line(self, r: subprocess.CompletedProcess[str], *want: str) -> str:
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertNotIn('Traceback', r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if not ln.startswith('[kloc ')]
        self.assertEqual(len(lines), 1, r.stderr)
        for w in want:
            self.assertIn(w, lines[0])
        return lines[0]


class PlantedParser(Base):
    def test_make_report_does_not_run_a_parser_a_result_names(self) -> None:
        meta = recorded_run(self.kout, str(planted(self.dir / 'evil', self.marker)))
        r = self.kloc('report', '--out', str(self.out))
        self.one_line(r, str(meta), 'run make kunit again')
        self.assertFalse(self.marker.exists(), 'the planted kunit_parser.py ran')
        self.assertFalse((self.kout / 'junit.xml').exists())

    def test_nor_one_beside_a_real_tree_or_under_the_cache_by_name(self) -> None:
        cache = paths.cache_dir()
        for name, kunit_dir in (
                ('not a kunit.py directory', str(self.dir)),
                ('a relative path', 'tools/testing/kunit'),
                ('a tree not kloc\'s', str(planted(self.dir / 'linux', self.marker))),
                ('dot-dot out of the cache\'s tree', os.path.join(
                    ktap.kunit_dir(stock_tree().path), os.path.relpath(
                        self.dir / 'linux' / 'tools' / 'testing' / 'kunit',
                        ktap.kunit_dir(stock_tree().path)))),
                ('a Debian-like name outside the cache', str(
                    planted(self.dir / 'trees' / 'linux-6.12' / 'src', self.marker)))):
            with self.subTest(name=name):
                meta = recorded_run(self.dir / name.replace(' ', '-'), kunit_dir)
                with self.assertRaises(runner.KunitError) as c:
                    runner.load_run(meta)
                self.assertIn(str(meta), str(c.exception))
                self.assertNotIn('\n', str(c.exception))
                self.assertFalse(self.marker.exists(), f'{name}: the planted parser ran')
        self.assertTrue(str(ktap.kunit_dir(stock_tree().path)).startswith(str(cache)))

    def test_the_tree_kloc_resolved_reads_it_whatever_the_file_says(self) -> None:
        meta = recorded_run(self.kout, str(planted(self.dir / 'evil', self.marker)))
        r = runner.load_run(meta, stock_tree())
        self.assertTrue(r.doc.found and r.doc.ok)
        statuses = review.statuses(meta.parent, stock_tree())
        self.assertIn('PASS', statuses.values())
        self.assertFalse(self.marker.exists())

    def test_a_debian_tree_in_the_cache_is_kloc_s_own(self) -> None:
        # as extracted (its stamp in trees/linux-X/stock, not in the copy), not only
        # once make kunit remembered it: a fresh cache refused every run it wrote
        self.assertTrue(runner._extracted(stock_parser().parents[2], paths.cache_dir()))
        meta = recorded_run(self.kout, str(stock_parser()))
        r = runner.load_run(meta)
        self.assertTrue(r.doc.found and r.doc.ok)
        self.assertEqual(self.kloc('report', '--out', str(self.out)).returncode, 0)

    def test_the_review_reads_both_sides_with_the_bases_parser(self) -> None:
        base = stock_tree()
        patched = Tree(self.dir / 'patched', base.version, 'review')
        job = runner.Job(patched, self.kout / 'patched', (TOPO,), 1, 10, self.dir / 'cache',
                         parser=base)
        self.assertEqual(job.parser_tree, base)
        self.assertEqual(runner.Job(patched, self.kout, (TOPO,), 1, 10, self.dir).parser_tree,
                         patched)


class RememberedTrees(Base):
    """A KDIR tree is kloc's own once it ran KUnit on it, in a cache of the user's."""

    def setUp(self) -> None:
        super().setUp()
        self.cache = self.dir / 'cache'
        env = mock.patch.dict(os.environ, {'KLOC_CACHE': str(self.cache)})
        env.start()
        self.addCleanup(env.stop)
        self.kdir = self.dir / 'linux'
        kd = ktap.kunit_dir(self.kdir)
        kd.mkdir(parents=True)
        for f in ('kunit_parser.py', 'kunit_printer.py'):
            shutil.copy(ktap.kunit_dir(stock_tree().path) / f, kd / f)

    def test_only_a_recorded_tree(self) -> None:
        meta = recorded_run(self.kout, str(ktap.kunit_dir(self.kdir)))
        with self.assertRaisesRegex(runner.KunitError, 'not the kunit.py of a kernel tree '
                                    'kloc used itself'):
            runner.load_run(meta)
        runner.remember_parser(self.kdir, self.cache)
        self.assertTrue(runner.load_run(meta).doc.ok)
        records = list((self.cache / runner.PARSER_TREES).iterdir())
        self.assertEqual(len(records), 1)
        self.assertEqual(stat.S_IMODE(records[0].stat().st_mode), 0o600)
        # a record that names another tree is no record of this one
        records[0].write_text(json.dumps({'tree': str(self.dir / 'other')}))
        with self.assertRaises(runner.KunitError):
            runner.load_run(meta)

    def test_a_record_others_can_write_is_refused(self) -> None:
        runner.remember_parser(self.kdir, self.cache)
        meta = recorded_run(self.kout, str(ktap.kunit_dir(self.kdir)))
        record = next((self.cache / runner.PARSER_TREES).iterdir())
        os.chmod(record, 0o666)
        with self.assertRaisesRegex(paths.CacheTrustError, 'writable by'):
            runner.load_run(meta)


class DamagedResults(Base):
    def cases(self) -> list[tuple[str, bytes]]:
        good = {'kernel': 'linux-6.12.57', 'topology': TOPO, 'seconds': 1.5,
                'kunit_py_exit': 0, 'kunit_dir': str(stock_parser()), 'origin': 'kdir'}

        def without(**change: object) -> bytes:
            return json.dumps({**good, **change}).encode()
        return [('garbage', b'garbage\n'), ('a list', b'[1, 2]'), ('null', b'null'),
                ('not UTF-8', b'\xff\xfe{}'), ('empty', b''),
                ('kernel a number', without(kernel=1)),
                ('kernel a path', without(kernel='../../etc')),
                ('topology not its name', without(topology='x86_64_2n')),
                ('topology a path', without(topology='../../../etc/passwd')),
                ('seconds a string', without(seconds='12')),
                ('seconds a boolean', without(seconds=True)),
                ('seconds negative', without(seconds=-1)),
                ('seconds missing', json.dumps({k: v for k, v in good.items()
                                                if k != 'seconds'}).encode()),
                ('exit code a string', without(kunit_py_exit='0')),
                ('origin unknown', without(origin='evil')),
                ('kunit_dir a number', without(kunit_dir=5)),
                ('too big', without(pad='x' * (1 << 17)))]

    def test_each_is_one_line_naming_the_file(self) -> None:
        for name, data in self.cases():
            with self.subTest(name=name):
                d = self.dir / name.replace(' ', '-') / 'linux-6.12.57'
                d.mkdir(parents=True)
                meta = d / f'{TOPO}.meta.json'
                meta.write_bytes(data)
                with self.assertRaises(runner.KunitError) as c:
                    runner.load_run(meta)
                msg = str(c.exception)
                self.assertNotIn('\n', msg)
                self.assertIn(str(meta), msg)
                self.assertIn('run make kunit again', msg)

    def test_not_a_regular_file(self) -> None:
        d = self.kout / 'linux-6.12.57'
        d.mkdir(parents=True)
        os.mkfifo(d / f'{TOPO}.meta.json')     # read, it would block for ever
        with self.assertRaisesRegex(runner.KunitError, 'not a regular file'):
            runner.load_run(d / f'{TOPO}.meta.json')

    def test_make_report(self) -> None:
        for name, data in self.cases()[:2] + self.cases()[5:7]:
            with self.subTest(name=name):
                out = self.dir / name.replace(' ', '-')
                d = out / 'kunit' / 'linux-6.12.57'
                d.mkdir(parents=True)
                (d / f'{TOPO}.meta.json').write_bytes(data)
                self.one_line(self.kloc('report', '--out', str(out)),
                              str(d / f'{TOPO}.meta.json'), 'damaged')


class Versions(unittest.TestCase):
    def test_the_labels_kloc_writes_pass(self) -> None:
        for v in ('6.1.0', '6.12.57', '7.2.13'):
            self.assertRegex(Tree(Path('/x'), KernelVersion.parse(v), 'kdir').label,
                             runner._LABEL)


if __name__ == '__main__':
    unittest.main()
