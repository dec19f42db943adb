# SPDX-License-Identifier: GPL-2.0
"""make review's ITS interrupt path: when it runs, and what the report and JSON say.

The figures are real: tests/data/its-msi-6.12-arm64_2n_its1.trace read as it is
(every table on the ITS's node), and read as if the ITS were on node 0 (every
table remote), standing in for a patch that moves every table."""

from __future__ import annotations

import json
import os
import unittest
from pathlib import Path

from kloc.its import trace
from kloc.kcidb import schema
from kloc.its.figures import Boots, figures
from kloc.qemu import topology
from kloc.review import patch_input, reporting, review
from kloc.review.errors import ReviewError
from kloc.review.workflow import check_what
from kloc.paths import PACKAGE_ROOT
from kloc.trees.sources import Tree

from .helpers import debian_tree
from .test_its_figures import NODE_OF, real

MUTANT = PACKAGE_ROOT / 'kunit/its/mutants/6.12/numa-unaware-table.patch'
NOOP = PACKAGE_ROOT / 'selftests/lo_counters/review/noop.patch'
ALL = tuple(topology.TOPOLOGIES)


class WhenItRuns(unittest.TestCase):
    def test_a_patch_to_the_its_driver(self) -> None:
        p = patch_input.load(MUTANT)
        self.assertEqual(review.its_topologies(p, '', '', ALL),
                         ('arm64_2n_its1', 'arm64_2n_its0'))
        self.assertEqual(review.its_topologies(p, '', False, ALL), ())     # ITS=0
        # only the ITS topologies among TOPOLOGIES
        self.assertEqual(review.its_topologies(p, '', '', ('arm64_2n_its0', 'x86_64_2n')),
                         ('arm64_2n_its0',))

    def test_another_patch_only_when_asked(self) -> None:
        p = patch_input.load(NOOP)
        self.assertEqual(review.its_topologies(p, '', '', ALL), ())
        self.assertEqual(review.its_topologies(p, 'arm64', '', ALL),
                         ('arm64_2n_its1', 'arm64_2n_its0'))
        self.assertEqual(review.its_topologies(p, '', True, ALL),
                         ('arm64_2n_its1', 'arm64_2n_its0'))

    def test_the_its_path_alone_is_a_review(self) -> None:
        check_what(MUTANT, False, bench=False, kunit=False, its=True)
        with self.assertRaisesRegex(ReviewError, 'ITS=1'):
            check_what(MUTANT, False, bench=False, kunit=False, its=False)
        with self.assertRaisesRegex(ReviewError, 'nothing would be reviewed'):
            check_what(None, True, bench=False, kunit=False, its=True)


