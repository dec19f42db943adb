# SPDX-License-Identifier: GPL-2.0
"""The cache of extracted Debian trees: damage found by content, leftovers removed; the
extracted tree is only read, kloc's copy of it carries the series."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from kloc.paths import PACKAGE_ROOT
from kloc.series.state import STATE_DIR, is_installed
from kloc.trees import sources, workcopy

from .helpers import TOOLS, pristine_tree

DRIVER = 'drivers/irqchip/irq-gic-v3-its.c'


class TreeCacheTest(unittest.TestCase):
    """On a small linux-source tarball made from the real tree's files."""
    tmpdir: tempfile.TemporaryDirectory[str]
    srcdir: Path
    tarball: Path
    pristine: dict[str, bytes]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmpdir = tempfile.TemporaryDirectory(prefix='kloc-cache-')
        tmp = Path(cls.tmpdir.name)
        top = tmp / 'linux-source-6.12'
        pristine_tree(top)
        cls.srcdir = tmp / 'usr-src'
        cls.srcdir.mkdir()
        cls.tarball = cls.srcdir / 'linux-source-6.12.tar.xz'
        subprocess.run(['tar', '-cJf', str(cls.tarball), '-C', str(tmp), top.name],
                       check=True, env=dict(os.environ, XZ_OPT='-1'))
        cls.pristine = {str(p.relative_to(top)): p.read_bytes()
                        for p in top.rglob('*') if p.is_file()}

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmpdir.cleanup()

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix='kloc-cache-')
        self.addCleanup(tmp.cleanup)
        self.cache = Path(tmp.name)
        # both taken before either is set: the clean-up puts back the caller's
        old_src, old_cache = os.environ.get('KLOC_LINUX_SOURCE_DIR'), os.environ.get('KLOC_CACHE')
        self.addCleanup(self.restore_env, old_src, old_cache)
        os.environ['KLOC_LINUX_SOURCE_DIR'] = str(self.srcdir)
        os.environ['KLOC_CACHE'] = str(self.cache / 'kloc')
        self.tree = sources.debian_tree('6.12', self.cache)
        assert self.tree.source is not None
        self.stock = self.tree.source

    def restore_env(self, src: str | None, cache: str | None) -> None:
        for k, v in (('KLOC_LINUX_SOURCE_DIR', src), ('KLOC_CACHE', cache)):
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def assert_pristine(self, root: Path) -> None:
        for rel, data in self.pristine.items():
            self.assertEqual((root / rel).read_bytes(), data, rel)

    def truncate(self, rel: str) -> None:
        p = self.stock / rel
        data = p.read_bytes()
        p.write_bytes(data[:len(data) // 2])

    def test_a_good_tree_is_reused(self) -> None:
        inode = self.stock.stat().st_ino
        again = sources.debian_tree('6.12', self.cache)
        self.assertEqual(again.source, self.stock)
        self.assertEqual(self.stock.stat().st_ino, inode, 'a good tree was extracted again')

    def test_the_extracted_tree_stays_as_extracted_the_copy_carries_the_series(self) -> None:
        self.assert_pristine(self.stock)
        self.assertFalse(os.path.lexists(self.stock / STATE_DIR))
        self.assertTrue(is_installed(self.tree.path))
        self.assertNotEqual((self.tree.path / DRIVER).read_bytes(),
                            (self.stock / DRIVER).read_bytes())
        self.assertEqual((self.tree.path / 'Makefile').stat().st_ino,
                         (self.stock / 'Makefile').stat().st_ino, 'not a hard link')

    def test_truncated_files_are_found_and_extracted_again(self) -> None:
        for rel in ('Makefile', DRIVER, 'mm/percpu.c'):
            with self.subTest(rel=rel):
                self.truncate(rel)
                tree = sources.debian_tree('6.12', self.cache)
                self.assert_pristine(self.stock)
                if rel != DRIVER:       # the driver carries the series in the copy
                    self.assertEqual((tree.path / rel).stat().st_ino,
                                     (self.stock / rel).stat().st_ino)

    def test_an_edit_is_kept_not_blamed_on_the_cache(self) -> None:
        """A developer's change to a cached tree is not damage: a truncation is."""
        p = self.stock / 'mm/percpu.c'
        p.write_bytes(p.read_bytes() + b'/* my change */\n')
        inode = self.stock.stat().st_ino
        tree = sources.debian_tree('6.12', self.cache)
        self.assertEqual(self.stock.stat().st_ino, inode, 'an edit was extracted over')
        self.assertTrue(p.read_bytes().endswith(b'/* my change */\n'))
        self.assertTrue((tree.path / 'mm/percpu.c').read_bytes().endswith(b'/* my change */\n'))

    def test_an_edited_driver_is_tested_with_the_series_on_top(self) -> None:
        # a mutant applied by hand to the tree: the copy has the edit and the series
        mutant = PACKAGE_ROOT / 'kunit/its/mutants/6.12/numa-unaware-table.patch'
        pristine = (self.stock / DRIVER).read_bytes()
        carried = (self.tree.path / DRIVER).read_bytes()
        subprocess.run(['patch', '-p1', '-s', '-d', str(self.stock), '-i', str(mutant)],
                       check=True)
        tree = sources.debian_tree('6.12', self.cache)
        copied = (tree.path / DRIVER).read_bytes()
        self.assertIn(b'alloc_pages(GFP_KERNEL | __GFP_ZERO, order)', copied)
        self.assertNotEqual(copied, (self.stock / DRIVER).read_bytes(), 'no series on top')
        # and reverted, the copy is the series on the stock driver again
        (self.stock / DRIVER).write_bytes(pristine)
        tree = sources.debian_tree('6.12', self.cache)
        self.assertEqual((tree.path / DRIVER).read_bytes(), carried)

    def test_leftovers_of_killed_extractions_are_removed(self) -> None:
        src = self.tree.path.parent
        for name in ('.tmp-src-999999999', '.old-src-1'):
            (src / name / 'drivers').mkdir(parents=True)
            (src / name / 'drivers' / 'x.c').write_text('half\n')
        sources.debian_tree('6.12', self.cache)
        self.assertEqual(sorted(p.name for p in src.iterdir() if p.name.startswith('.')
                                and p.name != '.lock'), [])

    def test_an_interrupted_reextraction_recovers(self) -> None:
        # Killed after the damaged tree was moved aside, before the new one landed.
        src = self.stock.parent
        self.stock.rename(src / '.old-src-12345')
        (src / '.tmp-src-999999998').mkdir()
        tree = sources.debian_tree('6.12', self.cache)
        self.assert_pristine(self.stock)
        self.assert_pristine(tree.source or tree.path)
        self.assertFalse((src / '.old-src-12345').exists())

    def test_an_old_stamp_is_checked_once_against_the_tarball(self) -> None:
        stamp = self.stock / sources.STAMP
        stamp.write_text(stamp.read_text().replace('"hashes"', '"x"'))
        inode = self.stock.stat().st_ino
        sources.debian_tree('6.12', self.cache)
        self.assertEqual(self.stock.stat().st_ino, inode)
        self.assertIn('"hashes"', stamp.read_text())
        stamp.write_text(stamp.read_text().replace('"hashes"', '"x"'))
        self.truncate('mm/percpu.c')
        tree = sources.debian_tree('6.12', self.cache)
        self.assert_pristine(self.stock)
        self.assert_pristine(tree.source or tree.path)

    def test_two_commands_that_hold_the_copy_do_not_wait_on_each_other(self) -> None:
        """The finding: command A holds its copy (shared, until it exits) and asks for
        the tree again; command B, finding the copy stale, waited for A's copy while
        holding the tree's extraction lock, which A waited for: neither went on (make
        test's tool tests as an ordinary user hung so, 2026-12-05). B must not wait on
        the copy under the tree's lock: A goes on, exits, and B then refreshes."""
        workcopy.release_all()          # setUp's hold: this process is neither side
        code = ('import sys; from pathlib import Path; from kloc.trees import sources; '
                't = sources.debian_tree("6.12", Path(sys.argv[1])); '
                'print("held", flush=True); '
                'sys.stdin.readline() if sys.argv[2] == "a" else None; '
                'sources.debian_tree("6.12", Path(sys.argv[1])) if sys.argv[2] == "a" '
                'else None; print("done", flush=True)')
        env = dict(os.environ, PYTHONPATH=str(TOOLS), **{workcopy.HELD_ENV: ''})

        def start(side: str) -> subprocess.Popen[str]:
            p = subprocess.Popen([sys.executable, '-c', code, str(self.cache), side],
                                 cwd=TOOLS, env=env, text=True, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            self.addCleanup(p.wait)
            self.addCleanup(p.kill)
            return p

        a = start('a')
        assert a.stdout is not None and a.stdin is not None
        self.assertEqual(a.stdout.readline(), 'held\n')
        (self.tree.path / 'mm/percpu.c').unlink()       # the copy is stale now
        b = start('b')
        waiting = time.monotonic() + 60
        while not any(line.split()[1:2] == ['->'] and line.split()[5:6] == [str(b.pid)]
                      for line in Path('/proc/locks').read_text().splitlines()):
            self.assertLess(time.monotonic(), waiting, 'b never waited for a lock')
            self.assertIsNone(b.poll(), 'b did not wait for a holds the copy')
            time.sleep(0.1)
        a.stdin.write('go\n')
        a.stdin.flush()
        out_a, _ = a.communicate(timeout=60)      # before the fix: a waited for ever
        self.assertEqual(out_a, 'done\n')
        out_b, _ = b.communicate(timeout=60)
        self.assertEqual(out_b, 'held\ndone\n')
        self.assertEqual((self.tree.path / 'mm/percpu.c').read_bytes(),
                         self.pristine['mm/percpu.c'])


class SigtermTest(unittest.TestCase):
    def test_sigterm_during_extraction_leaves_no_half_tree(self) -> None:
        tarball = Path('/usr/src/linux-source-6.12.tar.xz')
        if not tarball.exists():
            raise unittest.SkipTest('linux-source-6.12 is not installed')
        with tempfile.TemporaryDirectory(prefix='kloc-cache-') as tmp:
            env = dict(os.environ, KLOC_CACHE=tmp, PYTHONPATH=str(TOOLS))
            proc = subprocess.Popen([sys.executable, '-m', 'kloc', 'tree', '--kernel', '6.12'],
                                    env=env, stderr=subprocess.PIPE, text=True)
            src = Path(tmp) / 'trees' / 'linux-6.12'
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                half = list(src.glob('.tmp-src-*/*'))
                if len(half) > 3:
                    break
                time.sleep(0.2)
            self.assertTrue(half, 'the extraction never started')
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
            self.assertEqual(proc.returncode, 130, err)
            self.assertNotIn('Traceback', err)
            self.assertEqual(list(src.glob('.tmp-src-*')), [], 'a half tree was left')
            self.assertFalse((src / sources.STOCK).exists())


if __name__ == '__main__':
    unittest.main()
