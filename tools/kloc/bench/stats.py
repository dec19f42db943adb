# SPDX-License-Identifier: GPL-2.0
"""Statistics for A/B runs: medians, their confidence intervals, tests.

Only what a small number of noisy runs supports: medians with
distribution-free confidence intervals (order statistics), the percent
change of the medians with a seeded bootstrap interval, the two-sided
Mann-Whitney U test (exact without ties, normal with tie correction
otherwise), and Holm's correction when several figures are tested at once.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from kloc.errors import KlocError


class StatsError(KlocError):
    """Too few values for the statistic asked for."""


def median(xs: list[float]) -> float:
    if not xs:
        raise StatsError('median of no values')
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def cv(xs: list[float]) -> float:
    """Coefficient of variation: sample standard deviation over mean."""
    if len(xs) < 2:
        raise StatsError('a spread needs at least 2 values')
    mean = sum(xs) / len(xs)
    var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
    return math.sqrt(var) / mean if mean else math.inf


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float
    level: float   # the coverage actually reached, e.g. 0.979 for n = 10


def _binom_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return float(sum(math.comb(n, i) for i in range(k + 1))) / 2.0 ** n


def median_ci(xs: list[float], level: float = 0.95) -> Interval:
    """The order-statistic interval [x(k), x(n+1-k)] around the median.

    k is the largest rank whose interval still covers the median with at
    least the requested probability, whatever the distribution. Below six
    values no such interval exists at 95%; the full range is returned with
    the coverage it really has.
    """
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise StatsError('an interval needs values')
    k = 1
    while k + 1 <= n // 2 and 1 - 2 * _binom_cdf(k, n) >= level:
        k += 1
    return Interval(s[k - 1], s[n - k], 1 - 2 * _binom_cdf(k - 1, n))


def pct_change(a: list[float], b: list[float]) -> float:
    """Percent change of B's median against A's."""
    ma = median(a)
    if ma == 0:
        raise StatsError('percent change against a median of 0')
    return 100.0 * (median(b) / ma - 1.0)


def pct_change_ci(a: list[float], b: list[float], level: float = 0.95,
                  resamples: int = 2000, seed: int = 1) -> Interval:
    """Percentile bootstrap interval of pct_change; seeded, so repeatable."""
    rng = random.Random(seed)
    vals = []
    for _ in range(resamples):
        ra = [rng.choice(a) for _ in a]
        rb = [rng.choice(b) for _ in b]
        if median(ra) != 0:
            vals.append(pct_change(ra, rb))
    vals.sort()
    tail = (1 - level) / 2
    lo = vals[int(math.floor(tail * (len(vals) - 1)))]
    hi = vals[int(math.ceil((1 - tail) * (len(vals) - 1)))]
    return Interval(lo, hi, level)


@lru_cache(maxsize=64)
def _u_counts(n: int, m: int) -> tuple[int, ...]:
    """How many orderings of n A's and m B's give each U = 0 .. n*m."""
    if n == 0 or m == 0:
        return (1,)
    # U counts the (a, b) pairs with a > b. The largest value is an A
    # (beating all m B's) or a B (beating none).
    with_a = _u_counts(n - 1, m)
    with_b = _u_counts(n, m - 1)
    out = [0] * (n * m + 1)
    for u, c in enumerate(with_a):
        out[u + m] += c
    for u, c in enumerate(with_b):
        out[u] += c
    return tuple(out)


@dataclass(frozen=True)
class UTest:
    u: float        # U of sample A: pairs with a > b, ties counting half
    p: float        # two-sided
    method: str     # 'exact' or 'normal'


def mann_whitney(a: list[float], b: list[float]) -> UTest:
    n, m = len(a), len(b)
    if n < 2 or m < 2:
        raise StatsError('the Mann-Whitney U test needs at least 2 values a side')
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks = [0.0] * len(pooled)
    ties: list[int] = []
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    r_a = sum(r for r, (_, side) in zip(ranks, pooled) if side == 0)
    u = r_a - n * (n + 1) / 2
    if not ties and n * m <= 2500:
        counts = _u_counts(n, m)
        total = sum(counts)
        k = int(u)
        below = sum(counts[:k + 1]) / total
        above = sum(counts[k:]) / total
        return UTest(u, min(1.0, 2 * min(below, above)), 'exact')
    big_n = n + m
    tie_term = sum(t ** 3 - t for t in ties) / (big_n * (big_n - 1))
    sigma = math.sqrt(n * m / 12 * ((big_n + 1) - tie_term))
    if sigma == 0:
        return UTest(u, 1.0, 'normal')
    z = (abs(u - n * m / 2) - 0.5) / sigma
    p = math.erfc(max(z, 0.0) / math.sqrt(2))
    return UTest(u, min(1.0, p), 'normal')


def holm(ps: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out = [0.0] * len(ps)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


# The Mann-Whitney test's asymptotic relative efficiency against the t-test
# on normal data: it needs pi/3 times the runs for the same power.
ARE = 3 / math.pi
POWER = 0.8


def _z(alpha: float, tests: int, power: float) -> float:
    """z of a two-sided level alpha/tests (Holm's first, strictest step) plus z of power."""
    return NormalDist().inv_cdf(1 - alpha / (2 * tests)) + NormalDist().inv_cdf(power)


def runs_needed(cv_a: float, cv_b: float, delta: float, alpha: float = 0.05,
                power: float = POWER, tests: int = 1) -> int:
    """Runs per side for a two-sided test to see a relative change delta.

    The normal approximation n = (z_a/2m + z_b)^2 (cv_a^2 + cv_b^2) / delta^2,
    divided by the Mann-Whitney test's efficiency ARE. With Holm over m
    tests, the level a figure must reach is alpha/m at worst, so m enters
    as alpha/m: conservative, as Holm's later steps are looser.
    """
    n = _z(alpha, tests, power) ** 2 * (cv_a ** 2 + cv_b ** 2) / delta ** 2
    return max(2, math.ceil(n / ARE))


def detectable_change(cv_a: float, cv_b: float, n_a: int, n_b: int, alpha: float = 0.05,
                      power: float = POWER, tests: int = 1) -> float:
    """The smallest relative change these runs find with the given power.

    runs_needed() solved for delta at the runs there are: with Holm over
    m tests, at the measured spreads. A "no significant difference" says
    little about changes smaller than this.
    """
    if n_a < 1 or n_b < 1:
        return math.inf
    return _z(alpha, tests, power) * math.sqrt((cv_a ** 2 / n_a + cv_b ** 2 / n_b) / ARE)


def smallest_p(n: int, m: int) -> float:
    """The smallest two-sided p the exact U test can give with n and m runs."""
    return 2 / math.comb(n + m, n)


def min_runs(alpha: float, tests: int = 1) -> int:
    """The fewest runs a side with which any test can be significant at alpha/tests."""
    n = 2
    while tests * smallest_p(n, n) > alpha:
        n += 1
    return n
