# SPDX-License-Identifier: GPL-2.0
"""The forest plot that leads the A/B picture (plot.render), and the text and
axis measures it shares with the per-figure strips.

One row per figure: B's change against A and its interval, on one axis that
all rows share, in percent of A's median; a count near zero (a Difference
with .absolute) in events a packet, on an axis of its own below. The shaded
band is the change of interest (a row's own), a filled square a significant
change (Difference.significant), a hollow one none.

Text is measured by its length: CHAR_EM ems a character (BOLD_EM bold), a
little over DejaVu Sans' average (its digits are 0.636 em), so an estimate
errs wide in any common sans-serif font. Tick labels: a tick step of 1, 2,
2.5 or 5 times a power of ten, printed with the digits its multiples need,
so no two labels of an axis are alike.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from itertools import groupby

from kloc.bench.metrics import Difference

FONT = 11               # px, the pictures' text
CHAR_EM = 0.6           # estimated width of a character, in ems
BOLD_EM = 0.68          # and of a bold one
ROW_H = 30              # a forest row: two lines of label
LINE_H = round(1.2 * FONT)


def text_width(text: str, size: float = FONT, bold: bool = False) -> float:
    """The estimated width of text in px, by CHAR_EM (BOLD_EM) a character."""
    return len(text) * size * (BOLD_EM if bold else CHAR_EM)


def fit_chars(width: float, size: float = FONT, bold: bool = False) -> int:
    """How many characters fit width by text_width's estimate."""
    return max(1, int(width / (size * (BOLD_EM if bold else CHAR_EM))))


def wrap(text: str, width: float, lines: int = 2, size: float = FONT,
         bold: bool = False) -> list[str]:
    """text in at most lines lines that each fit width, the last cut with an ellipsis."""
    return textwrap.wrap(text, fit_chars(width, size, bold), max_lines=lines,
                         placeholder='\u2026') or ['']


def fit(text: str, width: float, size: float = FONT, bold: bool = False) -> str:
    return wrap(text, width, 1, size, bold)[0]


def text(x: float, y: float, rows: Sequence[str], anchor: str = 'start', attrs: str = '',
         size: float = FONT) -> str:
    """An SVG text of one or more lines (tspans), 1.2 sizes apart, the first at y."""
    more = ''.join(f'<tspan x="{x:.1f}" dy="{round(1.2 * size)}">{escape(r)}</tspan>'
                   for r in rows[1:])
    sized = f' font-size="{size}"' if size != FONT else ''
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{sized}{attrs}>'
            f'{escape(rows[0])}{more}</text>')


@dataclass(frozen=True)
class Axis:
    ticks: tuple[float, ...]
    labels: tuple[str, ...]

    def frac(self, v: float) -> float:
        """Where v lies between the first tick (0) and the last (1)."""
        return (v - self.ticks[0]) / (self.ticks[-1] - self.ticks[0])


def axis(lo: float, hi: float, n: int = 5, signed: bool = False, suffix: str = '') -> Axis:
    """n ticks a nice step apart that cover lo..hi, the data centred; not below 0
    where lo is not. No spread: 1% of the value (or 1) either side."""
    nonneg = lo >= 0
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi - lo <= 1e-9 * max(abs(lo), abs(hi)):
        pad = abs(lo) * 0.01 or 1.0
        lo, hi = (max(0.0, lo - pad) if nonneg else lo - pad), hi + pad
    raw = (hi - lo) / (n - 1)
    e = math.floor(math.log10(raw))
    while True:
        for m in (1.0, 2.0, 2.5, 5.0):
            step = m * 10.0 ** e
            first = math.floor(lo / step + 1e-9)
            if step < raw * (1 - 1e-9) or (first + n - 1) * step < hi - 1e-9 * step:
                continue
            slack = ((first + n - 1) * step - hi) - (lo - first * step)
            shift = int(slack / (2 * step))
            first -= min(shift, first) if nonneg and first >= 0 else shift
            idx = range(first, first + n)
            return Axis(tuple(i * step for i in idx), _labels(idx, m, e, signed, suffix))
        e += 1


