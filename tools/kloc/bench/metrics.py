# SPDX-License-Identifier: GPL-2.0
"""The loopback kselftest's figures, and how two sets of runs differ.

Two kinds of figure:
- timed: packets/s from ordinary boots, better when higher. The primary
  ones (1 thread, all CPUs, scaling efficiency) are tested together with
  the Mann-Whitney U test, Holm-adjusted.
- counted: per packet, from boots under the QEMU plugin (see
  kloc/counting/counts.py): instructions, transfers between the modelled
  caches and the false-sharing ones, misses, the remote-node shares of RAM
  accesses and of misses. Better when lower. They are near-
  deterministic, so Welch's t-test, Holm-adjusted over the counted
  primaries, judges them at 3 runs a side.
Non-primary figures are shown, with their own p, but give no verdict.

A primary figure's verdict needs both: significance (Holm) and a change at
least the change of interest. A significant change below it is 'small',
not a regression or an improvement. Counts of events per packet whose base
is near zero (ABSOLUTE_INTEREST) are judged in events a packet, not percent.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from kloc.bench import stats
from kloc.defaults import OptionError
from kloc.counting.counts import FIGURES

# The change of interest when none is given: the seed patch's claimed gain
# (../shared/seeds). A run that could not have found it is inconclusive.
EFFECT_OF_INTEREST = 0.036

# Counts of events per packet (the sharing and transfer figures): unit -> the
# absolute change of interest, in events a packet. On hardware one such event
# costs at most a cache-line transfer, some 100-300 cycles: one a packet is
# 2-5% of a 6,500-instruction packet, of the order of the 3.6% of interest, and
# a change that shares a line on the packet path makes at least one a packet
# (the 2008 layout: +4.3 false-shared accesses). What a stock kernel counts is
# background (the scheduler, RCU, the tick): 6.12, ten boots (kloc-count 2.1,
# docs/measurements.md): 1.6 false-shared accesses, 0.017 false-sharing
# transfers, 0.35 misses a packet, varying 13-31% from boot to boot.
#
# Such a count is near zero when its base median is below this threshold over
# the change of interest (1 / 0.036 = 28 events a packet at 3.6%): the change
# of interest in percent of it would be less than one event a packet, so a
# percent (or a ratio: "916x" over 0.002 stores a packet) says nothing about
# cost. It is then reported as the change of the means in events a packet,
# with Welch's interval, and judged against the threshold; above the floor,
# in percent against the change of interest, which is then the larger.
ABSOLUTE_INTEREST = {'transfers/packet': 1.0, 'accesses/packet': 1.0, 'misses/packet': 1.0}

# What each verdict says, in every report, plot and record.
VERDICT_WORDS = {
    'same': 'no significant difference',
    'small': 'significant, but below the change of interest',
    'inconclusive': 'inconclusive',
    'detail': 'not tested (a detail)',
}


@dataclass(frozen=True)
class Figure:
    name: str
    title: str
    unit: str
    short: str = ''
    primary: bool = True
    kind: str = 'timed'         # or 'counted'
    better: str = 'higher'      # or 'lower'

    @property
    def abs_interest(self) -> float:
        """The absolute change of interest of a count of events per packet; 0 for
        a figure judged in percent whatever its base."""
        return ABSOLUTE_INTEREST.get(self.unit, 0.0) if self.kind == 'counted' else 0.0

    def near_zero(self, base: float, interest: float) -> bool:
        """Whether a base median is too small to judge a change of it in percent."""
        return abs(base) * interest < self.abs_interest


# The timed figures, each primary (tested together, with Holm): name -> (title,
# unit, short). The per-node figures (pps_node<N>) are details.
TIMED = {
    'pps_single': ('1 thread', 'packets/s', '1 thread'),
    'pps_total': ('one thread per CPU, total', 'packets/s', 'all CPUs'),
    'scaling_efficiency': ('scaling efficiency (N threads / N x 1)', 'ratio', 'efficiency'),
}

# The counted figures: name -> (title, unit, short, primary). Each phase of
# the kselftest: 'single' (one thread), 'all' (one thread per CPU).
COUNTED = {
    'insns_pkt_single': ('instructions per packet, 1 thread', 'insns/packet',
                         'insns 1 thread', True),
    'insns_pkt_all': ('instructions per packet, one thread per CPU', 'insns/packet',
                      'insns all CPUs', True),
    # Contended accesses: a load of a line another CPU stores to in the
    # window, a store to a line another CPU accesses (an atomic counts once):
    # what would move the line between caches if the CPUs ran interleaved
    # access by access, whatever order QEMU ran them in. False sharing: the
    # CPU's bytes of the line meet no other's where one of them stores
    # (packed per-CPU slots); read-mostly data (jiffies) is true sharing.
    'fcontended_pkt_all': ('false-sharing contended accesses per packet, all CPUs',
                           'accesses/packet', 'false-shared accesses', True),
    # Transfers between the modelled caches in the order QEMU ran the CPUs
    # (HITM + invalidations), and the false-sharing ones among them. Under
    # thread=single a line changes hands only where QEMU switches CPUs.
    'fsharing_pkt_all': ('false-sharing transfers per packet, all CPUs',
                         'transfers/packet', 'false-sharing transfers', True),
    'contended_pkt_all': ('contended accesses per packet, all CPUs', 'accesses/packet',
                          'contended', False),
    'transfers_pkt_all': ('line transfers (HITM + invalidations) per packet, all CPUs',
                          'transfers/packet', 'transfers', False),
    'hitm_lcl_pkt_all': ('local-node HITM per packet, all CPUs', 'transfers/packet',
                         'HITM local', False),
    'hitm_rmt_pkt_all': ('remote-node HITM per packet, all CPUs', 'transfers/packet',
                         'HITM remote', False),
    'misses_pkt_all': ('cache misses per packet, all CPUs', 'misses/packet', 'misses',
                       False),
    # Where the kernel placed the memory a boot touches varies from boot to
    # boot: shown, and tested, but no verdict.
    'remote_miss_pct_all': ('remote-node share of cache misses, all CPUs', '%',
                            'remote misses', False),
    'remote_pct_all': ('remote-node share of RAM accesses, all CPUs', '%',
                       'remote share', False),
    'transfers_pkt_single': ('line transfers per packet, 1 thread', 'transfers/packet',
                             'transfers 1 thread', False),
    'misses_pkt_single': ('cache misses per packet, 1 thread', 'misses/packet',
                          'misses 1 thread', False),
    'remote_miss_pct_single': ('remote-node share of cache misses, 1 thread', '%',
                               'remote misses 1 thread', False),
    'remote_pct_single': ('remote-node share of RAM accesses, 1 thread', '%',
                          'remote 1 thread', False),
}


def _num(v: object) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise ValueError(f'not a number: {v!r}')


def extract(record: dict[str, object]) -> dict[str, float]:
    """Figure name -> value for one run's JSON record."""
    out = {name: _num(record[name]) for name in TIMED}
    per_cpu = record.get('per_cpu')
    if isinstance(per_cpu, list):
        for c in per_cpu:
            if isinstance(c, dict):
                key = f'pps_node{int(_num(c["node"]))}'
                out[key] = out.get(key, 0.0) + _num(c['pps'])
    return out


