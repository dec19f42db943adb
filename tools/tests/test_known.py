# SPDX-License-Identifier: GPL-2.0
"""Known upstream failures (kunitpy/known.py), on a real run of stock Linux 7.2.13.

The console is arm64_2n_its1's from `make known-failures KERNEL=7.2`'s stock
run (2026-12-06): the ITS placement suite fails where itt_alloc_pool() hands
node 1's ITS small ITTs from a node-0 pool page, in the one case that creates
small ITTs on an ITS of each node (the per-node cases take two-page ITTs since
then), and where every CPU's LPI pending table is on the boot CPU's node.
Variants of it change one thing each: a failure the entry does not explain
must stay a failure. The fixed one
is the same kernel with the entry's fix (make known-failures KERNEL=7.2).
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import unittest
import unittest.mock
from pathlib import Path

from kloc.kunitpy import known, ktap, summary
from kloc.kunitpy.junit import KunitRun
from kloc.paths import PACKAGE_ROOT
from kloc.review import fixcheck
from kloc.version import KernelVersion

from .helpers import DATA, stock_parser

STOCK = (DATA / 'its-7.2-stock-arm64_2n_its1.console').read_text()
ITTS = 'irq_gic_v3_its_placement.its_kunit_itts_on_their_its_node'
PEND = 'irq_gic_v3_its_placement.its_kunit_lpi_pending_tables_on_their_cpu_node'
SMALL = 'ITT of device 1 (32 vectors, 256 bytes) page 1 of 1'


def run_of(console: str, kernel: str = 'linux-7.2.13', origin: str = 'debian',
           topo: str = 'arm64_2n_its1', fixes: tuple[str, ...] = ()) -> KunitRun:
    return KunitRun(kernel, topo, ktap.parse(console, stock_parser()), 1.0, origin, fixes)


class KnownFailuresTest(unittest.TestCase):
    def test_the_stock_run_fails_only_as_declared(self) -> None:
        v = known.classify([run_of(STOCK)])
        self.assertEqual(v.unexpected, [])
        self.assertEqual(v.fixed, [])
        self.assertEqual(sorted(v.known), [
            f'linux-7.2.13 arm64_2n_its1 {ITTS} (itt-pool-ignores-node)',
            f'linux-7.2.13 arm64_2n_its1 {PEND} (lpi-pending-tables-ignore-node-6.13)'])
        self.assertTrue(summary.ok([run_of(STOCK)]))
        text = summary.render([run_of(STOCK)])
        self.assertIn('2 of them known upstream', text)
        self.assertIn(f'FAIL    linux-7.2.13 arm64_2n_its1 {ITTS} (known upstream: '
                      'itt-pool-ignores-node)', text)

    def test_a_large_itt_on_the_wrong_node_is_a_new_failure(self) -> None:
        # the entry is about ITTs smaller than a page: a two-page one is not it
        console = STOCK.replace(SMALL, 'ITT of device 2 (1024 vectors, 8192 bytes) page 1 of 2')
        self.assertNotEqual(console, STOCK)
        v = known.classify([run_of(console)])
        self.assertEqual(v.unexpected, [f'linux-7.2.13 arm64_2n_its1 {ITTS}'])
        self.assertFalse(summary.ok([run_of(console)]))

    def test_another_failed_check_in_a_known_case_is_a_new_failure(self) -> None:
        marker = '    # its_kunit_itts_on_their_its_node: EXPECTATION FAILED at'
        at = STOCK.index(marker)
        extra = (f'{marker} drivers/irqchip/tests/irq-gic-v3-its_kunit.c:1\n'
                 '    Expected dev != NULL, but\n')
        v = known.classify([run_of(STOCK[:at] + extra + STOCK[at:])])
        self.assertEqual(v.unexpected, [f'linux-7.2.13 arm64_2n_its1 {ITTS}'])

    def test_only_the_declared_kernel_and_topologies(self) -> None:
        # 6.12 has the pending tables' failure (the backport's entry), not the ITTs';
        # arm64_1n has neither (one node)
        r = run_of(STOCK, kernel='linux-6.12.57')
        v = known.classify([r])
        self.assertEqual(v.unexpected, [f'{r.kernel} {r.topology} {ITTS}'])
        self.assertEqual(v.known, [f'{r.kernel} {r.topology} {PEND} '
                                   '(lpi-pending-tables-ignore-node)'])
        r = run_of(STOCK, topo='arm64_1n')
        v = known.classify([r])
        self.assertEqual(sorted(v.unexpected), [f'{r.kernel} {r.topology} {ITTS}',
                                                f'{r.kernel} {r.topology} {PEND}'])
        self.assertEqual(v.known, [])

    def test_a_pass_of_a_known_failure(self) -> None:
        # the same kernel with the fix (make known-failures KERNEL=7.2): every case passes
        fixed = (DATA / 'its-7.2-fixed-arm64_2n_its1.console').read_text()
        stock = run_of(fixed)
        v = known.classify([stock])
        self.assertEqual(v.unexpected, [])
        self.assertEqual(len(v.fixed), 1, v.fixed)
        self.assertIn(ITTS, v.fixed[0])
        self.assertFalse(summary.ok([stock]))
        self.assertIn('UNEXPECTED PASS', summary.render([stock]))
        # in a KDIR tree, or a review's patched one, the fix may be there: a note
        for origin in ('kdir', 'review'):
            with self.subTest(origin=origin):
                v = known.classify([run_of(fixed, origin=origin)])
                self.assertEqual(v.fixed, [])
                self.assertEqual(len(v.passing_elsewhere), 1)
                self.assertTrue(summary.ok([run_of(fixed, origin=origin)]))

    def test_any_version_in_the_range_is_explained(self) -> None:
        """Issue 37, item 4: a KDIR tree of 7.3 (or 6.13) without the fix gets the
        explanation, not only KERNEL=7.2; one before the range does not."""
        for kernel in ('linux-6.13', 'linux-7.3', 'linux-7.3.1'):
            with self.subTest(kernel=kernel):
                v = known.classify([run_of(STOCK, kernel=kernel, origin='kdir')])
                self.assertEqual(v.unexpected, [])
                self.assertEqual(len(v.known), 2)
        v = known.classify([run_of(STOCK, kernel='linux-6.12.57', origin='kdir')])
        self.assertEqual(v.unexpected, [f'linux-6.12.57 arm64_2n_its1 {ITTS}'])

    def test_a_tree_with_the_fix_gets_no_excuse(self) -> None:
        name = known.KNOWN[0].name
        v = known.classify([run_of(STOCK, kernel='linux-7.3', origin='kdir', fixes=(name,))])
        self.assertEqual([k for k in v.known if ITTS in k], [])
        self.assertEqual(v.unexpected, [f'linux-7.3 arm64_2n_its1 {ITTS}'])
        # and its passes are what a fixed tree should do: no note
        fixed = (DATA / 'its-7.2-fixed-arm64_2n_its1.console').read_text()
        v = known.classify([run_of(fixed, kernel='linux-7.3', origin='kdir', fixes=(name,))])
        self.assertEqual((v.fixed, v.passing_elsewhere, v.unexpected), ([], [], []))

    def test_whether_a_tree_carries_the_fix(self) -> None:
        """The fix reverse-applies to a tree that has it, and not to one without: a
        driver file made of the fix's own hunks, before and after (GNU patch)."""
        k = known.KNOWN[0]
        patch = (PACKAGE_ROOT / k.fix).read_text()
        rel = re.search(r'^\+\+\+ b/(\S+)$', patch, re.MULTILINE)
        assert rel is not None
        old, new = [], []
        for line in patch[rel.end():].split('\n-- \n')[0].splitlines()[1:]:
            if line.startswith('@@'):
                continue
            if not line.startswith('+'):
                old.append(line[1:])
            if not line.startswith('-'):
                new.append(line[1:])
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / rel.group(1)
            path.parent.mkdir(parents=True)
            path.write_text('\n'.join(old) + '\n')
            self.assertFalse(known.carries_fix(k, Path(d)))
            self.assertEqual(known.fixes_in(Path(d), KernelVersion.parse('7.2')), ())
            self.assertEqual(path.read_text(), '\n'.join(old) + '\n', 'the check wrote it')
            path.write_text('\n'.join(new) + '\n')
            self.assertTrue(known.carries_fix(k, Path(d)))
            self.assertEqual(known.fixes_in(Path(d), KernelVersion.parse('7.2')), (k.name,))
            # a version outside the range has no known failure to carry a fix of
            self.assertEqual(known.fixes_in(Path(d), KernelVersion.parse('6.12')), ())

    def test_a_crash_is_never_known(self) -> None:
        cut = STOCK.index('    # its_kunit_itts_on_their_its_node: EXPECTATION FAILED')
        v = known.classify([run_of(STOCK[:cut])])
        self.assertTrue(v.unexpected)
        self.assertFalse(summary.ok([run_of(STOCK[:cut])]))