def _labels(idx: range, m: float, e: int, signed: bool, suffix: str) -> tuple[str, ...]:
    """Multiples of m * 10^e with the decimals they need (one more for 2.5); thousands
    as k (millions as M) where the step is a whole number of them; 0 as 0."""
    top = max(abs(i) for i in idx) * m * 10.0 ** e
    unit, shift = '', 0
    for u, k in (('M', 6), ('k', 3)):
        if m * 10.0 ** e >= 10 ** k and top >= 10 ** (k + 1):
            unit, shift = u, k
            break
    d = max(0, shift - e + (1 if m == 2.5 else 0))
    sign = '+' if signed else ''
    return tuple('0' + suffix if i == 0
                 else f'{i * m * 10.0 ** (e - shift):{sign},.{d}f}{unit}{suffix}' for i in idx)


@dataclass(frozen=True)
class _Row:
    d: Difference
    change: float
    lo: float
    hi: float
    interest: float
    value: str          # the value column: the change and its interval


def _pct_row(d: Difference, a: str) -> _Row:
    c, ci = d.change_pct, d.change_ci
    value = (f'{c:+.2f}% ({ci.lo:+.2f} to {ci.hi:+.2f})' if math.isfinite(c)
             else f'no percent: the median of {a} is 0')
    return _Row(d, c, ci.lo, ci.hi, d.interest_pct, value)


def _abs_row(d: Difference) -> _Row:
    assert d.absolute is not None
    c, ci = d.absolute.change, d.absolute.ci
    return _Row(d, c, ci.lo, ci.hi, d.absolute.interest,
                f'{c:+.2g} ({ci.lo:+.2g} to {ci.hi:+.2g})/packet')


def label(d: Difference) -> str:
    """A figure's title and unit, as its rows and panels give it."""
    return f'{d.figure.title.split(" (")[0]} ({d.figure.unit})'


def forest(diffs: Sequence[Difference], a: str, b: str, width: float) -> tuple[list[str], float]:
    """The forest plot from (0, 0), width wide: its SVG and its height."""
    cols = (0.0, 0.33 * width, 0.35 * width, 0.77 * width, 0.79 * width, width)
    sections = [([_pct_row(d, a) for d in diffs if d.absolute is None], '%',
                 f'Change of {b} vs {a}, in % of the median of {a}'),
                ([_abs_row(d) for d in diffs if d.absolute is not None], '',
                 f'Counts near zero: change of {b} vs {a} in events a packet (mean)')]
    levels = {round(100 * r.d.change_ci.level if not r.d.absolute else
                    100 * r.d.absolute.ci.level) for s in sections for r in s[0]}
    out, y = _legend(diffs, a, b, width, levels)
    for rows, suffix, heading in sections:
        if rows:
            part, y = _section(rows, suffix, heading, cols, y + 8)
            out += part
    return out, y


