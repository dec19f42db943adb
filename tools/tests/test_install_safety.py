# SPDX-License-Identifier: GPL-2.0
"""The install never loses a user's work and never leaves a tree half-changed.

Hand edits are kept or refused, never silently overwritten or restored; an
install or uninstall killed (or failed) after any of its writes is rolled
back by the next command; a tree whose .kloc/ is gone, or damaged, or that
lost a saved original, is recovered from the series.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from kloc.series import changes, install, planning
from kloc.series.state import JOURNAL, MANIFEST, STATE_DIR, EditedFilesError, InstallError, \
    read_manifest
from kloc.series.treefiles import Faults, uncommitted
from kloc.trees import sources
from kloc.version import KernelVersion

from .helpers import debian_tree, tree_snapshot

SERIES = changes.load_series()
DRIVER = 'drivers/irqchip/irq-gic-v3-its.c'
SUITE = 'drivers/irqchip/tests/irq-gic-v3-its_kunit.c'
TOOLS = Path(__file__).resolve().parents[1]


snapshot = tree_snapshot


def pristine_tree(dest: Path, kernel: str = '6.12') -> tuple[Path, KernelVersion]:
    """A small tree: the key files of a kernel tree and every file the series touches."""
    tree = debian_tree(kernel)
    _, read = planning.pristine_reader(tree.path)      # the cache may carry the package
    for rel in set(sources.checked_files(tree.version)):
        data = read(rel)
        if data is None:
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)
    return dest, tree.version


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, '-m', 'kloc', *args], cwd=TOOLS,
                          env=dict(os.environ, PYTHONPATH=str(TOOLS), **(env or {})),
                          capture_output=True, text=True)


class Base(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix='kloc-safety-')
        self.addCleanup(tmp.cleanup)
        self.tmp = Path(tmp.name)
        self.root, self.version = pristine_tree(self.tmp / 'linux')
        self.pristine = snapshot(self.root)
        self.save = self.tmp / 'saved'

    def installed_snapshot(self) -> dict[str, str]:
        ref = self.tmp / 'ref'
        shutil.copytree(self.root, ref)
        install.uninstall(ref, self.version, SERIES, force=True)
        install.install(ref, self.version, SERIES)
        snap = snapshot(ref)
        shutil.rmtree(ref)
        return snap


class HandEditTest(Base):
    def setUp(self) -> None:
        super().setUp()
        install.install(self.root, self.version, SERIES)
        self.installed = snapshot(self.root)

    def edit(self, rel: str, old: str, new: str) -> str:
        p = self.root / rel
        text = p.read_text()
        self.assertIn(old, text)
        p.write_text(text.replace(old, new, 1))
        return p.read_text()

    def test_an_edit_that_keeps_the_hooks_is_kept_and_tested(self) -> None:
        # As when working on a driver patch: the implicit install of make kunit
        # must leave it, so the build tests the edited driver.
        edited = self.edit(DRIVER, 'pr_err_ratelimited("Unable to get SGI status\\n");',
                           'pr_err_ratelimited("Unable to get the SGI status\\n");')
        self.assertEqual(install.install(self.root, self.version, SERIES), [])
        self.assertEqual((self.root / DRIVER).read_text(), edited)
        self.assertEqual(planning.edited_files(self.root), [DRIVER])

    def test_an_edited_suite_is_kept(self) -> None:
        edited = self.edit(SUITE, 'KUNIT_CASE', 'KUNIT_CASE')
        (self.root / SUITE).write_text(edited + '/* mine */\n')
        self.assertEqual(install.install(self.root, self.version, SERIES), [])
        self.assertTrue((self.root / SUITE).read_text().endswith('/* mine */\n'))

    def older_package(self) -> None:
        """Make the tree look installed by another version of the package: its driver's
        installed hash is not what this series installs, so install has work to do."""
        m = self.root / '.kloc/manifest.json'
        doc = json.loads(m.read_text())
        doc['files'][DRIVER]['installed'] = hashlib.sha256(b'an older series').hexdigest()
        m.write_text(json.dumps(doc, indent=1, sort_keys=True) + '\n')

    def test_an_edit_that_drops_the_hooks_is_tested_as_it_is(self) -> None:
        # Issue 22, item 0: the package is installed as it is now, so there is
        # nothing to install, and the edit, on the package's own line too, is tested.
        edited = self.edit(DRIVER, '#include "tests/irq-gic-v3-its_kunit.c"', '')
        before = snapshot(self.root)
        self.assertEqual(install.install(self.root, self.version, SERIES), [])
        self.assertEqual(snapshot(self.root), before)
        self.assertEqual((self.root / DRIVER).read_text(), edited)

    def test_an_edit_a_new_series_would_overwrite_is_refused_then_forced(self) -> None:
        edited = self.edit(DRIVER, '#include "tests/irq-gic-v3-its_kunit.c"', '')
        self.older_package()
        before = snapshot(self.root)
        with self.assertRaises(EditedFilesError) as cm:
            install.install(self.root, self.version, SERIES)
        msg = str(cm.exception)
        self.assertIn(DRIVER, msg)
        self.assertIn('FORCE=1', msg)
        self.assertEqual(snapshot(self.root), before, 'a refused install wrote something')
        self.assertEqual(install.install(self.root, self.version, SERIES, force=True,
                                         save=self.save), [DRIVER])
        self.assertEqual(snapshot(self.root), self.installed)
        self.assertEqual((self.save / DRIVER).read_text(), edited, 'the edit was lost')

    def test_uninstall_refuses_to_discard_an_edit(self) -> None:
        for rel in (DRIVER, SUITE):
            with self.subTest(rel=rel):
                p = self.root / rel
                p.write_text(p.read_text() + '/* my work */\n')
                before = snapshot(self.root)
                with self.assertRaises(EditedFilesError) as cm:
                    install.uninstall(self.root, self.version, SERIES)
                self.assertIn(rel, str(cm.exception))
                self.assertEqual(snapshot(self.root), before)
                p.write_text(p.read_text().replace('/* my work */\n', ''))
        p = self.root / SUITE
        p.write_text(p.read_text() + '/* my work */\n')
        install.uninstall(self.root, self.version, SERIES, force=True, save=self.save)
        self.assertEqual(snapshot(self.root), self.pristine)
        self.assertIn('/* my work */', (self.save / SUITE).read_text())

    def test_cli_names_the_file_and_exits_2(self) -> None:
        self.edit(DRIVER, '#include "tests/irq-gic-v3-its_kunit.c"', '')
        self.older_package()
        for cmd in ('install', 'uninstall'):
            r = cli(cmd, '--kdir', str(self.root))
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(DRIVER, r.stderr)
            self.assertNotIn('Traceback', r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_dirty_files_are_the_edits_and_git_s_changes_not_the_package_s(self) -> None:
        git(self.root, 'init', '-q')
        git(self.root, 'add', '-A')
        git(self.root, 'commit', '-qm', 'installed')
        self.assertEqual(planning.dirty_files(self.root), [])
        self.edit(DRIVER, 'pr_err_ratelimited("Unable to get SGI status\\n");',
                  'pr_err_ratelimited("Unable to get the SGI status\\n");')
        (self.root / 'Kconfig').write_text((self.root / 'Kconfig').read_text() + '\n')
        self.assertEqual(planning.dirty_files(self.root), sorted([DRIVER, 'Kconfig']))


def git(tree: Path, *args: str) -> None:
    subprocess.run(['git', '-C', str(tree), '-c', 'user.name=kloc', '-c',
                    'user.email=kloc@localhost', *args], check=True, capture_output=True)


class UncommittedTest(unittest.TestCase):
    """treefiles.uncommitted: a git tree's changed tracked files; no kernel tree needed."""

    def test_changes_renames_and_not_kloc_s_state(self) -> None:
        with tempfile.TemporaryDirectory(prefix='kloc-git-') as tmp:
            tree = Path(tmp)
            self.assertEqual(uncommitted(tree), [])             # not a git tree
            for rel in ('a/old.c', 'b.c', 'c.c', f'{STATE_DIR}/{MANIFEST}'):
                (tree / rel).parent.mkdir(parents=True, exist_ok=True)
                (tree / rel).write_text(rel + '\n')
            git(tree, 'init', '-q')
            git(tree, 'add', '-A')
            git(tree, 'commit', '-qm', 'base')
            self.assertEqual(uncommitted(tree), [])
            git(tree, 'mv', 'a/old.c', 'a/new.c')
            (tree / 'b.c').write_text('changed\n')
            (tree / f'{STATE_DIR}/{MANIFEST}').write_text('{}\n')
            (tree / 'untracked.c').write_text('new\n')
            self.assertEqual(uncommitted(tree), ['a/new.c', 'a/old.c', 'b.c'])


