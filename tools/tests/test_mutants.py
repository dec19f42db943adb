# SPDX-License-Identifier: GPL-2.0
"""The mutants stay in step with the hooks: each applies to the installed driver."""

from __future__ import annotations

import unittest

from kloc import install, mutants, series
from kloc.apply import apply_patch
from kloc.version import KernelVersion

from .helpers import debian_tree


class MutantsTest(unittest.TestCase):
    def test_each_mutant_applies_and_changes_the_installed_tree(self) -> None:
        tree = debian_tree('6.12')
        plan = install.plan(tree.path, tree.version, series.load_series())
        found = mutants.load(tree.version)
        self.assertGreaterEqual(len(found), 6)
        for m in found:
            with self.subTest(mutant=m.name):
                self.assertTrue(m.about, 'a mutant says what it breaks on its first line')
                out = apply_patch(m.patch, plan.final, m.name)
                for rel, data in out.items():
                    self.assertNotEqual(data, plan.final[rel])

    def test_no_mutants_for_an_older_series(self) -> None:
        with self.assertRaisesRegex(mutants.MutantError, 'no mutants for Linux 6.1'):
            mutants.load(KernelVersion(6, 1, 100))
