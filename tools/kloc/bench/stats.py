# SPDX-License-Identifier: GPL-2.0
"""Statistics for A/B runs: medians, their confidence intervals, tests.

Only what a small number of noisy runs supports: medians with
distribution-free confidence intervals (order statistics), the percent
change of the medians with a seeded bootstrap interval, the two-sided
Mann-Whitney U test (exact without ties, normal with tie correction
otherwise), and Holm's correction when several figures are tested at once.

Counted figures (the QEMU plugin's instructions and line sharing per
packet) are near-deterministic: their spread is a fraction of a percent,
and no rank test can be significant with the 3 runs a side they need. They
get Welch's t-test instead, with the exact Student t distribution, and
runs needed and detectable change solved with t quantiles at Welch's
(Welch-Satterthwaite) degrees of freedom, the ones the test uses.

Runs needed and detectable change take the spread as a ratio (CVs, for a
relative change) or in the figure's unit (standard deviations, for an
absolute change): the formulas are the same, and Welch's degrees of
freedom depend only on the two spreads' ratio.

The tests and the distributions are SciPy's (python3-scipy, imported where
used); what is here is the glue: which test and how it is called, Holm's
correction, the intervals, and the sizing (runs needed, detectable change).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
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


def _mean_var(xs: list[float], what: str = 'a spread',
              where: str = '') -> tuple[float, float]:
    """The mean and the sample variance."""
    if len(xs) < 2:
        raise StatsError(f'{what} needs at least 2 values{where}')
    mean = sum(xs) / len(xs)
    return mean, sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)


def sd(xs: list[float]) -> float:
    """Sample standard deviation."""
    return math.sqrt(_mean_var(xs)[1])


def cv(xs: list[float]) -> float:
    """Coefficient of variation: sample standard deviation over mean."""
    mean, var = _mean_var(xs)
    return math.sqrt(var) / mean if mean else math.inf


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float
    level: float   # the coverage actually reached, e.g. 0.979 for n = 10


def _binom_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    from scipy.stats import binom  # type: ignore[import]
    return float(binom.cdf(k, n, 0.5))


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


@dataclass(frozen=True)
class UTest:
    u: float        # U of sample A: pairs with a > b, ties counting half
    p: float        # two-sided
    method: str     # 'exact' or 'normal'


def mann_whitney(a: list[float], b: list[float]) -> UTest:
    """SciPy's two-sided Mann-Whitney U of A: exact where no value is tied and
    n x m <= 2500, else normal with the tie and continuity corrections."""
    from scipy.stats import mannwhitneyu
    n, m = len(a), len(b)
    if n < 2 or m < 2:
        raise StatsError('the Mann-Whitney U test needs at least 2 values a side')
    exact = len(set(a) | set(b)) == n + m and n * m <= 2500
    if not exact and len(set(a) | set(b)) == 1:
        return UTest(n * m / 2, 1.0, 'normal')     # all tied: no spread to rank
    r = mannwhitneyu(a, b, alternative='two-sided', method='exact' if exact else 'asymptotic',
                     use_continuity=True)
    return UTest(float(r.statistic), min(1.0, float(r.pvalue)), 'exact' if exact else 'normal')


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
    """Runs per side for the two-sided Mann-Whitney test to see a relative change delta.

    The normal approximation n = (z(1 - alpha/2m) + z(power))^2 (cv_a^2 + cv_b^2)
    / delta^2, divided by the test's efficiency ARE (3/pi), and at least
    min_runs(alpha, m): with fewer, the exact test can never reach alpha/m.
    With Holm over m tests the level a figure must reach is alpha/m at worst
    (Holm's first step), so m enters as alpha/m: conservative, as Holm's
    later steps are looser.
    """
    n = _z(alpha, tests, power) ** 2 * (cv_a ** 2 + cv_b ** 2) / delta ** 2
    return max(min_runs(alpha, tests), math.ceil(n / ARE))


def detectable_change(cv_a: float, cv_b: float, n_a: int, n_b: int, alpha: float = 0.05,
                      power: float = POWER, tests: int = 1) -> float:
    """The smallest relative change these runs find with the given power.

    runs_needed() solved for delta at the runs there are: with Holm over
    m tests, at the measured spreads. Infinite where the exact U test can
    never reach alpha/m with n_a and n_b runs. A "no significant
    difference" says little about changes smaller than this.
    """
    if n_a < 2 or n_b < 2 or tests * smallest_p(n_a, n_b) > alpha:
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


# --- Welch's t-test, for counted figures -------------------------------------

@dataclass(frozen=True)
class TTest:
    t: float        # (mean B - mean A) / standard error
    df: float       # Welch-Satterthwaite degrees of freedom
    p: float        # two-sided


def t_sf2(t: float, df: float) -> float:
    """Two-sided tail probability of Student's t with df degrees of freedom."""
    from scipy.stats import t as student
    if math.isinf(t):
        return 0.0
    return float(2 * student.sf(abs(t), df))


def t_quantile(q: float, df: float) -> float:
    """The t with P(T <= t) = q."""
    from scipy.stats import t as student
    return float(student.ppf(q, df))


def _moments(a: list[float], b: list[float],
             what: str) -> tuple[int, int, float, float, float, float]:
    """Sizes, means and sample variances of both sides, for Welch's test and interval."""
    (ma, va), (mb, vb) = _mean_var(a, what, ' a side'), _mean_var(b, what, ' a side')
    return len(a), len(b), ma, mb, va, vb


def welch(a: list[float], b: list[float]) -> TTest:
    """Welch's two-sided t-test of the means; no equal-variance assumption."""
    n, m, ma, mb, va, vb = _moments(a, b, "Welch's t-test")
    se2 = va / n + vb / m
    if se2 == 0:
        return TTest(0.0 if ma == mb else math.copysign(math.inf, mb - ma), n + m - 2.0,
                     1.0 if ma == mb else 0.0)
    from scipy.stats import ttest_ind
    r = ttest_ind(b, a, equal_var=False)     # t = (mean B - mean A) / its standard error
    return TTest(float(r.statistic), welch_df(math.sqrt(va), math.sqrt(vb), n, m),
                 float(r.pvalue))


def welch_df(s_a: float, s_b: float, n_a: int, n_b: int) -> float:
    """Welch-Satterthwaite degrees of freedom for spreads s_a, s_b at n_a, n_b runs.

    (s_a^2/n_a + s_b^2/n_b)^2 / ((s_a^2/n_a)^2/(n_a - 1) + (s_b^2/n_b)^2/(n_b - 1)):
    between min(n_a, n_b) - 1 (one side's spread dominates) and n_a + n_b - 2
    (equal spreads and runs), the ones welch() uses. Scale-free: CVs give the
    same as standard deviations at equal means. n_a + n_b - 2 where both are 0.
    """
    x, y = s_a ** 2 / n_a, s_b ** 2 / n_b
    if x + y == 0:
        return n_a + n_b - 2.0
    return (x + y) ** 2 / (x ** 2 / (n_a - 1) + y ** 2 / (n_b - 1))


def _t_z(alpha: float, tests: int, power: float, df: float) -> float:
    return t_quantile(1 - alpha / (2 * tests), df) + t_quantile(power, df)


def runs_needed_t(cv_a: float, cv_b: float, delta: float, alpha: float = 0.05,
                  power: float = POWER, tests: int = 1) -> int:
    """Runs per side for Welch's test to see a change delta (relative with CVs,
    absolute with standard deviations).

    The smallest n >= 2 with
      (t(1 - alpha/2m, v) + t(power, v))^2 (cv_a^2 + cv_b^2) / delta^2 <= n,
    v = welch_df(cv_a, cv_b, n, n) = (n - 1) (cv_a^2 + cv_b^2)^2 / (cv_a^4 + cv_b^4),
    m the tests Holm corrects over (alpha/m: Holm's first, strictest step).
    v is Welch's degrees of freedom, not 2n - 2: where one side's spread is
    the larger, v is nearer n - 1, the t quantiles wider and the runs more.
    """
    spread = cv_a ** 2 + cv_b ** 2
    # The normal approximation's n is a lower bound (t quantiles exceed z's):
    # start there, and only a few steps remain.
    n = max(2, math.ceil(_z(alpha, tests, power) ** 2 * spread / delta ** 2))
    while n < 100000 and \
            _t_z(alpha, tests, power, welch_df(cv_a, cv_b, n, n)) ** 2 * spread > n * delta ** 2:
        n += 1
    return n


def detectable_change_t(cv_a: float, cv_b: float, n_a: int, n_b: int,
                        alpha: float = 0.05, power: float = POWER, tests: int = 1) -> float:
    """runs_needed_t() solved for delta at the runs there are:
    (t(1 - alpha/2m, v) + t(power, v)) sqrt(cv_a^2/n_a + cv_b^2/n_b),
    v = welch_df(cv_a, cv_b, n_a, n_b)."""
    if n_a < 2 or n_b < 2:
        return math.inf
    spread = math.sqrt(cv_a ** 2 / n_a + cv_b ** 2 / n_b)
    return _t_z(alpha, tests, power, welch_df(cv_a, cv_b, n_a, n_b)) * spread


def welch_ci(a: list[float], b: list[float], level: float = 0.95) -> Interval:
    """Welch's interval of mean(B) - mean(A), in the values' unit.

    It excludes 0 exactly when welch() has p < 1 - level.
    """
    n, m, ma, mb, va, vb = _moments(a, b, "Welch's interval")
    se = math.sqrt(va / n + vb / m)
    if se == 0:
        return Interval(mb - ma, mb - ma, level)
    half = t_quantile(1 - (1 - level) / 2, welch_df(math.sqrt(va), math.sqrt(vb), n, m)) * se
    return Interval(mb - ma - half, mb - ma + half, level)


@dataclass(frozen=True)
class Paired:
    """Seed k of one side against seed k of the other."""
    n: int              # pairs
    r: float            # Pearson's correlation of the sides over the pairs (nan: constant)
    p: float            # the paired t-test's two-sided p (1 where every pair is equal)
    agree: int          # pairs whose difference has the sign of the mean difference


def paired(a: list[float], b: list[float]) -> Paired:
    """How far pairing by seed holds, and the paired t-test (SciPy's ttest_rel)."""
    if len(a) != len(b) or len(a) < 2:
        raise StatsError(f'{len(a)} and {len(b)} values: a paired test needs two or more '
                         'pairs, as many a side')
    d = [y - x for x, y in zip(a, b)]
    mean = sum(d) / len(d)
    agree = sum(1 for x in d if x and (x > 0) == (mean > 0))
    from scipy.stats import pearsonr, ttest_rel
    r = math.nan if len(set(a)) < 2 or len(set(b)) < 2 else float(pearsonr(a, b)[0])
    if not any(d):
        return Paired(len(d), r, 1.0, 0)
    if len(set(d)) < 2:         # every pair moved alike: no spread, the sign is certain
        return Paired(len(d), r, 0.0, agree)
    return Paired(len(d), r, float(ttest_rel(b, a).pvalue), agree)
