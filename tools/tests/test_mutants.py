# SPDX-License-Identifier: GPL-2.0
"""The mutants are diffs against the stock kernel: each applies to it, and the series
installs on top of each."""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

from kloc.mutants import mutants
from kloc.series import changes, planning
from kloc.version import KernelVersion

from .helpers import debian_tree

ITS_MUTANTS = {'numa-unaware-table', 'numa-unaware-cmdq', 'numa-unaware-lvl2',
               'numa-unaware-itt', 'unchecked-page-address-table',
               'unchecked-page-address-cmdq', 'leak-cmdq-on-error', 'leak-tables-on-error'}


class MutantsTest(unittest.TestCase):
    def test_each_mutant_applies_to_stock_and_the_series_installs_on_it(self) -> None:
        for kernel in ('6.1', '6.12', '7.2'):
            with self.subTest(kernel=kernel):
                self.check_kernel(kernel)

    def check_kernel(self, kernel: str) -> None:
        tree = debian_tree(kernel)
        series = changes.load_series()
        plan = planning.plan(tree.path, tree.version, series)
        found = mutants.load(tree.version)
        added = {a.dst: a.src for c in series for a in c.additions}
        self.assertLessEqual(ITS_MUTANTS, {m.name for m in found if m.kind == 'kunit'})
        if kernel == '7.2':     # 2024's recurrence, in itt_alloc_pool()
            self.assertIn('unchecked-page-address-itt', [m.name for m in found])
        for m in found:
            with self.subTest(kernel=kernel, mutant=m.name):
                self.assertTrue(m.about, 'a mutant says what it breaks on its first line')
                out = mutants.installed_with(m, tree, series)
                for rel, data in out.items():
                    installed = (plan.final[rel] if rel in plan.final else
                                 added[rel].read_bytes() if rel in added else
                                 (tree.path / rel).read_bytes())
                    self.assertNotEqual(data, installed)
                    if rel == 'drivers/irqchip/irq-gic-v3-its.c':
                        assert data is not None
                        self.assertIn(b'#include "tests/irq-gic-v3-its_kunit_seam.h"', data)

    def test_a_mutant_written_against_the_installed_driver_is_refused(self) -> None:
        tree = debian_tree('6.12')
        with tempfile.TemporaryDirectory() as d:
            patch = Path(d) / 'drops-the-seam.patch'
            patch.write_text(
                'Mutant: drops the seam\n\n'
                '--- a/drivers/irqchip/irq-gic-v3-its.c\n'
                '+++ b/drivers/irqchip/irq-gic-v3-its.c\n'
                '@@ -40,4 +40,3 @@\n'
                ' #include "irq-gic-common.h"\n'
                ' #include "irq-msi-lib.h"\n'
                '-#include "tests/irq-gic-v3-its_kunit_seam.h"\n'
                ' \n')
            m = mutants.Mutant('drops-the-seam', 'drops the seam', patch)
            with self.assertRaisesRegex(mutants.MutantError,
                                        'drops-the-seam.patch: does not apply to stock'):
                mutants.installed_with(m, tree, changes.load_series())

    def test_each_suite_takes_its_own_newest_version(self) -> None:
        found = mutants.load(KernelVersion(6, 1, 100))
        self.assertIn(('lossy-lstats', 'guest'), [(m.name, m.kind) for m in found])
        self.assertLessEqual(ITS_MUTANTS, {m.name for m in found})
        with self.assertRaisesRegex(mutants.MutantError, 'no mutants for Linux 5.15'):
            mutants.load(KernelVersion(5, 15))