class InterruptionTest(Base):
    """Kill or fail install and uninstall after the 1st, 2nd, ... N-th write."""

    def check_every_write(self, op: str) -> None:
        if op == 'uninstall':
            install.install(self.root, self.version, SERIES)
        start = snapshot(self.root)
        installed = self.installed_snapshot()
        work = self.tmp / 'work'
        shutil.copytree(self.root, work)
        writes: list[int] = []
        getattr(install, op)(work, self.version, SERIES, faults=Faults(on_write=writes.append))
        total = len(writes)
        shutil.rmtree(work)
        self.assertGreater(total, 10)
        for mode in ('kill', 'fail'):
            for n in range(total):
                for then in ('uninstall', 'install'):
                    with self.subTest(op=op, mode=mode, after=n, then=then):
                        shutil.copytree(self.root, work)
                        if mode == 'kill':
                            r = cli(op, '--kdir', str(work), env={
                                'KLOC_FAULT_AFTER': str(n), 'KLOC_FAULT_MODE': 'kill'})
                            self.assertEqual(r.returncode, -9, r.stderr)
                        else:
                            with self.assertRaises(OSError):
                                getattr(install, op)(work, self.version, SERIES,
                                                     faults=Faults(n, 'fail'))
                        self.assertNotEqual(snapshot(work), {}, 'the tree is gone')
                        r = cli(then, '--kdir', str(work))
                        self.assertEqual(r.returncode, 0, r.stderr)
                        self.assertEqual(snapshot(work),
                                         self.pristine if then == 'uninstall' else installed)
                        shutil.rmtree(work)
        self.assertEqual(snapshot(self.root), start)

    def test_install_interrupted_at_every_write(self) -> None:
        self.check_every_write('install')

    def test_uninstall_interrupted_at_every_write(self) -> None:
        self.check_every_write('uninstall')


