# SPDX-License-Identifier: GPL-2.0
"""The loopback kselftest's figures, and how two sets of runs differ.

Every figure here is better when higher. The primary figures (1 thread,
all CPUs, scaling efficiency) are tested together, so their p-values are
Holm-adjusted before a verdict: across them, the chance of calling a
difference where there is none stays at alpha. The per-node figures add
up to the all-CPU one; they are shown, with their own p, but give no
verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kloc.bench import stats

# The change of interest when none is given: the seed patch's claimed gain
# (../shared/seeds). A run that could not have found it is inconclusive.
EFFECT_OF_INTEREST = 0.036

# What each verdict says, in every report, plot and record.
VERDICT_WORDS = {
    'same': 'no significant difference',
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


def _num(v: object) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise ValueError(f'not a number: {v!r}')


def extract(record: dict[str, object]) -> dict[str, float]:
    """Figure name -> value for one run's JSON record."""
    out = {'pps_single': _num(record['pps_single']),
           'pps_total': _num(record['pps_total']),
           'scaling_efficiency': _num(record['scaling_efficiency'])}
    per_cpu = record.get('per_cpu')
    if isinstance(per_cpu, list):
        for c in per_cpu:
            if isinstance(c, dict):
                key = f'pps_node{int(_num(c["node"]))}'
                out[key] = out.get(key, 0.0) + _num(c['pps'])
    return out


def describe(name: str) -> Figure:
    if name == 'pps_single':
        return Figure(name, '1 thread', 'packets/s', '1 thread')
    if name == 'pps_total':
        return Figure(name, 'one thread per CPU, total', 'packets/s', 'all CPUs')
    if name == 'scaling_efficiency':
        return Figure(name, 'scaling efficiency (N threads / N x 1)', 'ratio', 'efficiency')
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
class Difference:
    figure: Figure
    a: SideSummary
    b: SideSummary
    change_pct: float
    change_ci: stats.Interval
    u_test: stats.UTest
    p_adjusted: float
    # 'higher' or 'lower' (significant), 'same' (not, and the runs had the
    # power to see the change of interest), 'inconclusive' (not, and they
    # had not), or 'detail' (not tested)
    verdict: str
    detectable_pct: float = math.inf   # 80% power, Holm, the measured spreads
    interest_pct: float = 100 * EFFECT_OF_INTEREST

    @property
    def significant(self) -> bool:
        return self.verdict in ('higher', 'lower')


def verdict_words(d: Difference, b: str = 'B', words: tuple[str, str] | None = None) -> str:
    """The verdict in words: words = what a higher and a lower B mean."""
    if d.verdict in VERDICT_WORDS:
        return VERDICT_WORDS[d.verdict]
    if words:
        return words[0] if d.verdict == 'higher' else words[1]
    return f'{b} {d.verdict}'


def _side(xs: list[float]) -> SideSummary:
    return SideSummary(xs, stats.median(xs), stats.median_ci(xs), stats.cv(xs))


def compare(a_records: list[dict[str, object]], b_records: list[dict[str, object]],
            alpha: float, interest: float = EFFECT_OF_INTEREST) -> list[Difference]:
    """One Difference per figure both sides have, in a stable order.

    interest: the relative change that matters; a figure with no
    significant difference is 'same' only if the runs could have found it.
    """
    a_vals = [extract(r) for r in a_records]
    b_vals = [extract(r) for r in b_records]
    names = [n for n in a_vals[0] if all(n in v for v in a_vals + b_vals)]
    names.sort(key=lambda n: (not n.startswith('pps_s'), not n.startswith('pps_t'),
                              not n.startswith('scal'), n))
    tests = []
    for n in names:
        xa = [v[n] for v in a_vals]
        xb = [v[n] for v in b_vals]
        tests.append((n, xa, xb, stats.mann_whitney(xa, xb)))
    primary = [i for i, t in enumerate(tests) if describe(t[0]).primary]
    adjusted = [t[3].p for t in tests]
    for i, p in zip(primary, stats.holm([tests[i][3].p for i in primary])):
        adjusted[i] = p
    out = []
    for i, ((n, xa, xb, u), p_adj) in enumerate(zip(tests, adjusted)):
        change = stats.pct_change(xa, xb)
        # U counts the pairs where A beats B: below half, B tends higher.
        b_higher = u.u < len(xa) * len(xb) / 2
        sa, sb = _side(xa), _side(xb)
        mde = stats.detectable_change(sa.cv, sb.cv, len(xa), len(xb), alpha,
                                      tests=max(1, len(primary)))
        verdict = 'detail' if i not in primary else \
            ('higher' if b_higher else 'lower') if p_adj < alpha else \
            'same' if mde <= interest else 'inconclusive'
        out.append(Difference(describe(n), sa, sb, change, stats.pct_change_ci(xa, xb), u,
                              p_adj, verdict, 100 * mde, 100 * interest))
    return out
