# SPDX-License-Identifier: GPL-2.0
"""An SVG picture of A/B runs: a forest plot of every figure's change, then one
panel per figure with every run a dot.

The forest plot (forest.py) puts the changes side by side on shared axes, with
their intervals and the change of interest, so a -0.19% change looks as small
as it is. Each panel below has its own scale: the dots of a side are spread
sideways by run order, the thick bar is the median and the shaded box its
confidence interval, so overlap (or none) is visible at a glance.

Hand-written SVG, as before: no dependency (matplotlib would be one, for two
kinds of chart), and text output that is the same for the same runs, which a
test can parse. Boxes of text are nested svg elements, which clip and bound it.
"""

from __future__ import annotations

import math
from html import escape

from kloc.bench.forest import (BOLD_EM, CHAR_EM, FONT, axis, fit, fit_chars, forest, label,
                               text, text_width, wrap)
from kloc.bench.metrics import Difference, verdict_words

__all__ = ['render', 'axis', 'text_width', 'fit_chars', 'CHAR_EM', 'BOLD_EM', 'FONT',
           'TITLE_CHARS', 'SUBTITLE_CHARS', 'PANEL_W', 'WIDTH']

PANEL_W, PANEL_H, GAP, MARGIN = 340, 290, 20, 20
WIDTH = 3 * PANEL_W - GAP + 2 * MARGIN        # the picture, whatever the panels
COLOURS = ('#1f77b4', '#d62728')
INNER = PANEL_W - GAP - 4                       # a panel's text, from x = 2
HEADING_H = 17                                  # a line of the picture's title (14 px)

TITLE_CHARS = fit_chars(INNER, bold=True)       # a line of a panel's title
SUBTITLE_CHARS = fit_chars(INNER)               # and of the lines under it


def render(diffs: list[Difference], a: str, b: str, title: str) -> str:
    """The forest plot, then one panel per figure; a and b label the sides."""
    inner = WIDTH - 2 * MARGIN
    heading = wrap(title, inner, size=14)
    y = 24 + HEADING_H * (len(heading) - 1) + 16
    lead, lead_h = forest(diffs, a, b, inner)
    legend, legend_h = _sides(a, b, inner)
    y_sides = y + lead_h + 24
    y_panels = y_sides + legend_h + 8
    height = y_panels + math.ceil(len(diffs) / 3) * PANEL_H + MARGIN
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
           f'font-family="sans-serif" font-size="{FONT}">',
           f'<rect width="{WIDTH}" height="{height:.0f}" fill="white"/>',
           text(MARGIN, 24, heading, size=14),
           f'<svg class="sides" x="{MARGIN}" y="{y_sides:.0f}" width="{inner}" '
           f'height="{legend_h:.0f}">', *legend, '</svg>']
    for i, d in enumerate(diffs):
        out += [f'<svg class="panel" data-figure="{escape(d.figure.name)}" '
                f'x="{MARGIN + (i % 3) * PANEL_W}" '
                f'y="{y_panels + (i // 3) * PANEL_H:.0f}" width="{PANEL_W - GAP}" '
                f'height="{PANEL_H}">', *_panel(d, a, b), '</svg>']
    # Last in the text, first on the page: a reader of the text (tests.test_results)
    # meets the numbers of the panels' axes first, in panel order.
    out += [f'<svg class="forest" x="{MARGIN}" y="{y:.0f}" width="{inner}" '
            f'height="{lead_h:.0f}">', *lead, '</svg>', '</svg>']
    return '\n'.join(out) + '\n'


def _sides(a: str, b: str, width: float) -> tuple[list[str], float]:
    """The key to the panels: which colour is which side, what the marks mean."""
    out, x = ['<g class="legend">'], 0.0
    for side, colour in zip((a, b), COLOURS):
        name = fit(side, width / 4)
        out += [f'<circle cx="{x + 6:.1f}" cy="12" r="4" fill="{colour}"/>',
                text(x + 14, 16, [name])]
        x += 14 + text_width(name) + 20
    key = ('every run a dot; bar: the median, box: its interval; each panel its own scale '
           '(the sizes of the changes are compared above)')
    if x + text_width(key) > width:     # a line of its own
        x, y = 0.0, 34.0
    else:
        y = 16.0
    return out + [text(x, y, [fit(key, width)], attrs=' fill="#555"'), '</g>'], y + 8


