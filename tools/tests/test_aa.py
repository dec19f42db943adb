# SPDX-License-Identifier: GPL-2.0
"""make bench-aa's findings (bench/aa.py): the count of calls, and the bias checks, on
A/A reviews made of the real counted boots of a review (data/review-2008-counted.json,
its base side: one image). A bias put into the B side, or a drift over the boots, must
be found; the boots as they are must not show one."""

from __future__ import annotations

import dataclasses
import json
import random
import tempfile
import unittest
from pathlib import Path

from kloc.bench import aa, metrics

from .helpers import DATA

BASE = [b['counted'] for b in json.loads((DATA / 'review-2008-counted.json').read_text())
        ['boots'] if b['side'] == 'a']


def boots(rng: random.Random, b_scale: float = 1.0, drift: float = 0.0) -> list[aa.Boot]:
    """10 boots, A B A B ..., each a real base boot's figures in a shuffled order;
    B's scaled by b_scale, the k-th boot's by 1 + k * drift."""
    picks = [BASE[rng.randrange(len(BASE))] for _ in range(10)]
    out = []
    for k, c in enumerate(picks):
        side = 'ab'[k % 2]
        scale = (b_scale if side == 'b' else 1.0) * (1 + k * drift)
        out.append(aa.Boot(side, {n: float(c[n]) * scale for n in aa.PRIMARY}))
    return out


def review(index: int, bs: list[aa.Boot], patch: str = '') -> aa.AaReview:
    a: list[dict[str, object]] = [{'counted': b.values} for b in bs if b.side == 'a']
    b: list[dict[str, object]] = [{'counted': x.values} for x in bs if x.side == 'b']
    diffs = metrics.compare(a, b, 0.05, kind='counted')
    figures = tuple(aa.FigureTest(d.figure.name, d.change_pct, d.test.p, d.p_adjusted,
                                  d.verdict) for d in diffs if d.figure.primary)
    return aa.AaReview(index, patch, figures, tuple(bs), '')


def check(checks: list[aa.BiasCheck], what: str, figure: str) -> aa.BiasCheck:
    return next(c for c in checks if c.what.startswith(what) and c.figure == figure)


class BiasChecks(unittest.TestCase):
    def test_real_boots_show_no_bias(self) -> None:
        rng = random.Random(1)
        reviews = [review(i, boots(rng), 'noop.patch' if i % 2 == 0 else '')
                   for i in range(1, 21)]
        for c in aa.bias_checks(reviews):
            with self.subTest(what=c.what, figure=c.figure):
                self.assertGreater(c.p, 0.001, c)

    def test_a_bias_of_the_b_side_is_found(self) -> None:
        rng = random.Random(2)
        reviews = [review(i, boots(rng, b_scale=1.003)) for i in range(1, 11)]
        c = check(aa.bias_checks(reviews), 'boot order', 'insns_pkt_all')
        self.assertLess(c.p, 0.001, c)
        self.assertAlmostEqual(c.mean_pct, 0.3, delta=0.1)

    def test_a_bias_of_the_patched_build_is_found(self) -> None:
        rng = random.Random(3)
        reviews = [review(i, boots(rng, b_scale=1.003 if i % 2 == 0 else 1.0),
                          'noop.patch' if i % 2 == 0 else '') for i in range(1, 21)]
        checks = aa.bias_checks(reviews)
        self.assertLess(check(checks, 'the builds', 'insns_pkt_all').p, 0.001)
        self.assertGreater(check(checks, 'boot order', 'insns_pkt_all').p, 0.001)

    def test_a_drift_is_found(self) -> None:
        rng = random.Random(4)
        reviews = [review(i, boots(rng, drift=0.0005)) for i in range(1, 11)]
        c = check(aa.bias_checks(reviews), 'drift', 'insns_pkt_all')
        self.assertLess(c.p, 0.001, c)
        self.assertAlmostEqual(c.mean_pct, 0.05, delta=0.02)