def describe(name: str) -> Figure:
    if name in TIMED:
        title, unit, short = TIMED[name]
        return Figure(name, title, unit, short)
    if name in COUNTED:
        title, unit, short, primary = COUNTED[name]
        return Figure(name, title, unit, short, primary, 'counted', 'lower')
    if name.startswith('pps_node'):
        return Figure(name, f'node {name[8:]}, one thread per CPU', 'packets/s',
                      f'node {name[8:]}', primary=False)
    return Figure(name, name, '', name)


@dataclass(frozen=True)
class SideSummary:
    values: list[float]
    median: float
    ci: stats.Interval
    cv: float


@dataclass(frozen=True)
class TestResult:
    name: str           # 'Mann-Whitney U' or "Welch's t"
    method: str         # exact/normal (U), Student t (Welch)
    statistic: float    # U of side A, or t
    p: float            # two-sided
    b_higher: bool      # whether B tends higher


# A counted figure whose every pair is equal: boot k of one side counted exactly what
# boot k of the other did (seed k), as an A/A review's or a patch's that changes no
# byte of what boots. No change, exactly, and no test: a paired test has no spread to
# work on (SciPy's return nan), and Welch's would be asked whether two equal samples
# differ.
IDENTICAL = 'identical pairs'


def identical(kind: str, xa: list[float], xb: list[float]) -> bool:
    """Whether a counted figure's pairs (by seed) are all equal."""
    return kind == 'counted' and len(xa) == len(xb) > 0 and xa == xb


