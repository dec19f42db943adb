# SPDX-License-Identifier: GPL-2.0
"""Install, uninstall and patch export, on real Debian trees."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from kloc.series import changes, install, mail, planning
from kloc.trees import linkcopy
from kloc.series.state import InstallError
from kloc.series.patching import touched_files
from kloc.version import KernelVersion

from .helpers import debian_tree, mini_tree, tree_snapshot

SERIES = changes.load_series()


def series_files(version: KernelVersion) -> list[str]:
    files: list[str] = []
    for change in SERIES:
        patch = change.patch_for(version)
        if patch is not None:
            files += touched_files(patch.read_text())
    return sorted(set(files))


snapshot = tree_snapshot


class InstallTest(unittest.TestCase):
    kernel = '6.12'

    def setUp(self) -> None:
        self.tree = debian_tree(self.kernel)
        self.tmp = tempfile.TemporaryDirectory(prefix='kloc-test-')
        self.addCleanup(self.tmp.cleanup)
        self.root = mini_tree(self.tree, Path(self.tmp.name) / 'linux',
                              series_files(self.tree.version))
        # The cached tree may carry the package already: start from pristine.
        _, read = planning.pristine_reader(self.tree.path)
        self.pristine: dict[str, bytes] = {}
        for rel in series_files(self.tree.version):
            data = read(rel)
            if data is None:        # a file the series creates: not in a pristine tree
                (self.root / rel).unlink(missing_ok=True)
                parent = (self.root / rel).parent
                while parent != self.root and parent.is_dir() and not any(parent.iterdir()):
                    parent.rmdir()
                    parent = parent.parent
                continue
            self.pristine[rel] = data
            (self.root / rel).write_bytes(data)

    def test_install_is_idempotent_and_uninstall_restores(self) -> None:
        before = snapshot(self.root)
        written = install.install(self.root, self.tree.version, SERIES)
        self.assertIn('drivers/irqchip/tests/irq-gic-v3-its_kunit.c', written)
        self.assertIn('drivers/irqchip/Kconfig', written)
        driver = (self.root / 'drivers/irqchip/irq-gic-v3-its.c').read_text()
        self.assertIn('#include "tests/irq-gic-v3-its_kunit_seam.h"', driver)
        self.assertIn('#include "tests/irq-gic-v3-its_kunit.c"', driver)
        self.assertIn('drivers/irqchip/tests/irq-gic-v3-its_kunit_seam.h', written)
        after = snapshot(self.root)
        mtimes = {p: (self.root / p).stat().st_mtime_ns for p in after}
        self.assertEqual(install.install(self.root, self.tree.version, SERIES), [])
        self.assertEqual(snapshot(self.root), after)
        self.assertEqual({p: (self.root / p).stat().st_mtime_ns for p in after}, mtimes)
        install.uninstall(self.root)
        self.assertEqual(snapshot(self.root), before)
        self.assertEqual(install.uninstall(self.root), [])

    def test_refuses_a_tree_where_a_hook_does_not_apply(self) -> None:
        driver = self.root / 'drivers/irqchip/irq-gic-v3-its.c'
        text = driver.read_text()
        line = '#include "irq-gic-common.h"'     # beside the seam's include
        self.assertEqual(text.count(line), 1)
        changed = text.replace(line, line + ' /* a local change */')
        self.assertNotEqual(changed, text)
        driver.write_text(changed)
        before = snapshot(self.root)
        with self.assertRaises(InstallError) as cm:
            install.install(self.root, self.tree.version, SERIES)
        msg = str(cm.exception)
        self.assertIn('drivers/irqchip/irq-gic-v3-its.c', msg)
        self.assertRegex(msg, r'hunk #\d+ \(at line \d+\) does not apply')
        self.assertEqual(snapshot(self.root), before, 'a refused install wrote something')

    def test_an_installed_tree_is_tested_as_it_is(self) -> None:
        """Issue 22, item 0: edits to an installed tree, on the seam's own lines too,
        are kept and tested; nothing is written."""
        install.install(self.root, self.tree.version, SERIES)
        driver = self.root / 'drivers/irqchip/irq-gic-v3-its.c'
        text = driver.read_text()
        for old, new in (('its->numa_node, GFP_KERNEL | __GFP_ZERO, order',
                          'NUMA_NO_NODE, GFP_KERNEL | __GFP_ZERO, order'),
                         ('#include "tests/irq-gic-v3-its_kunit_seam.h"\n', '')):
            with self.subTest(edit=old):
                self.assertEqual(text.count(old), 1)
                driver.write_text(text.replace(old, new))
                before = snapshot(self.root)
                out = io.StringIO()
                with contextlib.redirect_stderr(out):
                    self.assertEqual(install.install(self.root, self.tree.version, SERIES),
                                     [])
                self.assertEqual(snapshot(self.root), before)
                self.assertIn('testing your edits to drivers/irqchip/irq-gic-v3-its.c as '
                              'they are, writing nothing', out.getvalue())
                lost = "the package's lines are not all in" in out.getvalue()
                self.assertEqual(lost, 'seam' in old)

    def test_refuses_to_replace_a_file_of_the_tree(self) -> None:
        theirs = self.root / 'drivers/irqchip/tests/irq-gic-v3-its_kunit.c'
        theirs.parent.mkdir()
        theirs.write_text('/* theirs */\n')
        with self.assertRaisesRegex(InstallError, 'already exists in the tree'):
            install.install(self.root, self.tree.version, SERIES)

    def test_patches_apply_with_git_am(self) -> None:
        env = dict(os.environ, GIT_AUTHOR_NAME='t', GIT_AUTHOR_EMAIL='t@t',
                   GIT_COMMITTER_NAME='t', GIT_COMMITTER_EMAIL='t@t')

        def git(*args: str) -> str:
            return subprocess.run(['git', '-C', str(self.root)] + list(args), check=True,
                                  capture_output=True, text=True, env=env).stdout
        git('init', '-q')
        git('add', '-A')
        git('commit', '-q', '-m', 'base')
        plan = planning.plan(self.root, self.tree.version, SERIES)
        out = Path(self.tmp.name) / 'patches'
        mails = mail.export(plan, out, str(self.tree.version))
        self.assertEqual(len(mails), len(SERIES))
        self.assertTrue(mails[0].name.startswith('0001-'))
        self.assertIn(f'[PATCH 1/{len(SERIES)}]', mails[0].read_text())
        git('am', '-q', *map(str, mails))
        self.assertEqual(len(git('log', '--oneline').splitlines()), len(SERIES) + 1)
        installed = Path(self.tmp.name) / 'installed'
        mini_tree(self.tree, installed, [])
        for rel, data in self.pristine.items():
            (installed / rel).parent.mkdir(parents=True, exist_ok=True)
            (installed / rel).write_bytes(data)
        install.install(installed, self.tree.version, SERIES)
        for rel in plan.final:
            self.assertEqual((self.root / rel).read_bytes(), (installed / rel).read_bytes(),
                             f'{rel}: git am result differs from make install')


class InstallTest61(InstallTest):
    kernel = '6.1'


class SeriesTest(unittest.TestCase):
    def test_hook_choice_by_version(self) -> None:
        seam = SERIES[0]

        def chosen(v: KernelVersion) -> str:
            p = seam.patch_for(v)
            return p.name if p else ''
        self.assertEqual(chosen(KernelVersion(6, 1, 120)), '6.1.patch')
        self.assertEqual(chosen(KernelVersion(6, 6)), '6.1.patch')
        self.assertEqual(chosen(KernelVersion(6, 12, 1)), '6.12.patch')
        self.assertEqual(chosen(KernelVersion(6, 15)), '6.12.patch')
        with self.assertRaisesRegex(changes.SeriesError, 'oldest supported is 6.1'):
            seam.patch_for(KernelVersion(5, 15))


class FullTreeTest(unittest.TestCase):
    """make install then make uninstall leaves a pristine 6.12 tree as it was.

    On a hard-linked copy of the cached tree (every write is a new inode, so the
    cache keeps its files): the tool tests run in parallel, and others build the
    kselftest from the cached tree while this one takes the package out of it."""

    def test_full_tree_round_trip(self) -> None:
        with tempfile.TemporaryDirectory(prefix='kloc-full-tree-') as tmp:
            cached = debian_tree('6.12')
            path = Path(tmp) / 'linux'
            linkcopy.copy(cached.path, path)
            install.uninstall(path)
            before = snapshot(path)
            install.install(path, cached.version, SERIES)
            self.assertNotEqual(snapshot(path), before)
            install.uninstall(path)
            self.assertEqual(snapshot(path), before)
