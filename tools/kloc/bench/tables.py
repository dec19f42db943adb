# SPDX-License-Identifier: GPL-2.0
"""A/B differences as plain text (under 72 columns, for a mail) and JSON."""

from __future__ import annotations

import math
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


def _signed(v: float, unit: str) -> str:
    return ('-' if v < 0 else '+') + _fmt(abs(v), unit)


def _interest(d: Difference) -> str:
    """The change of interest: a percent, or a count near zero's absolute one."""
    if d.absolute is not None:
        return f'{d.absolute.interest:g} {d.figure.unit}'
    return f'{d.interest_pct:.1f}%'


def verdict_text(d: Difference, a: str, b: str, alpha: float,
                 words: tuple[str, str] | None = None) -> str:
    """words: what a higher and a lower B mean (e.g. improvement, regression)."""
    text = verdict_words(d, b, words)
    if d.verdict == 'detail':
        return f'none: {text}'
    ab = d.absolute
    if d.verdict == 'same' and d.test.name == metrics.IDENTICAL:
        return 'no change: each boot counted exactly what its pair (its seed) counted'
    if d.verdict == 'same':
        if ab is not None:
            return (f'{text} at alpha = {alpha:g}, and the change\'s interval is '
                    f'within the change of interest, +-{_interest(d)}')
        return f'{text} at alpha = {alpha:g}'
    if d.verdict == 'inconclusive':
        if ab is not None:
            return (f'{text}: not significant, but the change\'s interval reaches '
                    f'beyond the change of interest, +-{_interest(d)}')
        return (f'{text}: not significant, and these runs could only find '
                f'{d.detectable_pct:.1f}% or more')
    if d.verdict == 'small':
        return (f'{b} {"higher" if d.test.b_higher else "lower"} than {a} (significant at '
                f'alpha = {alpha:g}), but below the change of interest, {_interest(d)}')
    if not words:
        text = f'{b} {d.verdict} than {a}'
    return f'{text} (significant at alpha = {alpha:g})'


def judged(diffs: list[Difference]) -> list[Difference]:
    """The figures a verdict rests on: the counted ones where there are any (exact
    under icount), else the timed ones (wall-clock under emulation)."""
    return [d for d in diffs if d.figure.kind == 'counted'] or diffs


def verdict(diffs: list[Difference], lost: list[str] | tuple[str, ...] = ()) -> str:
    """What moved, in the judged figures; lost: the figures some boots lacked, which
    the verdict does not rest on (metrics.lost), named last."""
    text = _verdict(diffs)
    if lost:
        text += (f', {len(lost)} figure{"s" if len(lost) != 1 else ""} not compared, as '
                 f'some boots lack {"them" if len(lost) != 1 else "it"} '
                 f'({", ".join(metrics.describe(n).short for n in lost)})')
    return text