class ReadOnlyTest(Base):
    def test_plan_and_preview_write_nothing_with_a_pending_journal(self) -> None:
        with self.assertRaises(OSError):
            install.install(self.root, self.version, SERIES, faults=Faults(8, 'fail'))
        self.assertTrue((self.root / STATE_DIR / JOURNAL).exists())
        before = snapshot(self.root)
        with self.assertRaisesRegex(InstallError, 'roll it back'):
            planning.plan(self.root, self.version, SERIES)
        with self.assertRaisesRegex(InstallError, 'roll it back'):
            planning.preview(self.root, self.version, SERIES)
        self.assertEqual(snapshot(self.root), before)

    def test_preview_is_what_install_does(self) -> None:
        want = planning.preview(self.root, self.version, SERIES)
        self.assertEqual(snapshot(self.root), self.pristine)
        install.install(self.root, self.version, SERIES)
        for rel, data in want.items():
            self.assertEqual((self.root / rel).read_bytes(), data, rel)


class LostStateTest(Base):
    def setUp(self) -> None:
        super().setUp()
        install.install(self.root, self.version, SERIES)
        self.installed = snapshot(self.root)

    def test_kloc_deleted(self) -> None:
        shutil.rmtree(self.root / STATE_DIR)
        r = cli('uninstall', '--kdir', str(self.root))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(snapshot(self.root), self.pristine)
        self.assertIn('rebuilt', r.stderr)

    def test_kloc_deleted_then_install(self) -> None:
        shutil.rmtree(self.root / STATE_DIR)
        r = cli('install', '--kdir', str(self.root))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(snapshot(self.root), self.installed)

    def test_a_saved_original_is_missing(self) -> None:
        (self.root / STATE_DIR / 'orig' / DRIVER).unlink()
        before = snapshot(self.root)
        r = cli('uninstall', '--kdir', str(self.root))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertNotIn('Traceback', r.stderr)
        self.assertIn(DRIVER, r.stderr)
        self.assertIn('FORCE=1', r.stderr)
        self.assertEqual(snapshot(self.root), before, 'a refused uninstall wrote something')
        r = cli('uninstall', '--kdir', str(self.root), env={'FORCE': '1'})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(snapshot(self.root), self.pristine)

    def test_a_damaged_manifest(self) -> None:
        for text in ('[]', '{"files": [1]}', '{', '\xff', '{"files": {"x": 3}}'):
            with self.subTest(manifest=text):
                (self.root / STATE_DIR / MANIFEST).write_text(text)
                for cmd in ('install', 'uninstall'):
                    r = cli(cmd, '--kdir', str(self.root))
                    self.assertEqual(r.returncode, 2, r.stderr)
                    self.assertNotIn('Traceback', r.stderr)
                    self.assertIn(MANIFEST, r.stderr)
                    self.assertIn('FORCE=1', r.stderr)
        r = cli('uninstall', '--kdir', str(self.root), env={'FORCE': '1'})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(snapshot(self.root), self.pristine)

    def test_a_format_1_manifest_still_uninstalls(self) -> None:
        state = self.root / STATE_DIR
        m = read_manifest(self.root)
        assert m is not None
        files = {rel: r.original is not None for rel, r in m.files.items()}
        (state / MANIFEST).write_text(
            '{"files": %s, "series": [], "version": "x"}' %
            str(files).replace("'", '"').replace('True', 'true').replace('False', 'false'))
        install.uninstall(self.root, self.version, SERIES)
        self.assertEqual(snapshot(self.root), self.pristine)


if __name__ == '__main__':
    unittest.main()