def _test(kind: str, xa: list[float], xb: list[float]) -> TestResult:
    if identical(kind, xa, xb):
        return TestResult(IDENTICAL, 'no test', 0.0, 1.0, False)
    if kind == 'counted':
        w = stats.welch(xa, xb)
        return TestResult("Welch's t", f'Student t, {w.df:.1f} df', w.t, w.p, w.t > 0)
    u = stats.mann_whitney(xa, xb)
    # U counts the pairs where A beats B: below half, B tends higher.
    return TestResult('Mann-Whitney U', u.method, u.u, u.p, u.u < len(xa) * len(xb) / 2)


def detectable(kind: str, sa: SideSummary, sb: SideSummary, alpha: float,
               tests: int) -> float:
    """The smallest relative change the runs find with 80% power, by the test used:
    Welch's at its degrees of freedom for counted figures, Mann-Whitney's
    (normal approximation, 3/pi efficiency, exact-test floor) for timed ones."""
    f = stats.detectable_change_t if kind == 'counted' else stats.detectable_change
    return f(sa.cv, sb.cv, len(sa.values), len(sb.values), alpha, tests=tests)


def runs_needed(d: Difference, delta: float, alpha: float, tests: int) -> int:
    """Runs a side to see the relative change delta at d's spreads, by the test its
    kind of figure gets; for a count near zero, its absolute change of interest."""
    if d.absolute is not None:
        return stats.runs_needed_t(_sd(d.a), _sd(d.b), d.absolute.interest, alpha,
                                   tests=tests)
    f = stats.runs_needed_t if d.figure.kind == 'counted' else stats.runs_needed
    return f(d.a.cv, d.b.cv, delta, alpha, tests=tests)


def _sd(s: SideSummary) -> float:
    return stats.sd(s.values)


@dataclass(frozen=True)
class Absolute:
    """A count near zero, in its own unit (events a packet)."""
    change: float           # mean B - mean A
    ci: stats.Interval      # Welch's interval of it, at 1 - alpha
    interest: float         # the absolute change of interest (ABSOLUTE_INTEREST)
    detectable: float       # 80% power, Holm, the measured spreads, Welch's df


@dataclass(frozen=True)
class Difference:
    figure: Figure
    a: SideSummary
    b: SideSummary
    change_pct: float
    change_ci: stats.Interval
    test: TestResult
    p_adjusted: float
    # 'higher' or 'lower' (significant, and at least the change of interest),
    # 'small' (significant, and less than that), 'same' (not significant, and
    # the runs had the power to see the change of interest; for a count near
    # zero: the change's interval lies within its absolute change of
    # interest), 'inconclusive' (not significant, and neither), or 'detail'
    # (not tested)
    verdict: str
    detectable_pct: float = math.inf   # 80% power, Holm, the measured spreads
    interest_pct: float = 100 * EFFECT_OF_INTEREST
    absolute: Absolute | None = None   # a count near zero: judged in its unit

    @property
    def significant(self) -> bool:
        """A change that counts: significant, and at least the change of interest."""
        return self.verdict in ('higher', 'lower')


def better_or_worse(d: Difference) -> str:
    """'better', 'worse' or '' (no significant change) for B, by the figure's direction."""
    if not d.significant:
        return ''
    return 'better' if (d.verdict == 'higher') == (d.figure.better == 'higher') else 'worse'


def verdict_words(d: Difference, b: str = 'B', words: tuple[str, str] | None = None) -> str:
    """The verdict in words: words = what a higher and a lower B mean."""
    if d.verdict in VERDICT_WORDS:
        return VERDICT_WORDS[d.verdict]
    if words:
        return words[0] if better_or_worse(d) == 'better' else words[1]
    return f'{b} {d.verdict}'


def _side(xs: list[float]) -> SideSummary:
    return SideSummary(xs, stats.median(xs), stats.median_ci(xs), stats.cv(xs))


def extract_counted(record: dict[str, object]) -> dict[str, float]:
    """Figure name -> value for one counted run's record (its 'counted' part)."""
    counted = record['counted']
    if not isinstance(counted, dict):
        raise ValueError('the record has no counted figures')
    return {k: _num(v) for k, v in counted.items() if k in COUNTED}


def lost(a_records: list[dict[str, object]], b_records: list[dict[str, object]],
         kind: str = 'timed') -> list[str]:
    """The figures some boots have and others lack, which compare() leaves out: the
    verdict must say it rests on fewer figures."""
    pick = extract_counted if kind == 'counted' else extract
    values = [pick(r) for r in a_records + b_records]
    every = set().union(*values) if values else set()
    return sorted((n for n in every if not all(n in v for v in values)),
                  key=lambda n: FIGURES.index(n) if n in FIGURES else len(FIGURES))


