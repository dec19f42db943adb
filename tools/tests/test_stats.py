# SPDX-License-Identifier: GPL-2.0
"""The A/B statistics, checked against SciPy and against known properties."""

from __future__ import annotations

import random
import unittest

from kloc.bench import stats

try:
    from scipy import stats as sp  # type: ignore[import]
except ImportError:  # tools/deps.sh installs python3-scipy
    sp = None


def samples(seed: int, n: int, mean: float, cv: float) -> list[float]:
    rng = random.Random(seed)
    return [round(rng.gauss(mean, cv * mean)) for _ in range(n)]


class MannWhitney(unittest.TestCase):
    def test_exact_matches_scipy(self) -> None:
        if sp is None:
            self.fail('python3-scipy is missing: run make deps')
        for seed in range(30):
            n, m = 3 + seed % 9, 4 + seed % 7
            a = samples(seed, n, 1000.0, 0.05)
            b = samples(seed + 100, m, 1000.0 * (1 + (seed % 5) / 40), 0.05)
            if len(set(a + b)) < n + m:
                continue  # exact only without ties
            mine = stats.mann_whitney(a, b)
            ref = sp.mannwhitneyu(a, b, alternative='two-sided', method='exact')
            self.assertEqual(mine.method, 'exact')
            self.assertAlmostEqual(mine.u, ref.statistic)
            self.assertAlmostEqual(mine.p, ref.pvalue, places=10)

    def test_ties_match_scipy_normal(self) -> None:
        if sp is None:
            self.fail('python3-scipy is missing: run make deps')
        a = [1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 5.0, 7.0]
        b = [2.0, 4.0, 6.0, 6.0, 7.0, 8.0, 9.0, 9.0, 10.0]
        mine = stats.mann_whitney(a, b)
        ref = sp.mannwhitneyu(a, b, alternative='two-sided', method='asymptotic',
                              use_continuity=True)
        self.assertEqual(mine.method, 'normal')
        self.assertAlmostEqual(mine.u, ref.statistic)
        self.assertAlmostEqual(mine.p, ref.pvalue, places=10)

    def test_complete_separation(self) -> None:
        # 10 against 10, all of B above: p = 2 / C(20, 10).
        r = stats.mann_whitney([float(i) for i in range(10)],
                               [float(i) for i in range(10, 20)])
        self.assertEqual(r.u, 0)
        self.assertAlmostEqual(r.p, 2 / 184756)

    def test_too_few(self) -> None:
        with self.assertRaisesRegex(stats.StatsError, 'at least 2'):
            stats.mann_whitney([1.0], [2.0, 3.0])

    def test_aa_false_positives_at_most_alpha(self) -> None:
        """Same distribution both sides: about alpha of 400 trials reject."""
        hits = sum(stats.mann_whitney(samples(s, 10, 1e5, 0.03),
                                      samples(s + 10**6, 10, 1e5, 0.03)).p < 0.05
                   for s in range(400))
        self.assertLessEqual(hits / 400, 0.07)
        self.assertGreater(hits, 0)   # the test is not blind

    def test_power_on_a_real_shift(self) -> None:
        hits = sum(stats.mann_whitney(samples(s, 10, 1e5, 0.02),
                                      samples(s + 10**6, 10, 0.95e5, 0.02)).p < 0.05
                   for s in range(100))
        self.assertGreater(hits, 90)


class Intervals(unittest.TestCase):
    def test_median(self) -> None:
        self.assertEqual(stats.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(stats.median([4.0, 1.0, 2.0, 3.0]), 2.5)

    def test_order_statistic_ranks(self) -> None:
        xs = [float(i) for i in range(1, 11)]
        ci = stats.median_ci(xs)
        self.assertEqual((ci.lo, ci.hi), (2.0, 9.0))   # n = 10: ranks 2 and 9
        self.assertAlmostEqual(ci.level, 1 - 2 * 11 / 1024)
        ci = stats.median_ci([float(i) for i in range(1, 21)])
        self.assertEqual((ci.lo, ci.hi), (6.0, 15.0))  # n = 20: ranks 6 and 15
        self.assertGreaterEqual(ci.level, 0.95)

    def test_small_samples_say_their_coverage(self) -> None:
        ci = stats.median_ci([1.0, 2.0, 3.0, 4.0, 5.0])
        self.assertEqual((ci.lo, ci.hi), (1.0, 5.0))
        self.assertLess(ci.level, 0.95)

    def test_change_and_its_interval(self) -> None:
        a = samples(1, 10, 1000.0, 0.01)
        b = [x * 1.05 for x in a]
        self.assertAlmostEqual(stats.pct_change(a, b), 5.0)
        ci = stats.pct_change_ci(a, b)
        self.assertLess(ci.lo, 5.0 + 1e-9)
        self.assertGreater(ci.hi, 5.0 - 1e-9)
        self.assertEqual(ci, stats.pct_change_ci(a, b))   # seeded

    def test_holm(self) -> None:
        self.assertEqual(stats.holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])

    def test_runs_needed(self) -> None:
        # 2 (1.96 + 0.84)^2 (0.05 / 0.036)^2 / (3 / pi) = 31.7
        self.assertEqual(stats.runs_needed(0.05, 0.05, 0.036), 32)
        self.assertEqual(stats.runs_needed(0.01, 0.01, 0.036), 2)


if __name__ == '__main__':
    unittest.main()