class Report(unittest.TestCase):
    def test_reviews_read_back_and_counted(self) -> None:
        """Folders as make review writes them: review.json and counted.jsonl."""
        rng = random.Random(5)
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / 'bench-aa'
            for i in range(1, 5):
                bs = boots(rng, b_scale=1.05 if i == 3 else 1.0)
                r = review(i, bs, 'noop.patch' if i % 2 == 0 else '')
                d = root / str(i) / 'review' / f'aa-{i}'
                d.mkdir(parents=True)
                (d / 'review.json').write_text(json.dumps({
                    'patch': {'file': '/x/noop.patch'} if r.patch else None,
                    'verdict': 'v', 'counted': {'figures': [
                        {'figure': f.name, 'primary': True, 'change_pct': f.change_pct,
                         'p': f.p, 'p_holm': f.p_holm, 'verdict': f.verdict}
                        for f in r.figures]}}))
                (d / 'counted.jsonl').write_text('{"format": "kloc-runs-v1"}\n' + ''.join(
                    json.dumps({'side': b.side, 'ok': True, 'record': {'counted': b.values}})
                    + '\n' for b in bs))
            (root / '9').mkdir()            # a review that never finished
            reviews = aa.collect(root)
            self.assertEqual([r.index for r in reviews], [1, 2, 3, 4])
            self.assertEqual([r.patch for r in reviews], ['', 'noop.patch', '', 'noop.patch'])
            self.assertEqual(len(reviews[0].boots), 10)
            text = aa.report(reviews, 0.05)
        self.assertIn('called a significant difference: 1 of 4', text)
        self.assertTrue(reviews[2].called(0.05))
        self.assertIn('raw p < 0.05 (before Holm), per figure, of 4:', text)
        for what in ('boot order', 'the builds', 'drift'):
            self.assertIn(what, text)

    def test_kinds_verdicts_and_pairing(self) -> None:
        """A layout-only review (layout-N.patch) whose verdict is significant but below
        the change of interest is no change called; a regression is one. Seeded boots
        are paired by seed, and the report names the pairing and the seeded note."""
        rng = random.Random(7)
        bs = [aa.Boot(b.side, b.values, k // 2) for k, b in enumerate(boots(rng))]
        below = dataclasses.replace(review(1, bs, 'layout-0.patch'), verdict=(
            'no change of interest in counts, significant but below the change of '
            'interest in 1 of 4 counted figures (false-sharing transfers)'), moved=812)
        worse = dataclasses.replace(review(2, bs, 'layout-1.patch'),
                                    verdict='regression in 1 of 4 counted figures (x)')
        self.assertEqual((below.kind, below.a_change, worse.a_change),
                         ('layout', False, True))
        self.assertEqual(aa._verdict(below.verdict), 'no change of interest')
        p = below.paired(aa.PRIMARY[0])
        assert p is not None
        self.assertEqual(p.n, 5)
        text = aa.report([below, worse], 0.05)
        self.assertIn('the verdict called a change (a regression or an improvement): 1 of 2',
                      text)
        self.assertIn('symbols moved: 812 to 812 a patch', text)
        self.assertIn('seeded boots: boot k of each side is seed k', text)

    def test_boots_side_by_side_read_pair_by_pair(self) -> None:
        """Counted boots run JOBS at once and end in any order (issue 48, item 1): read
        back by seed, boot k of A then boot k of B, as the pairs they are."""
        ran = [('b', 1), ('a', 0), ('b', 0), ('a', 2), ('a', 1), ('b', 2)]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / 'counted.jsonl'
            path.write_text('{"format": "kloc-runs-v1"}\n' + ''.join(
                json.dumps({'side': side, 'ok': True, 'record': {
                    'seed': seed, 'counted': {n: 100.0 * seed + (side == 'b')
                                              for n in aa.PRIMARY}}}) + '\n'
                for side, seed in ran))
            got = aa._boots(path)
        first = aa.PRIMARY[0]
        self.assertEqual([(b.side, b.values[first]) for b in got],
                         [('a', 0.0), ('b', 1.0), ('a', 100.0), ('b', 101.0), ('a', 200.0),
                          ('b', 201.0)])

    def test_no_reviews_is_an_error(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaisesRegex(aa.AaError, 'no finished A/A review'):
                aa.collect(Path(tmp))


if __name__ == '__main__':
    unittest.main()