def compare(a_records: list[dict[str, object]], b_records: list[dict[str, object]],
            alpha: float, interest: float = EFFECT_OF_INTEREST,
            kind: str = 'timed') -> list[Difference]:
    """One Difference per figure both sides have, in a stable order.

    interest: the relative change that matters. A significant change is a
    change ('higher', 'lower') only if at least that, else 'small'; a figure
    with no significant difference is 'same' only if the runs could have
    found it (for a count near zero: if the change's interval lies within
    its absolute change of interest).
    kind: 'timed' (packets/s records) or 'counted' (counted-run records, paired
    by seed: a figure whose every pair is equal is 'same', exactly, untested).
    """
    pick = extract_counted if kind == 'counted' else extract
    a_vals = [pick(r) for r in a_records]
    b_vals = [pick(r) for r in b_records]
    names = [n for n in a_vals[0] if all(n in v for v in a_vals + b_vals)]
    if kind == 'counted':
        names.sort(key=FIGURES.index)
    else:
        names.sort(key=lambda n: (list(TIMED).index(n) if n in TIMED else len(TIMED), n))
    tests = []
    for n in names:
        xa = [v[n] for v in a_vals]
        xb = [v[n] for v in b_vals]
        tests.append((n, xa, xb, _test(kind, xa, xb)))
    primary = [i for i, t in enumerate(tests) if describe(t[0]).primary]
    adjusted = [t[3].p for t in tests]
    for i, p in zip(primary, stats.holm([tests[i][3].p for i in primary])):
        adjusted[i] = p
    out = []
    m = max(1, len(primary))
    for i, ((n, xa, xb, test), p_adj) in enumerate(zip(tests, adjusted)):
        fig = describe(n)
        sa, sb = _side(xa), _side(xb)
        if sa.median:
            change, change_ci = stats.pct_change(xa, xb), stats.pct_change_ci(xa, xb)
        else:       # no percent of 0 (a count near zero shows its change in its unit)
            change, change_ci = math.nan, stats.Interval(math.nan, math.nan, 0.95)
        mde = detectable(kind, sa, sb, alpha, m)
        absolute = None
        if fig.near_zero(sa.median, interest):
            absolute = Absolute(sum(xb) / len(xb) - sum(xa) / len(xa),
                                stats.welch_ci(xa, xb, 1 - alpha), fig.abs_interest,
                                stats.detectable_change_t(_sd(sa), _sd(sb), len(xa),
                                                          len(xb), alpha, tests=m))
        if test.name == IDENTICAL:     # every pair's difference is 0: so is its interval
            mde, zero = 0.0, stats.Interval(0.0, 0.0, 1.0)
            change_ci = zero if sa.median else change_ci
            absolute = absolute and dataclasses.replace(absolute, change=0.0, ci=zero,
                                                        detectable=0.0)
        verdict = 'detail' if i not in primary else 'same' if test.name == IDENTICAL else \
            _judge(test, p_adj < alpha, change, interest, mde, absolute)
        out.append(Difference(fig, sa, sb, change, change_ci, test, p_adj, verdict,
                              100 * mde, 100 * interest, absolute))
    return out


def _judge(test: TestResult, significant: bool, change_pct: float, interest: float,
           mde: float, absolute: Absolute | None) -> str:
    """A primary figure's verdict: significance and size, or power (or the interval)."""
    if significant:
        big = abs(absolute.change) >= absolute.interest if absolute else \
            abs(change_pct) >= 100 * interest
        return ('higher' if test.b_higher else 'lower') if big else 'small'
    if absolute:
        return 'same' if -absolute.interest < absolute.ci.lo and \
            absolute.ci.hi < absolute.interest else 'inconclusive'
    return 'same' if mde <= interest else 'inconclusive'


def check_power(runs: int, alpha: float) -> None:
    """Refuse a RUNS with which no timed difference can ever be significant."""
    tests = len(TIMED)
    need = stats.min_runs(alpha, tests)
    if runs < need:
        p = stats.smallest_p(runs, runs)
        raise OptionError(
            f'RUNS={runs} can never give a significant difference: with {runs} runs a side '
            f'the smallest two-sided Mann-Whitney p is {p:.3g}, {tests * p:.3g} '
            f'after Holm over the {tests} primary figures, above ALPHA={alpha:g}; '
            f'use RUNS={need} or more')


def check_counted(counted: int) -> None:
    """Refuse a COUNTED with which Welch's test can never be significant."""
    if counted == 1:
        raise OptionError('COUNTED=1 gives no spread to test: use COUNTED=3 (or 2 '
                          'and more), or 0 for no counted boots')
