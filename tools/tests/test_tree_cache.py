# SPDX-License-Identifier: GPL-2.0
"""The cache of extracted Debian trees: damage found by content, leftovers removed."""

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
from kloc.series import changes, install
from kloc.series.state import is_installed
from kloc.trees import sources

from .test_install_safety import TOOLS, pristine_tree

SERIES = changes.load_series()
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
        p = self.tree.path / rel
        data = p.read_bytes()
        p.write_bytes(data[:len(data) // 2])

    def test_a_good_tree_is_reused(self) -> None:
        inode = self.tree.path.stat().st_ino
        again = sources.debian_tree('6.12', self.cache)
        self.assertEqual(again.path.stat().st_ino, inode, 'a good tree was extracted again')

    def test_truncated_files_are_found_and_extracted_again(self) -> None:
        for rel in ('Makefile', DRIVER, 'mm/percpu.c'):
            with self.subTest(rel=rel):
                self.truncate(rel)
                tree = sources.debian_tree('6.12', self.cache)
                self.assert_pristine(tree.path)

    def test_a_truncated_installed_driver_is_blamed_on_the_cache(self) -> None:
        install.install(self.tree.path, self.tree.version, SERIES)
        why = sources._tree_is_good(self.tree.path, '6.12', sources._stamp_for(self.tarball))
        self.assertEqual(why, '', 'an installed tree counts as damaged')
        self.truncate(DRIVER)
        why = sources._tree_is_good(self.tree.path, '6.12', sources._stamp_for(self.tarball))
        self.assertIn('damaged', why)
        self.assertIn(DRIVER, why)
        tree = sources.debian_tree('6.12', self.cache)
        self.assert_pristine(tree.path)
        self.assertFalse(is_installed(tree.path))
        saved = list((self.cache / 'kloc' / 'dropped-edits').rglob('irq-gic-v3-its.c'))
        self.assertEqual(len(saved), 1, 'the damaged file was not kept')

    def test_an_edit_that_keeps_the_hooks_is_not_damage(self) -> None:
        install.install(self.tree.path, self.tree.version, SERIES)
        p = self.tree.path / DRIVER
        p.write_text(p.read_text().replace('Unable to get SGI status', 'No SGI status'))
        why = sources._tree_is_good(self.tree.path, '6.12', sources._stamp_for(self.tarball))
        self.assertEqual(why, '')

    def test_an_edit_is_kept_not_blamed_on_the_cache(self) -> None:
        """A developer's change to a cached tree is not damage: a truncation is."""
        p = self.tree.path / 'mm/percpu.c'
        p.write_bytes(p.read_bytes() + b'/* my change */\n')
        inode = self.tree.path.stat().st_ino
        tree = sources.debian_tree('6.12', self.cache)
        self.assertEqual(tree.path.stat().st_ino, inode, 'an edit was extracted over')
        self.assertTrue(p.read_bytes().endswith(b'/* my change */\n'))

    def test_an_edited_installed_driver_is_tested_not_reverted(self) -> None:
        # make kunit KERNEL=6.12 after changing the installed driver's allocation
        # code (a mutant, applied by hand): the run tests the edited driver, and
        # neither the tree cache nor the install puts the original back.
        install.install(self.tree.path, self.tree.version, SERIES)
        mutant = PACKAGE_ROOT / 'kunit/its/mutants/6.12/numa-unaware-table.patch'
        subprocess.run(['patch', '-p1', '-s', '-d', str(self.tree.path), '-i', str(mutant)],
                       check=True)
        edited = (self.tree.path / DRIVER).read_bytes()
        tree = sources.debian_tree('6.12', self.cache)
        self.assertEqual((tree.path / DRIVER).read_bytes(), edited)
        self.assertEqual(install.install(tree.path, tree.version, SERIES), [])
        self.assertEqual((tree.path / DRIVER).read_bytes(), edited)
        self.assertIn(b'alloc_pages(GFP_KERNEL | __GFP_ZERO, order)', edited)

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
        src = self.tree.path.parent
        self.tree.path.rename(src / '.old-src-12345')
        (src / '.tmp-src-999999998').mkdir()
        tree = sources.debian_tree('6.12', self.cache)
        self.assert_pristine(tree.path)
        self.assertFalse((src / '.old-src-12345').exists())

    def test_an_old_stamp_is_checked_once_against_the_tarball(self) -> None:
        stamp = self.tree.path / sources.STAMP
        stamp.write_text(stamp.read_text().replace('"hashes"', '"x"'))
        inode = self.tree.path.stat().st_ino
        tree = sources.debian_tree('6.12', self.cache)
        self.assertEqual(tree.path.stat().st_ino, inode)
        self.assertIn('"hashes"', stamp.read_text())
        stamp.write_text(stamp.read_text().replace('"hashes"', '"x"'))
        self.truncate('mm/percpu.c')
        tree = sources.debian_tree('6.12', self.cache)
        self.assert_pristine(tree.path)


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
            self.assertFalse((src / 'src').exists())


if __name__ == '__main__':
    unittest.main()