def _verdict(diffs: list[Difference]) -> str:
    rest = judged(diffs)
    more = 'COUNTED' if rest and rest[0].figure.kind == 'counted' else 'RUNS'
    parts = []
    what = 'counts' if rest and rest[0].figure.kind == 'counted' else 'loopback throughput'
    for word, which in (('regression', 'worse'), ('improvement', 'better')):
        moved = [d.figure.short for d in rest if better_or_worse(d) == which]
        if moved:
            parts.append(f'{word} in {len(moved)} of {sum(d.figure.primary for d in rest)} '
                         f'{rest[0].figure.kind} figures ({", ".join(moved)})')
    unsure = [d.figure.short for d in rest if d.verdict == 'inconclusive']
    small = [d.figure.short for d in rest if d.verdict == 'small']
    primaries = [d for d in rest if d.figure.primary]
    if primaries and all(d.test.name == metrics.IDENTICAL for d in primaries):
        parts.append('no change in counts: each counted boot counted exactly what its '
                     'pair (the same seed) on the other side did')
    if not parts and small and not unsure:
        parts.append(f'no change of interest in {what}')
    # Significant, but smaller than the change of interest: named before an
    # "inconclusive", so that a verdict that starts "no significant" or
    # "inconclusive" never hides a significant difference (make bench-aa).
    if small:
        parts.append(f'significant but below the change of interest in {len(small)} of '
                     f'{sum(d.figure.primary for d in rest)} {rest[0].figure.kind} figures '
                     f'({", ".join(small)})')
    if unsure and not any(better_or_worse(d) for d in rest):
        parts.append(f'inconclusive: no significant difference, but the runs could not '
                     f'have found the change of interest in {len(unsure)} of '
                     f'{sum(d.figure.primary for d in rest)} {rest[0].figure.kind} figures '
                     f'({", ".join(unsure)}); give more {more}')
    elif not parts:
        parts.append(f'no significant difference in {what}')
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
        ab = d.absolute
        if ab is None:
            lines.append(f'  {"change":<{w}}{d.change_pct:>+10.2f}%  CI '
                         f'[{d.change_ci.lo:+.2f}%, {d.change_ci.hi:+.2f}%]')
        else:       # near zero: a percent of it would say nothing
            lines += textwrap.wrap(f'{_signed(ab.change, u):>11} {u}  CI [{_signed(ab.ci.lo, u)}, '
                                   f'{_signed(ab.ci.hi, u)}]', WIDTH,
                                   initial_indent=f'  {"change":<{w}}',
                                   subsequent_indent=' ' * (w + 2))
        lines.append(f'  {"p":<{w}}{d.test.p:>11.4f}  {d.test.name} {d.test.method}'
                     + (f'; Holm {d.p_adjusted:.4f}' if d.figure.primary else ''))
        lines += textwrap.wrap(verdict_text(d, a, b, alpha, words), WIDTH,
                               initial_indent=f'  {"verdict":<{w}}',
                               subsequent_indent=' ' * (w + 2))
        if d.figure.primary:
            det = f'{d.detectable_pct:.1f}%' if ab is None else \
                f'{_fmt(ab.detectable, u)} {u}'
            lines.append(f'  {"detectable":<{w}}{det} or more (80% power, Holm over {tests})')
        need = metrics.runs_needed(d, SEED_EFFECT, alpha,
                                   tests if d.figure.primary else 1)
        label = '3.6%' if ab is None else f'{ab.interest:g}/packet'
        lines.append(f'  {label:<{w}}needs {need} runs a side at this spread (80% power)')
        lines.append('')
    if diffs and diffs[0].figure.kind == 'counted':
        lines += COUNTED_NOTES
        return _checked(lines)
    levels = sorted({round(100 * s.ci.level, 1) for d in diffs for s in (d.a, d.b)})
    cover = ', '.join(f'{x:g}%' for x in levels)
    lines += ['CI: distribution-free interval of the median (order statistics,',
              f'  coverage {cover}); for the change, a seeded 95% bootstrap.',
              'p: two-sided; verdicts use it Holm-adjusted over the 3 primary',
              '  figures (1 thread, all CPUs, scaling efficiency); a change',
              '  is a regression or an improvement only if it is significant and',
              '  at least the change of interest.',
              'detectable: the smallest change these runs find 4 times in 5:',
              '  (z(1 - alpha/2m) + z(0.8)) sqrt((CV_A^2/n_A + CV_B^2/n_B) / (3/pi)),',
              f'  m = {tests} (Holm); none where the exact U test cannot reach',
              '  alpha/m. Above the change of interest, no significant difference',
              '  is "inconclusive", not a pass.',
              '3.6%: the seed patch\'s claimed effect; runs needed, the same',
              '  formula solved for n (and at least the fewest runs with which',
              '  the exact U test can reach alpha/m).']
    return _checked(lines)


COUNTED_NOTES = [
    'Counted under the QEMU plugin, in separate boots (kloc-count, TCG,',
    '  one host thread for all vCPUs): path length and sharing per packet,',
    '  not time. They are exact enough to judge at 3 runs a side, but they',
    '  are not proof of a speed change on hardware; the timed figures stay.',
    'p: Welch\'s two-sided t-test (Student t), Holm-adjusted over the m',
    '  counted primaries; a regression or an improvement needs p below',
    '  alpha and a change at least the change of interest.',
    'detectable: (t(1 - alpha/2m, v) + t(0.8, v))',
    '  sqrt(CV_A^2/n_A + CV_B^2/n_B), v Welch\'s degrees of freedom',
    '  (standard deviations for counts near zero); runs needed: the',
    '  same solved for n.',
    'Sharing and transfers near zero (base median under 1 / the change',
    '  of interest: 28 a packet at 3.6%): the change of the means in',
    '  events a packet, with Welch\'s 1 - alpha interval, judged against',
    '  1 a packet: a regression or improvement from 1 up; without',
    '  significance, a pass when the interval lies within +-1.']


def _checked(lines: list[str]) -> str:
    for line in lines:
        if len(line) > WIDTH:
            raise AssertionError(f'report line over {WIDTH} columns: {line!r}')
    return '\n'.join(lines) + '\n'


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def to_json(diffs: list[Difference], a: str, b: str, alpha: float) -> list[dict[str, object]]:
    out = []
    for d in diffs:
        item: dict[str, object] = {
            'figure': d.figure.name, 'title': d.figure.title, 'unit': d.figure.unit,
            'kind': d.figure.kind, 'higher_is_better': d.figure.better == 'higher',
            'alpha': alpha,
            a: asdict(d.a), b: asdict(d.b),
            'change_pct': _finite(d.change_pct),
            'change_pct_ci95': [_finite(d.change_ci.lo), _finite(d.change_ci.hi)],
            # a count near zero, judged in its unit (events a packet): else null
            'change_abs': None if d.absolute is None else {
                'change_of_means': d.absolute.change,
                'ci': [d.absolute.ci.lo, d.absolute.ci.hi], 'ci_level': d.absolute.ci.level,
                'change_of_interest': d.absolute.interest,
                'detectable_change': d.absolute.detectable},
            'test': f'{d.test.name} ({d.test.method}), two-sided',
            'statistic': d.test.statistic, 'p': d.test.p, 'p_holm': d.p_adjusted,
            'primary': d.figure.primary,
            'detectable_change_pct': d.detectable_pct, 'change_of_interest_pct': d.interest_pct,
            'verdict': d.verdict if not d.significant else f'{b} {d.verdict}',
            'verdict_words': verdict_words(d, b),
        }
        out.append(item)
    return out
