# SPDX-License-Identifier: GPL-2.0
"""The resumable results file, the figures and the A/B report."""

from __future__ import annotations

import json
import random
import tempfile
import unittest
import xml.dom.minidom
from pathlib import Path

from kloc.bench import metrics, plot, stats, store, tables
from kloc.bench.store import BenchRun

KEY = {'tree': 'linux-6.1 6.1.192', 'a': 'slub', 'b': 'slab'}


def record(pps1: float, ppsn: float, node_split: float = 0.5) -> dict[str, object]:
    return {'pps_single': pps1, 'pps_total': ppsn, 'scaling_efficiency': ppsn / (4 * pps1),
            'per_cpu': [{'cpu': c, 'node': c // 2,
                         'pps': ppsn * (node_split if c < 2 else 1 - node_split) / 2}
                        for c in range(4)]}


class Store(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.path = Path(self.tmp.name) / 'runs.jsonl'

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def test_runs_survive_a_reopen(self) -> None:
        s = store.open_store(self.path, KEY)
        s.append(BenchRun('a', True, 5.1, record(8e4, 1.4e5)))
        s.append(BenchRun('b', False, 60.0, None, 'the guest printed no result', 'Kernel panic'))
        again = store.open_store(self.path, KEY)
        self.assertEqual(len(again.ok_runs('a')), 1)
        self.assertEqual(again.failed_runs('b')[0].why, 'the guest printed no result')

    def test_counted_boots_pair_by_seed_whatever_ended_first(self) -> None:
        """Counted boots side by side end in any order: boot k of each side is still
        read as pair k, and a failed boot retried with its seed takes its place."""
        s = store.open_store(self.path, KEY)
        for side, seed, ok in (('b', 1, True), ('a', 0, False), ('a', 1, True),
                               ('b', 0, True), ('a', 0, True), ('a', 2, True)):
            s.append(BenchRun(side, ok, 40.0, {'seed': seed, 'counted': {'n': seed}} if ok
                              else None, '' if ok else 'hung'))
        again = store.open_store(self.path, KEY)
        self.assertEqual(again.seeds('a'), {0, 1, 2})
        self.assertEqual([r['seed'] for r in again.seeded('a', 2)], [0, 1])
        self.assertEqual([r['seed'] for r in again.seeded('b', 2)], [0, 1])
        # the first records in file order were seed 1 and 0 on b, 1 and 0 on a
        self.assertEqual([r['seed'] for r in again.records('b', 2)], [1, 0])

    def test_a_half_written_run_is_dropped_not_fatal(self) -> None:
        s = store.open_store(self.path, KEY)
        s.append(BenchRun('a', True, 5.1, record(8e4, 1.4e5)))
        with self.path.open('a') as f:
            f.write('{"side": "b", "ok": tr')     # the job was killed here
        again = store.open_store(self.path, KEY)
        self.assertEqual(len(again.runs), 1)
        self.assertTrue(self.path.read_text().endswith('\n'))
        again.append(BenchRun('b', True, 5.0, record(8e4, 1.4e5)))
        self.assertEqual(len(store.open_store(self.path, KEY).runs), 2)

    def test_another_comparison_is_refused_and_kept(self) -> None:
        s = store.open_store(self.path, KEY)
        s.append(BenchRun('a', True, 5.1, record(8e4, 1.4e5)))
        before = self.path.read_bytes()
        with self.assertRaisesRegex(store.ResultsError, "b: 'slab' in the file, 'slub' now"):
            store.open_store(self.path, dict(KEY, b='slub'))
        self.assertEqual(self.path.read_bytes(), before)

    def test_not_a_results_file(self) -> None:
        self.path.write_text('hello\n')
        with self.assertRaisesRegex(store.ResultsError, 'not a kloc results file'):
            store.open_store(self.path, KEY)


class Report(unittest.TestCase):
    def runs(self, seed: int, scale: float) -> list[dict[str, object]]:
        rng = random.Random(seed)
        return [record(8e4 * scale * rng.gauss(1, 0.01), 1.4e5 * rng.gauss(1, 0.01))
                for _ in range(10)]

    def test_figures_from_a_record(self) -> None:
        f = metrics.extract(record(8e4, 1.6e5, 0.75))
        self.assertEqual(f['pps_node0'], 1.2e5)
        self.assertEqual(f['pps_node1'], 4e4)
        self.assertAlmostEqual(f['scaling_efficiency'], 0.5)

    def test_a_shift_is_seen_and_the_rest_is_not(self) -> None:
        diffs = metrics.compare(self.runs(1, 1.0), self.runs(2, 0.95), 0.05)
        by = {d.figure.name: d for d in diffs}
        self.assertEqual([d.figure.name for d in diffs][:3],
                         ['pps_single', 'pps_total', 'scaling_efficiency'])
        self.assertEqual(by['pps_single'].verdict, 'lower')
        self.assertAlmostEqual(by['pps_single'].change_pct, -5, delta=1.5)
        self.assertEqual(by['pps_total'].verdict, 'same')
        self.assertEqual(by['scaling_efficiency'].verdict, 'higher')
        text = tables.render(diffs, 'base', 'patched', 0.05, ('improvement', 'regression'))
        self.assertTrue(all(len(line) <= 72 for line in text.splitlines()))
        self.assertIn('regression (significant at alpha = 0.05)', text)
        self.assertIn('no significant difference at alpha = 0.05', text)
        doc = tables.to_json(diffs, 'base', 'patched', 0.05)
        json.dumps(doc)
        self.assertEqual(doc[0]['verdict'], 'patched lower')

    def test_plot_is_well_formed_svg(self) -> None:
        diffs = metrics.compare(self.runs(1, 1.0), self.runs(2, 0.95), 0.05)
        svg = plot.render(diffs, 'slub', 'slab', 'slub vs slab <test>')
        doc = xml.dom.minidom.parseString(svg)
        self.assertEqual(doc.documentElement.tagName, 'svg')
        self.assertEqual(len(doc.getElementsByTagName('circle')), 2 + 20 * len(diffs))

    def test_tick_labels_differ_and_titles_fit(self) -> None:
        """Counts close together (6,543 to 6,641 instructions) get ticks that differ,
        small ones no '-0.0k', and every title fits its panel."""
        def counted(base: float, fs: float) -> list[dict[str, object]]:
            return [{'counted': {'insns_pkt_single': base + 17 * i, 'insns_pkt_all': base,
                                 'fsharing_pkt_all': 1000.0 + i, 'fcontended_pkt_all': fs + i,
                                 'remote_pct_all': 30.0 + 20 * i}} for i in range(3)]
        diffs = metrics.compare(counted(6543, 0.0), counted(6600, 38.0), 0.05, kind='counted')
        diffs += metrics.compare(self.runs(1, 1.0), self.runs(2, 0.95), 0.05)
        doc = xml.dom.minidom.parseString(plot.render(diffs, 'slub', 'slab', 't'))
        texts = [t.firstChild.data for t in doc.getElementsByTagName('text') if t.firstChild]
        for i in range(len(diffs)):
            ticks = [t for t in texts if t.replace(',', '').replace('.', '').replace('k', '')
                     .lstrip('-').isdigit()][5 * i:5 * i + 5]
            self.assertEqual(len(set(ticks)), 5, ticks)
            self.assertFalse([t for t in ticks if t.startswith('-0') and t.strip('-0.k') == ''],
                             ticks)
        bold = [t.firstChild.data for t in doc.getElementsByTagName('text')
                if t.getAttribute('font-weight') == 'bold']
        self.assertEqual(len(bold), len(diffs))
        self.assertTrue(all(len(t) <= plot.TITLE_CHARS for t in bold), bold)
        under = [t for t in texts if ' p=' in t]      # the line under each title
        self.assertEqual(len(under), len(diffs))
        self.assertTrue(all(len(t) <= plot.SUBTITLE_CHARS for t in under), under)


if __name__ == '__main__':
    unittest.main()


class Power(unittest.TestCase):
    """No significant difference is a pass only when the runs could see the change."""

    def runs(self, seed: int, n: int, spread: float) -> list[dict[str, object]]:
        rng = random.Random(seed)
        return [record(8e4 * rng.gauss(1, spread), 1.4e5 * rng.gauss(1, spread))
                for _ in range(n)]

    def test_a_noisy_aa_is_inconclusive_a_quiet_one_passes(self) -> None:
        noisy = metrics.compare(self.runs(1, 10, 0.06), self.runs(2, 10, 0.06), 0.05)
        primary = [d for d in noisy if d.figure.primary]
        self.assertTrue(all(d.verdict == 'inconclusive' for d in primary),
                        [(d.figure.name, d.verdict, d.detectable_pct) for d in primary])
        self.assertTrue(all(d.detectable_pct > 3.6 for d in primary))
        text = tables.render(noisy, 'base', 'patched', 0.05, ('improvement', 'regression'))
        self.assertIn('inconclusive: not significant, and these runs could only', text)
        self.assertTrue(all(len(line) <= 72 for line in text.splitlines()))
        quiet = metrics.compare(self.runs(3, 30, 0.01), self.runs(4, 30, 0.01), 0.05)
        self.assertTrue(all(d.verdict == 'same' for d in quiet if d.figure.primary),
                        [(d.figure.name, d.verdict, d.detectable_pct) for d in quiet])
        # A looser change of interest (MDE=20) makes the noisy one a pass.
        loose = metrics.compare(self.runs(1, 10, 0.06), self.runs(2, 10, 0.06), 0.05, 0.20)
        self.assertTrue(all(d.verdict == 'same' for d in loose if d.figure.primary))

    def test_detectable_change_and_runs_needed_agree(self) -> None:
        for cv in (0.02, 0.05, 0.1):
            n = stats.runs_needed(cv, cv, 0.036, 0.05, tests=3)
            self.assertLessEqual(stats.detectable_change(cv, cv, n, n, 0.05, tests=3), 0.036)
            if n > 2:
                self.assertGreater(stats.detectable_change(cv, cv, n - 1, n - 1, 0.05,
                                                           tests=3), 0.036)
        self.assertGreater(stats.runs_needed(0.05, 0.05, 0.036, tests=3),
                           stats.runs_needed(0.05, 0.05, 0.036, tests=1), 'Holm is ignored')

    def test_too_few_runs_can_never_be_significant(self) -> None:
        self.assertEqual(stats.min_runs(0.05, 3), 5)
        self.assertEqual(stats.min_runs(0.05, 1), 4)
        # The exact test's smallest p really is 2 / C(2n, n): all of A above all of B.
        for n in (2, 3, 4, 5):
            u = stats.mann_whitney([float(i) for i in range(n)],
                                   [float(i + 100) for i in range(n)])
            self.assertAlmostEqual(u.p, stats.smallest_p(n, n))