def _legend(diffs: Sequence[Difference], a: str, b: str, width: float,
            levels: set[int]) -> tuple[list[str], float]:
    pct = sorted({d.interest_pct for d in diffs if d.absolute is None})
    near = sorted({d.absolute.interest for d in diffs if d.absolute is not None})
    shade = ', '.join([f'\u00b1{v:g}%' for v in pct] + [f'\u00b1{v:g} a packet' for v in near])
    interval = f'{levels.pop()}% interval' if len(levels) == 1 else 'interval'
    items = [('filled', 'significant change, at least the change of interest'),
             ('hollow', 'no significant change, or not tested'),
             ('ci', interval), ('band', f'the change of interest: {shade or "none"}')]
    out = ['<g class="legend">',
           text(0, 14, [fit(f'Every figure: the change of {b} vs {a}', width)], size=13)]
    for i, (kind, words) in enumerate(items):        # two columns
        x, y = (i % 2) * width / 2, 36.0 + (i // 2) * 18
        out += [_mark(kind, x + 6, y - 4), text(x + 16, y, [fit(words, width / 2 - 24)])]
    return out + ['</g>'], 36.0 + 18 * ((len(items) - 1) // 2) + 8


def _mark(kind: str, x: float, y: float) -> str:
    """A legend's or a row's mark, centred at (x, y)."""
    if kind == 'ci':
        return f'<line x1="{x - 6:.1f}" x2="{x + 6:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="#222"/>'
    fill = {'filled': '#222', 'hollow': 'white', 'band': '#e4e4e4'}[kind]
    stroke = 'none' if kind == 'band' else '#222'
    return (f'<rect class="mark {kind}" x="{x - 4.5:.1f}" y="{y - 4.5:.1f}" width="9" '
            f'height="9" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/>')


def _section(rows: list[_Row], suffix: str, heading: str, cols: tuple[float, ...],
             y: float) -> tuple[list[str], float]:
    """A heading, one row per figure, and the axis they share under them."""
    vals = [0.0] + [v for r in rows for v in (r.change, r.lo, r.hi, r.interest, -r.interest)
                    if math.isfinite(v)]
    ax = axis(min(vals), max(vals), 7, True, suffix)
    x0, w = cols[2], cols[3] - cols[2]

    def x(v: float) -> float:
        return x0 + w * ax.frac(min(max(v, ax.ticks[0]), ax.ticks[-1]))

    top = y + 20
    bottom = top + len(rows) * ROW_H
    out = [text(0, y + 12, [fit(heading, cols[-1])], attrs=' fill="#333"')]
    i = 0
    for interest, run in groupby(r.interest for r in rows):     # one band a run of rows
        n = len(list(run))
        out.append(f'<rect class="band" x="{x(-interest):.1f}" y="{top + i * ROW_H:.1f}" '
                   f'width="{x(interest) - x(-interest):.1f}" height="{n * ROW_H}" '
                   'fill="#e4e4e4"/>')
        i += n
    out.append(f'<line x1="{x(0):.1f}" x2="{x(0):.1f}" y1="{top:.1f}" y2="{bottom:.1f}" '
               'stroke="#888" stroke-dasharray="3,3"/>')
    for i, r in enumerate(rows):
        ry = top + i * ROW_H
        mid = ry + ROW_H / 2
        lines = wrap(label(r.d), cols[1] - 4)
        out += [f'<g class="row" data-figure="{escape(r.d.figure.name)}">',
                _cell(cols[0], ry, cols[1] - cols[0], lines),
                _cell(cols[4], ry, cols[5] - cols[4], [fit(r.value, cols[5] - cols[4] - 4)])]
        if all(math.isfinite(v) for v in (r.change, r.lo, r.hi)):
            out += [f'<line class="ci" x1="{x(r.lo):.1f}" x2="{x(r.hi):.1f}" y1="{mid:.1f}" '
                    f'y2="{mid:.1f}" stroke="#222" stroke-width="1.5"/>',
                    _mark('filled' if r.d.significant else 'hollow', x(r.change), mid)]
        out.append('</g>')
    out += ['<g class="axis">',
            f'<line x1="{x0:.1f}" x2="{x0 + w:.1f}" y1="{bottom:.1f}" y2="{bottom:.1f}" '
            'stroke="#888"/>']
    for t, lab in zip(ax.ticks, ax.labels):
        out += [f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{bottom:.1f}" '
                f'y2="{bottom + 4:.1f}" stroke="#888"/>',
                text(x(t), bottom + 16, [lab], 'middle', ' class="tick"')]
    return out + ['</g>'], bottom + 22


def _cell(x: float, y: float, w: float, lines: list[str]) -> str:
    """Text in a box of its own (a nested svg: it clips, and bounds the text)."""
    y0 = ROW_H / 2 + 4 - (len(lines) - 1) * LINE_H / 2
    return (f'<svg class="cell" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{ROW_H}">'
            f'{text(2, y0, lines)}</svg>')
