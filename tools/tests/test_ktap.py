# SPDX-License-Identifier: GPL-2.0
"""The KTAP parser and the JUnit writer, on real console logs."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest
from pathlib import Path

from kloc.kunitpy import junit, ktap
from kloc.trees import kernels

from .helpers import DATA, debian_tree, golden, stock_parser

TOOLS = Path(__file__).resolve().parents[1]


def outline(doc: ktap.Document) -> str:
    lines = [f'found={doc.found} planned={doc.planned} ok={doc.ok}']
    for suite in doc.suites:
        for path, leaf in suite.leaves():
            reason = f' # {leaf.reason}' if leaf.reason else ''
            lines.append(f'{leaf.status.value:<7} {path}{reason}')
    return '\n'.join(lines) + '\n'


class GoldenLogs(unittest.TestCase):
    """Each tests/data/*.console has a *.outline that says what it holds."""

    def test_every_log(self) -> None:
        logs = sorted(DATA.glob('*.console'))
        self.assertGreaterEqual(len(logs), 4)
        for log in logs:
            with self.subTest(log=log.name):
                doc = ktap.parse(log.read_text(), stock_parser())
                golden(self, log.with_suffix('.outline').name, outline(doc))

    def test_passing_runs(self) -> None:
        for name in ('its-6.12-its1-pass', 'its-6.1-its1-pass'):
            doc = ktap.parse((DATA / f'{name}.console').read_text(), stock_parser())
            self.assertTrue(doc.ok, name)
            self.assertEqual(doc.counts()[ktap.Status.PASS], 37)
            self.assertEqual(sorted(s.name for s in doc.suites),
                             ['irq_gic_v3_its_alloc_failure', 'irq_gic_v3_its_placement',
                              'percpu_locality', 'percpu_locality_checker'])

    def test_crash_mid_suite(self) -> None:
        doc = ktap.parse((DATA / 'its-6.12-crash.console').read_text(), stock_parser())
        self.assertFalse(doc.ok)
        crashed = [p for s in doc.suites for p, leaf in s.leaves()
                   if leaf.status == ktap.Status.CRASHED]
        self.assertIn('irq_gic_v3_its_alloc_failure.its_kunit_probe_fails_cleanly', crashed)
        leaf = dict(doc.suites[1].leaves())[crashed[0]]
        self.assertTrue(any('Internal error: Oops' in x for x in leaf.log), leaf.log)

    def test_mutants_fail_the_right_cases(self) -> None:
        for name, case in (
                ('mutant-unchecked-page-address-table',
                 'irq_gic_v3_its_alloc_failure.its_kunit_probe_fails_cleanly.64K flat'),
                ('mutant-numa-unaware-lvl2',
                 'irq_gic_v3_its_placement.its_kunit_probe_places_all_on_node.'
                 '64K indirect on node 0')):
            doc = ktap.parse((DATA / f'{name}.console').read_text(), stock_parser())
            self.assertFalse(doc.ok, name)
            leaves = dict(leaf for s in doc.suites for leaf in s.leaves())
            self.assertEqual(leaves[case].status, ktap.Status.FAIL, name)
            self.assertTrue(any('EXPECTATION FAILED' in x for x in leaves[case].log), name)

    def test_no_boot(self) -> None:
        doc = ktap.parse((DATA / 'no-boot.console').read_text(), stock_parser())
        self.assertFalse(doc.found)
        self.assertFalse(doc.ok)
        self.assertIn('Kernel panic', '\n'.join(doc.trailing))

    def test_skip_directive(self) -> None:
        text = ('KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: s\n    1..2\n'
                '    ok 1 a # SKIP no ITS\n    not ok 2 b\nnot ok 1 s\n')
        doc = ktap.parse(text, stock_parser())
        leaves = dict(doc.suites[0].leaves())
        self.assertEqual(leaves['s.a'].status, ktap.Status.SKIP)
        self.assertEqual(leaves['s.a'].reason, 'no ITS')
        self.assertEqual(leaves['s.b'].status, ktap.Status.FAIL)

    def test_missing_cases_are_crashed(self) -> None:
        text = ('KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: s\n    1..3\n'
                '    ok 1 a\nok 1 s\n')
        doc = ktap.parse(text, stock_parser())
        self.assertFalse(doc.ok)
        leaves = dict(doc.suites[0].leaves())
        self.assertEqual(leaves['s.a'].status, ktap.Status.PASS)
        # kunit.py records a nameless crashed case for each planned one that never came.
        for k in (2, 3):
            self.assertEqual(leaves[f's.(case {k} of 3: never ran)'].status,
                             ktap.Status.CRASHED)

    def test_corrupt_plan_and_long_lines_are_bounded(self) -> None:
        """kunit_parser would make a placeholder per planned test (all memory for a
        corrupt plan) and takes quadratic time on a long line: kloc bounds both."""
        for plan in ('1..99999999999', '1..99999999 big', '1..' + '9' * 5000):
            doc = ktap.parse(f'KTAP version 1\n{plan}\n', stock_parser())
            self.assertEqual(len(doc.suites), ktap.PLAN_MAX, plan)
            self.assertFalse(doc.ok)
        doc = ktap.parse('KTAP version 1\n1..1\nok 1 ' + ' ' * 100000 + 'x\n', stock_parser())
        self.assertEqual(len(doc.suites), 1)

    def test_a_stray_plan_is_a_diagnostic(self) -> None:
        """kunit_parser (6.1 and 6.12) never consumes a plan line that follows no
        header and loops on it, adding a test each time (10 GB in minutes). It runs
        in a child with 1 GiB of address space and 60 s, on every kernel's parser."""
        console = ('KTAP version 1\nok 1 first\n1..0\n    # Subtest: s\n    1..2\n'
                   '    ok 1 a\n    1..3\n    ok 2 b\nok 2 s\n')
        code = ('import resource, sys\n'
                'resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n'
                'from pathlib import Path\nfrom kloc.kunitpy import ktap\n'
                'doc = ktap.parse(sys.stdin.read(), Path(sys.argv[1]))\n'
                'print(sorted((p, leaf.status.value) for s in doc.suites '
                'for p, leaf in s.leaves()))\n')
        for version in kernels.names():
            with self.subTest(kernel=version):
                r = subprocess.run([sys.executable, '-c', code,
                                    str(ktap.kunit_dir(debian_tree(version).path))],
                                   input=console, capture_output=True, text=True, timeout=60,
                                   env=dict(os.environ, PYTHONPATH=str(TOOLS)))
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                self.assertEqual(r.stdout.strip(), "[('first', 'PASS'), ('s.a', 'PASS'), "
                                 "('s.b', 'PASS')]")


class ParsersTest(unittest.TestCase):
    def test_every_kernels_parser_reads_a_run_alike(self) -> None:
        """7.x's kunit_parser takes its printer as an argument, and has no module-level
        `stdout` (6.x's) to quiet: reading a log with it raised AttributeError."""
        console = (DATA / 'its-7.2-stock-arm64_2n_its1.console').read_text()
        outlines = {}
        for version in kernels.names():
            with self.subTest(kernel=version):
                outlines[version] = outline(ktap.parse(
                    console, ktap.kunit_dir(debian_tree(version).path)))
        self.assertEqual(len(set(outlines.values())), 1, outlines)
        self.assertIn('FAIL    irq_gic_v3_its_placement.its_kunit_itts_on_their_its_node',
                      next(iter(outlines.values())))


class JunitTest(unittest.TestCase):
    def test_golden_junit(self) -> None:
        crash = (DATA / 'its-6.12-crash.console').read_text()
        no_boot = (DATA / 'no-boot.console').read_text()
        runs = [junit.KunitRun('linux-6.12.0', 'arm64_2n_its1',
                               ktap.parse(crash, stock_parser()), 1.5),
                junit.KunitRun('linux-6.12.0', 'arm64_1n', ktap.parse(no_boot, stock_parser()),
                               0.5)]
        xml = junit.to_xml(runs)
        golden(self, 'crash-and-no-boot.junit.xml', xml)
        self.assertIn('name="boot [arm64_1n]"', xml)
        self.assertIn('[arm64_2n_its1]"', xml)