class Report(unittest.TestCase):
    def setUp(self) -> None:
        base = trace.ItsTrace(NODE_OF, 1).feed_all(real())
        moved = trace.ItsTrace(NODE_OF, 0).feed_all(real())
        tree = Tree(Path('/t/linux-6.12/src'), debian_tree('6.12').version, 'debian')
        self.o = review.ReviewOutcome(tree, tree, patch_input.load(MUTANT))
        aware, off = figures(base, 'arm64_2n_its1'), figures(moved, 'arm64_2n_its1')
        self.o.its = {'arm64_2n_its1': {'base': Boots((aware, aware)),
                                        'patched': Boots((off, off))},
                      'arm64_2n_its0': {'base': 'the guest did not boot',
                                        'patched': 'the guest did not boot'}}
        self.opts = review.ReviewOptions(('arm64_2n_its1',), 'x86_64_2n', 10, 1.0, 0.05, 60,
                                         2, Path('/nonexistent'), kunit=False, bench=False,
                                         its_topologies=('arm64_2n_its1', 'arm64_2n_its0'),
                                         its_penalty_ns=100, its_boots=2)

    def test_the_text(self) -> None:
        text = reporting.render(self.o, self.opts)
        self.assertTrue(all(len(x) <= reporting.WIDTH for x in text.splitlines()), text)
        self.assertRegex(text, r'2 boots a side')
        self.assertRegex(text, r'upper\s+bounds')
        self.assertRegex(text, r'all tables +5/0 +0/5')
        self.assertIn('stated, not measured', text)
        # 5 remote reads x 100 ns at 170K-200K/s: 8.50%-10.00%
        self.assertRegex(text, r'8\.50%-10\.00%\s+of the time')
        self.assertIn('arm64_2n_its0, base: FAILED: the guest did not boot', text)
        self.assertRegex(text, r'ITS remote\s+reads per interrupt on arm64_2n_its1 0 -> 5')
        self.assertRegex(text, r'ITS on arm64_2n_its0:\s+no figures')
        self.assertIn('KUnit not run', text)
        self.assertRegex(text, r'ITS remote\s+command\s+reads\s+on\s+arm64_2n_its1\s+0\s+->\s+4')

    def test_the_json(self) -> None:
        d = reporting.to_json(self.o, self.opts)
        its = json.loads(json.dumps(d['its']))
        self.assertEqual(its['model']['penalty_ns'], 100)
        one = its['topologies']['arm64_2n_its1']
        self.assertEqual((one['base']['remote_per_interrupt_mean'],
                          one['patched']['remote_per_interrupt_mean']), (0, 5))
        self.assertEqual(one['patched']['boots'][1]['reads']['ite'],
                         {'local': 0, 'remote': 20})
        self.assertTrue(one['patched']['agree'])
        self.assertEqual(its['topologies']['arm64_2n_its0']['base'],
                         {'failed': 'the guest did not boot'})

    def test_boots_that_differ(self) -> None:
        """A patched kernel whose boots differ: the verdict says so, and KCIDB's
        change test fails on the boot that read remotely."""
        aware = self.o.its['arm64_2n_its1']['base']
        off = self.o.its['arm64_2n_its1']['patched']
        assert isinstance(aware, Boots) and isinstance(off, Boots)
        self.o.its['arm64_2n_its1']['patched'] = Boots((off.first, aware.first))
        text = reporting.render(self.o, self.opts)
        self.assertRegex(text, r'0 -> 5, 0\s+\(by boot\)')
        self.assertRegex(text, r'\(means\s+over the boots\)')
        k = reporting.to_json(self.o, self.opts)['kcidb']
        assert isinstance(k, dict)
        change = [t for t in k['tests'] if t['path'] == 'its_msi.remote.change']
        self.assertEqual([(t['status'], t['number']['value']) for t in change],
                         [('FAIL', 2.5)])

    def test_the_kcidb_record(self) -> None:
        k = reporting.to_json(self.o, self.opts)['kcidb']
        assert isinstance(k, dict)
        schema.validate(k)
        boots = sorted((t['environment']['misc']['topology'], t['status'])
                       for t in k['tests'] if t['path'] == 'its_msi')
        self.assertEqual(boots, [('arm64_2n_its0', 'FAIL')] * 2 +
                         [('arm64_2n_its1', 'PASS')] * 2)
        change = [t for t in k['tests'] if t['path'] == 'its_msi.remote.change']
        self.assertEqual([(t['status'], t['number']['value']) for t in change], [('FAIL', 5)])
        cmd = [t for t in k['tests'] if t['path'] == 'its_msi.cmd.remote.change']
        self.assertEqual([(t['status'], t['number']['value']) for t in cmd], [('FAIL', 4)])
        remote = [t['number']['value'] for t in k['tests']
                  if t['path'] == 'its_msi.ite.remote']
        self.assertEqual(sorted(remote), [0, 2])      # base, patched: the first boots
        self.assertEqual(len([b for b in k['builds'] if b['architecture'] == 'arm64']), 2)


if __name__ == '__main__':
    unittest.main()


class MakeTestReviewProof(unittest.TestCase):
    """make test's review of numa-unaware-cmdq.patch, a patch as it would be posted
    (tools/make-test.sh): every KUnit status change is PASS -> FAIL, and there are
    some; the base fails nothing; the ITS reads the workload's four commands locally
    in every base boot and remotely in every patched one; no table read per interrupt
    moves. KLOC_REVIEW_JSON names its review.json; unset, skipped; set, it must be one."""

    def test_make_tests_review(self) -> None:
        path = os.environ.get('KLOC_REVIEW_JSON')
        if path is None:
            self.skipTest('KLOC_REVIEW_JSON= names make test\'s review.json')
        self.assertTrue(path and Path(path).is_file(), f'KLOC_REVIEW_JSON={path!r}: no file')
        doc = json.loads(Path(path).read_text())
        kunit = doc['kunit']
        changes = [(c['base'], c['patched']) for c in kunit['changes']]
        its = doc['its']['topologies']['arm64_2n_its1']
        cmd = {side: [b['reads']['cmd'] for b in its[side]['boots']] for side in its}
        remote = {side: its[side]['remote_per_interrupt_mean'] for side in its}
        print(f'{len(changes)} status changes: {sorted(set(changes))}, totals: '
              f'{kunit["totals"]}; ITS commands read (local/remote): {cmd}; remote reads '
              f'per interrupt: {remote}')
        self.assertTrue(changes, 'the patch changed no KUnit status')
        self.assertEqual(set(changes), {('PASS', 'FAIL')})
        # the base fails one case only, the known upstream failure every stock kernel
        # has (lpi-pending-tables-ignore-node: the pending tables of node 1's CPUs)
        self.assertEqual(kunit['totals']['base'].get('FAIL', 0), 1, kunit['totals'])
        self.assertNotIn('its_kunit_lpi_pending_tables_on_their_cpu_node',
                         json.dumps(kunit['changes']))
        self.assertTrue(cmd['base'] and all(c == {'local': 4, 'remote': 0}
                                            for c in cmd['base']), cmd)
        self.assertTrue(cmd['patched'] and all(c == {'local': 0, 'remote': 4}
                                               for c in cmd['patched']), cmd)
        self.assertEqual(remote, {'base': 0, 'patched': 0})
