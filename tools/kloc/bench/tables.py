# SPDX-License-Identifier: GPL-2.0
"""A/B differences as plain text (under 72 columns, for a mail) and JSON."""

from __future__ import annotations

import textwrap
from dataclasses import asdict

from kloc.bench import metrics
from kloc.bench.metrics import EFFECT_OF_INTEREST, Difference, better_or_worse, verdict_words

WIDTH = 72
SEED_EFFECT = EFFECT_OF_INTEREST


def _fmt(v: float, unit: str) -> str:
    if unit in ('ratio', '%'):
        return f'{v:.3f}'
    if v and abs(v) < 1:        # three significant digits: 0.00237, not 0.0
        return f'{v:.3g}'
    return f'{v:,.1f}' if abs(v) < 1000 else f'{v:,.0f}'


def verdict_text(d: Difference, a: str, b: str, alpha: float,
                 words: tuple[str, str] | None = None) -> str:
    """words: what a higher and a lower B mean (e.g. improvement, regression)."""
    text = verdict_words(d, b, words)
    if d.verdict == 'detail':
        return f'none: {text}'
    if d.verdict == 'same':
        return f'{text} at alpha = {alpha:g}'
    if d.verdict == 'inconclusive':
        return (f'{text}: not significant, and these runs could only find '
                f'{d.detectable_pct:.1f}% or more')
    if not words:
        text = f'{b} {d.verdict} than {a}'
    return f'{text} (significant at alpha = {alpha:g})'


def judged(diffs: list[Difference]) -> list[Difference]:
    """The figures a verdict rests on: the counted ones where there are any (exact
    under icount), else the timed ones (wall-clock under emulation)."""
    return [d for d in diffs if d.figure.kind == 'counted'] or diffs


def verdict(diffs: list[Difference]) -> str:
    """What moved, in the judged figures."""
    rest = judged(diffs)
    more = 'COUNTED' if rest and rest[0].figure.kind == 'counted' else 'RUNS'
    parts = []
    for word, which in (('regression', 'worse'), ('improvement', 'better')):
        moved = [d.figure.short for d in rest if better_or_worse(d) == which]
        if moved:
            parts.append(f'{word} in {len(moved)} of {sum(d.figure.primary for d in rest)} '
                         f'{rest[0].figure.kind} figures ({", ".join(moved)})')
    unsure = [d.figure.short for d in rest if d.verdict == 'inconclusive']
    if unsure and not parts:
        parts.append(f'inconclusive: no significant difference, but the runs could not '
                     f'have found the change of interest in {len(unsure)} of '
                     f'{sum(d.figure.primary for d in rest)} {rest[0].figure.kind} figures '
                     f'({", ".join(unsure)}); give more {more}')
    elif not parts:
        parts.append('no significant difference in '
                     + ('counts' if rest and rest[0].figure.kind == 'counted'
                        else 'loopback throughput'))
    if len(rest) < len(diffs):
        parts.append('the timed figures (wall-clock under emulation) are shown, not judged')
    return ', '.join(parts)


def render(diffs: list[Difference], a: str, b: str, alpha: float,
           words: tuple[str, str] | None = None) -> str:
    w = max(len(a), len(b), 10) + 2
    tests = max(1, sum(d.figure.primary for d in diffs))
    lines: list[str] = []
    for d in diffs:
        u = d.figure.unit
        lines += textwrap.wrap(f'{d.figure.title} ({u}, {d.figure.better} is better)', WIDTH,
                               subsequent_indent='  ')
        for label, s in ((a, d.a), (b, d.b)):
            lines.append(f'  {label:<{w}}{_fmt(s.median, u):>11}  CI [{_fmt(s.ci.lo, u)}, '
                         f'{_fmt(s.ci.hi, u)}]  CV {100 * s.cv:.1f}%  n={len(s.values)}')
        lines.append(f'  {"change":<{w}}{d.change_pct:>+10.2f}%  CI [{d.change_ci.lo:+.2f}%, '
                     f'{d.change_ci.hi:+.2f}%]')
        lines.append(f'  {"p":<{w}}{d.test.p:>11.4f}  {d.test.name} {d.test.method}'
                     + (f'; Holm {d.p_adjusted:.4f}' if d.figure.primary else ''))
        lines += textwrap.wrap(verdict_text(d, a, b, alpha, words), WIDTH,
                               initial_indent=f'  {"verdict":<{w}}',
                               subsequent_indent=' ' * (w + 2))
        if d.figure.primary:
            lines.append(f'  {"detectable":<{w}}{d.detectable_pct:.1f}% or more '
                         f'(80% power, Holm over {tests})')
        need = metrics.runs_needed(d, SEED_EFFECT, alpha,
                                   tests if d.figure.primary else 1)
        lines.append(f'  {"3.6%":<{w}}needs {need} runs a side at this spread (80% power)')
        lines.append('')
    if diffs and diffs[0].figure.kind == 'counted':
        lines += COUNTED_NOTES
        return _checked(lines)
    levels = sorted({round(100 * s.ci.level, 1) for d in diffs for s in (d.a, d.b)})
    cover = ', '.join(f'{x:g}%' for x in levels)
    lines += ['CI: distribution-free interval of the median (order statistics,',
              f'  coverage {cover}); for the change, a seeded 95% bootstrap.',
              'p: two-sided; verdicts use it Holm-adjusted over the 3 primary',
              '  figures (1 thread, all CPUs, scaling efficiency).',
              'detectable: the smallest change these runs find 4 times in 5:',
              '  (z(1 - alpha/2m) + z(0.8)) sqrt((CV_A^2/n_A + CV_B^2/n_B) / (3/pi)),',
              f'  m = {tests} (Holm); above the change of interest, no significant',
              '  difference is "inconclusive", not a pass.',
              '3.6%: the seed patch\'s claimed effect; runs needed, the same',
              '  formula solved for n.']
    return _checked(lines)


COUNTED_NOTES = [
    'Counted under the QEMU plugin, in separate boots (kloc-count, TCG,',
    '  one host thread for all vCPUs): path length and sharing per packet,',
    '  not time. They are exact enough to judge at 3 runs a side, but they',
    '  are not proof of a speed change on hardware; the timed figures stay.',
    'p: Welch\'s two-sided t-test (Student t), Holm-adjusted over the',
    '  counted primaries. detectable and runs needed: the same formulas',
    '  with t quantiles at the runs\' degrees of freedom.']


def _checked(lines: list[str]) -> str:
    for line in lines:
        if len(line) > WIDTH:
            raise AssertionError(f'report line over {WIDTH} columns: {line!r}')
    return '\n'.join(lines) + '\n'


def to_json(diffs: list[Difference], a: str, b: str, alpha: float) -> list[dict[str, object]]:
    out = []
    for d in diffs:
        item: dict[str, object] = {
            'figure': d.figure.name, 'title': d.figure.title, 'unit': d.figure.unit,
            'kind': d.figure.kind, 'higher_is_better': d.figure.better == 'higher',
            'alpha': alpha,
            a: asdict(d.a), b: asdict(d.b),
            'change_pct': d.change_pct, 'change_pct_ci95': [d.change_ci.lo, d.change_ci.hi],
            'test': f'{d.test.name} ({d.test.method}), two-sided',
            'statistic': d.test.statistic, 'p': d.test.p, 'p_holm': d.p_adjusted,
            'primary': d.figure.primary,
            'detectable_change_pct': d.detectable_pct, 'change_of_interest_pct': d.interest_pct,
            'verdict': d.verdict if not d.significant else f'{b} {d.verdict}',
            'verdict_words': verdict_words(d, b),
        }
        out.append(item)
    return out
