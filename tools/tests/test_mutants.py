# SPDX-License-Identifier: GPL-2.0
"""The mutants stay in step with the hooks: each applies to the installed driver."""

from __future__ import annotations

import unittest

from kloc.mutants import mutants
from kloc.series import changes, install
from kloc.series.patching import apply_patch, touched_files
from kloc.version import KernelVersion

from .helpers import debian_tree


class MutantsTest(unittest.TestCase):
    def test_each_mutant_applies_and_changes_the_installed_tree(self) -> None:
        for kernel in ('6.12', '7.2'):
            with self.subTest(kernel=kernel):
                self.check_kernel(kernel)

    def check_kernel(self, kernel: str) -> None:
        tree = debian_tree(kernel)
        plan = install.plan(tree.path, tree.version, changes.load_series())
        found = mutants.load(tree.version)
        self.assertGreaterEqual(len([m for m in found if m.kind == 'kunit']), 6)
        self.assertIn('lossy-lstats', [m.name for m in found if m.kind == 'guest'])
        if kernel == '7.2':     # 2024's recurrence, in itt_alloc_pool()
            self.assertIn('unchecked-page-address-itt', [m.name for m in found])
        for m in found:
            with self.subTest(kernel=kernel, mutant=m.name):
                self.assertTrue(m.about, 'a mutant says what it breaks on its first line')
                before = {rel: plan.final[rel] if rel in plan.final
                          else (tree.path / rel).read_bytes()
                          for rel in touched_files(m.patch.read_text())}
                out = apply_patch(m.patch, before, m.name)
                for rel, data in out.items():
                    self.assertNotEqual(data, before[rel])

    def test_each_suite_takes_its_own_newest_version(self) -> None:
        # 6.1: the ITS mutants are written for 6.12 only; the loopback one for 6.1 on.
        found = mutants.load(KernelVersion(6, 1, 100))
        self.assertEqual([(m.name, m.kind) for m in found], [('lossy-lstats', 'guest')])
        with self.assertRaisesRegex(mutants.MutantError, 'no mutants for Linux 5.15'):
            mutants.load(KernelVersion(5, 15))