def _change(d: Difference) -> str:
    """The change as the report gives it: percent, or for a count near zero its change
    in events a packet (a percent of a near-zero base says nothing)."""
    if d.absolute is not None:
        return f'{d.absolute.change:+.2g}/packet'
    return f'{d.change_pct:+.2f}%' if math.isfinite(d.change_pct) else 'no percent of 0'


def _subtitle(d: Difference) -> str:
    """The change and its p, on one line that fits the panel ("Holm" goes first)."""
    p = f'p={d.p_adjusted:.3g}'
    for holm in (('Holm ' if d.figure.primary else ''), ''):
        line = f'{_change(d)}, {holm}{p}'
        if len(line) <= SUBTITLE_CHARS:
            return line
    return fit(line, INNER)


def _title(d: Difference) -> list[str]:
    """The figure's title and unit in two lines, or its short name where it would not fit."""
    lines = wrap(label(d), INNER, bold=True)
    if lines[-1].endswith('\u2026') and d.figure.short:
        lines = wrap(f'{d.figure.short} ({d.figure.unit})', INNER, bold=True)
    return lines


def _panel(d: Difference, a: str, b: str) -> list[str]:
    """A panel, from (0, 0): title, change, verdict, then the dots on their axis."""
    sides = (d.a, d.b)
    vals = [v for s in sides for v in (*s.values, s.ci.lo, s.ci.hi) if math.isfinite(v)]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 1.0)
    pad = 0.05 * (hi - lo)
    ax = axis(max(0.0, lo - pad) if lo >= 0 else lo - pad, hi + pad)
    top, bottom = 74.0, PANEL_H - 44.0
    left = max(text_width(t) for t in ax.labels) + 8
    colw = (PANEL_W - GAP - 6 - left) / 2

    def y(v: float) -> float:
        return bottom - ax.frac(v) * (bottom - top)

    out = [text(2, 13, _title(d), attrs=' font-weight="bold"'),
           text(2, 46, [_subtitle(d)]),
           text(2, 60, [fit(verdict_words(d, fit(b, INNER - text_width(f' {d.verdict}'))),
                            INNER)]),
           '<g class="axis">',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#888"/>']
    for t, lab in zip(ax.ticks, ax.labels):
        out.append(text(left - 4, y(t) + 4, [lab], 'end', ' class="tick"'))
    out.append('</g>')
    for s_i, (side, name, colour) in enumerate(zip(sides, (a, b), COLOURS)):
        cx = left + colw * (s_i + 0.5)
        box, spread = min(28.0, 0.35 * colw), min(22.0, 0.3 * colw)
        out += [f'<rect x="{cx - box:.1f}" y="{y(side.ci.hi):.1f}" width="{2 * box:.1f}" '
                f'height="{max(1.0, y(side.ci.lo) - y(side.ci.hi)):.1f}" fill="{colour}" '
                'fill-opacity="0.15"/>',
                f'<line x1="{cx - box - 2:.1f}" x2="{cx + box + 2:.1f}" '
                f'y1="{y(side.median):.1f}" y2="{y(side.median):.1f}" stroke="{colour}" '
                'stroke-width="3"/>',
                text(cx, PANEL_H - 24, [fit(name, colw - 4)], 'middle')]
        n = len(side.values)
        for k, v in enumerate(side.values):
            dx = -spread + 2 * spread * k / (n - 1) if n > 1 else 0.0
            out.append(f'<circle cx="{cx + dx:.1f}" cy="{y(v):.1f}" r="3" fill="{colour}" '
                       'fill-opacity="0.7"/>')
    return out