class FixCheckTest(unittest.TestCase):
    """What make known-failures counts as still failing in the tree with the fix."""

    entry = known.for_kernel('7.2')[0]

    def test_the_fixed_run_has_nothing_left(self) -> None:
        fixed = (DATA / 'its-7.2-fixed-arm64_2n_its1.console').read_text()
        self.assertEqual(fixcheck.still_failing([run_of(fixed, origin='review')],
                                                self.entry), [])

    def test_its_own_failure_is_not_excused_with_its_fix(self) -> None:
        left = fixcheck.still_failing([run_of(STOCK, origin='review')], self.entry)
        self.assertEqual(len(left), 1, left)
        self.assertIn(f'linux-7.2.13 arm64_2n_its1 {ITTS}', left)

    def test_another_entrys_failure_is_excused(self) -> None:
        other = dataclasses.replace(self.entry, name='another')
        with unittest.mock.patch.object(known, 'KNOWN', (*known.KNOWN, other)):
            self.assertEqual(fixcheck.still_failing([run_of(STOCK, origin='review')],
                                                    self.entry), [])

    def test_a_kernel_that_printed_no_ktap(self) -> None:
        self.assertEqual(fixcheck.still_failing([run_of('')], self.entry),
                         ['linux-7.2.13 arm64_2n_its1 (no KTAP: the kernel did not boot)'])


class DeclarationsTest(unittest.TestCase):
    def test_each_entry_has_its_fix_and_write_up(self) -> None:
        for k in known.KNOWN:
            with self.subTest(entry=k.name):
                fix = (PACKAGE_ROOT / k.fix).read_text()
                self.assertTrue(fix.startswith('From '), 'not git format-patch output')
                self.assertIn('Signed-off-by: ', fix)
                self.assertIn(k.name, (PACKAGE_ROOT / k.doc).read_text())
                self.assertTrue(k.cases and k.topologies)


if __name__ == '__main__':
    unittest.main()
