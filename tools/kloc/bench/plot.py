# SPDX-License-Identifier: GPL-2.0
"""An SVG picture of A/B runs: one panel per figure, every run a dot.

Each panel has its own scale. The dots of a side are spread sideways by
run order; the thick bar is the median and the shaded box its confidence
interval, so overlap (or none) is visible at a glance.
"""

from __future__ import annotations

import math
from html import escape

from kloc.bench.metrics import Difference, verdict_words

PANEL_W, PANEL_H, PAD = 280, 260, 40
COLOURS = ('#1f77b4', '#d62728')


TITLE_CHARS = 40        # what fits a panel's width in bold 11 px
SUBTITLE_CHARS = 50     # and in regular 11 px (about 5.2 px a character), the line under it


def _fmt(v: float, step: float) -> str:
    """A tick label with as many digits as ticks step apart need to differ:
    6,543 and 6,568 (not 6.6k twice), 0.452, 3.5; thousands as k from 10,000."""
    step = abs(step) or abs(v) or 1.0
    if abs(v) >= 10_000 and step >= 100:
        d = max(0, 1 - math.floor(math.log10(step / 1000)))
        return f'{round(v / 1000, d) + 0.0:,.{d}f}k'
    d = max(0, min(6, 1 - math.floor(math.log10(step))))
    return f'{round(v, d) + 0.0:,.{d}f}'


def _title(d: Difference) -> str:
    """The figure's title and unit, or its short name where the title would not fit."""
    title = f'{d.figure.title.split(" (")[0]} ({d.figure.unit})'
    if len(title) <= TITLE_CHARS:
        return title
    short = f'{d.figure.short or d.figure.name} ({d.figure.unit})'
    return short if len(short) <= TITLE_CHARS else short[:TITLE_CHARS - 1] + '\u2026'


def render(diffs: list[Difference], a: str, b: str, title: str) -> str:
    """One panel per figure; a and b label the sides."""
    cols = min(3, max(1, len(diffs)))
    rows = (len(diffs) + cols - 1) // cols
    width, height = cols * PANEL_W + PAD, rows * PANEL_H + 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{PAD // 2}" y="22" font-size="14">{escape(title)}</text>']
    for lx, (label, colour) in enumerate(zip((a, b), COLOURS)):
        out.append(f'<circle cx="{PAD // 2 + 6 + 120 * lx}" cy="40" r="4" fill="{colour}"/>'
                   f'<text x="{PAD // 2 + 14 + 120 * lx}" y="44">{escape(label)}</text>')
    for i, d in enumerate(diffs):
        x0 = PAD // 2 + (i % cols) * PANEL_W
        y0 = 60 + (i // cols) * PANEL_H
        out += _panel(d, x0, y0)
        for s_i, label in enumerate((a, b)):
            out.append(f'<text x="{x0 + 95 + 85 * s_i}" y="{y0 + PANEL_H - 22}" '
                       f'text-anchor="middle">{escape(label)}</text>')
    out.append('</svg>')
    return '\n'.join(out) + '\n'


def _change(d: Difference) -> str:
    """The change as the report gives it: percent, or for a count near zero its change
    in events a packet (a percent of a near-zero base says nothing)."""
    if d.absolute is not None:
        return f'{d.absolute.change:+.2g}/packet'
    return f'{d.change_pct:+.2f}%'


def _subtitle(d: Difference) -> str:
    """The change, its p and the verdict, on one line that fits the panel: "Holm" goes
    first, then the verdict is cut."""
    p = f'p={d.p_adjusted:.3g}'
    for holm in (('Holm ' if d.figure.primary else ''), ''):
        text = f'{_change(d)}, {holm}{p}, {verdict_words(d)}'
        if len(text) <= SUBTITLE_CHARS:
            return text
    return text[:SUBTITLE_CHARS - 1] + '\u2026'


def _panel(d: Difference, x0: int, y0: int) -> list[str]:
    vals = d.a.values + d.b.values
    lo, hi = min(vals), max(vals)
    span = (hi - lo) or abs(hi) or 1.0
    lo, hi = lo - 0.1 * span, hi + 0.1 * span
    top, bottom, left = y0 + 40, y0 + PANEL_H - 40, x0 + 50

    def y(v: float) -> float:
        return bottom - (v - lo) / (hi - lo) * (bottom - top)

    out = [f'<text x="{x0}" y="{y0 + 12}" font-weight="bold">{escape(_title(d))}</text>',
           f'<text x="{x0}" y="{y0 + 25}">{escape(_subtitle(d))}</text>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#888"/>']
    for t in range(5):
        v = lo + (hi - lo) * t / 4
        out.append(f'<text x="{left - 4}" y="{y(v) + 4:.1f}" text-anchor="end">'
                   f'{_fmt(v, (hi - lo) / 4)}</text>')
    for s_i, (side, colour) in enumerate(zip((d.a, d.b), COLOURS)):
        cx = left + 45 + 85 * s_i
        out.append(f'<rect x="{cx - 28}" y="{y(side.ci.hi):.1f}" width="56" '
                   f'height="{max(1.0, y(side.ci.lo) - y(side.ci.hi)):.1f}" fill="{colour}" '
                   'fill-opacity="0.15"/>')
        out.append(f'<line x1="{cx - 30}" x2="{cx + 30}" y1="{y(side.median):.1f}" '
                   f'y2="{y(side.median):.1f}" stroke="{colour}" stroke-width="3"/>')
        n = len(side.values)
        for k, v in enumerate(side.values):
            dx = -22 + 44 * k / max(1, n - 1)
            out.append(f'<circle cx="{cx + dx:.1f}" cy="{y(v):.1f}" r="3" fill="{colour}" '
                       'fill-opacity="0.7"/>')
    return out
