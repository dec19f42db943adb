# SPDX-License-Identifier: GPL-2.0
"""The A/B picture (issue 25, item 5): a forest plot of every figure's change, then
the per-figure dot strips, with tick labels that differ and text that fits."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

from kloc.bench import metrics, plot
from kloc.counting.counts import FIGURES

SVG = '{http://www.w3.org/2000/svg}'
A, B = 'base', 'patched'


def _figures() -> tuple[list[str], list[str]]:
    """The counted figures metrics.compare takes (metrics.COUNTED, in the order of
    counts.FIGURES), judged in percent and those judged in events a packet near
    zero, primary ones first: whatever they are today."""
    figs = sorted((metrics.describe(n) for n in metrics.COUNTED if n in FIGURES),
                  key=lambda f: not f.primary)
    pct = [f.name for f in figs if not f.abs_interest]
    near = [f.name for f in figs if f.abs_interest]
    assert pct and near, f'no counted figures in percent and near zero: {figs}'
    return pct, near


def _counted(name: str, xa: list[float], xb: list[float]) -> metrics.Difference:
    """The Difference metrics.compare makes of these runs of one counted figure."""
    def records(xs: list[float]) -> list[dict[str, object]]:
        return [{'counted': {name: x}} for x in xs]
    (d,) = metrics.compare(records(xa), records(xb), 0.05, kind='counted')
    return d


def counted_diffs() -> list[metrics.Difference]:
    """Instructions around 6,490, -0.19% at a CV of 0.1%; a count near zero (0.002 to
    0.006 a packet); a figure whose runs are all alike; 0 -> 1.2 a packet."""
    pct, near = _figures()
    insns = [6490 * (1 + 0.001 * z) for z in (-1.0, 0.0, 1.0)]
    return [_counted(pct[0], insns, [v * (1 - 0.0019) for v in insns]),
            _counted(near[-1], [0.002, 0.004, 0.006], [0.003, 0.005, 0.004]),
            _counted(pct[-1], [7000.0] * 3, [7000.0] * 3),
            _counted(near[0], [0.0] * 3, [1.1, 1.2, 1.3])]


def timed_diffs() -> list[metrics.Difference]:
    """Packets/s (tens of thousands), 5% fewer on B."""
    def runs(scale: float, seed: int) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for i in range(7):
            z = ((i * 7 + seed) % 5 - 2) / 200
            out.append({n: v * (1 + z) for n, v in
                        (('pps_single', 8e4 * scale), ('pps_total', 1.4e5),
                         ('scaling_efficiency', 1.4e5 / (4 * 8e4 * scale)))})
        return out
    return metrics.compare(runs(1.0, 1), runs(0.95, 3), 0.05)


def _texts(root: ET.Element) -> list[tuple[ET.Element, ET.Element, list[str]]]:
    """Every text, its nearest enclosing svg, and its lines (the text, then its tspans)."""
    out = []

    def walk(e: ET.Element, box: ET.Element) -> None:
        for c in e:
            if c.tag == SVG + 'text':
                out.append((c, box, [c.text or ''] + [t.text or '' for t in c]))
            walk(c, c if c.tag == SVG + 'svg' else box)
    walk(root, root)
    return out


class Picture(unittest.TestCase):
    def setUp(self) -> None:
        self.diffs = counted_diffs()
        self.every = timed_diffs() + self.diffs
        self.svg = plot.render(self.every, A, B, 'base vs patched <a test>, 7 timed runs a side')
        self.root = ET.fromstring(self.svg)

    def test_the_builder_gives_the_cases(self) -> None:
        """The figures are what the tests claim: -0.19%, one near zero, one
        significant change of 1.2 a packet."""
        insns, small, flat, big = self.diffs
        self.assertAlmostEqual(insns.change_pct, -0.19, places=2)
        self.assertIsNone(insns.absolute)
        self.assertIsNotNone(small.absolute)
        self.assertEqual(flat.a.values, flat.b.values)
        self.assertEqual(big.significant, big.figure.primary)   # a detail is not tested
        self.assertTrue(any(d.significant for d in self.every))
        self.assertAlmostEqual(big.absolute.change if big.absolute else 0, 1.2)

    def test_tick_labels_differ_on_every_axis(self) -> None:
        axes = self.root.iter(SVG + 'g')
        labels = [[t.text or '' for t in g.iter(SVG + 'text')] for g in axes
                  if g.get('class') == 'axis']
        self.assertEqual(len(labels), len(self.every) + 2)     # panels, forest's two
        for ticks in labels:
            self.assertEqual(len(set(ticks)), len(ticks), ticks)
            self.assertFalse([t for t in ticks if t.strip('+-0.k%') == '' and t != '0'
                              and t != '0%'], ticks)

    def test_a_tiny_spread_of_thousands_shows_its_digits(self) -> None:
        """6,477 to 6,497 instructions: ticks a few apart, in full (not 6.5k)."""
        name = self.diffs[0].figure.name
        panel = [p for p in self.root.iter(SVG + 'svg') if p.get('data-figure') == name]
        ticks = [t.text or '' for t in panel[0].iter(SVG + 'text') if t.get('class') == 'tick']
        values = [float(t.replace(',', '')) for t in ticks]
        self.assertTrue(all(',' in t and not t.endswith('k') for t in ticks), ticks)
        self.assertLess(values[-1] - values[0], 100, ticks)

    def test_text_fits_its_box(self) -> None:
        """No title, label or tick is estimated wider than its panel, cell or picture."""
        for t, box, lines in _texts(self.root):
            width = float(box.get('width', '0'))
            size = float(t.get('font-size', self.root.get('font-size', '11')))
            bold = t.get('font-weight') == 'bold'
            x = float(t.get('x', '0'))
            for line in lines:
                w = plot.text_width(line, size, bold)
                start = {'start': x, 'middle': x - w / 2, 'end': x - w}[
                    t.get('text-anchor', 'start')]
                self.assertGreaterEqual(start, 0, line)
                self.assertLessEqual(start + w, width, (line, box.get('class')))
            self.assertLessEqual(len(lines), 2, lines)

    def test_forest_ticks_do_not_overlap(self) -> None:
        forest = [s for s in self.root.iter(SVG + 'svg') if s.get('class') == 'forest'][0]
        for g in forest.iter(SVG + 'g'):
            if g.get('class') == 'axis':
                ticks = [(float(t.get('x', '0')), plot.text_width(t.text or ''))
                         for t in g.iter(SVG + 'text')]
                for (x1, w1), (x2, w2) in zip(ticks, ticks[1:]):
                    self.assertLess(x1 + w1 / 2 + 4, x2 - w2 / 2, ticks)

    def test_one_forest_row_per_figure(self) -> None:
        rows = [g.get('data-figure') for g in self.root.iter(SVG + 'g')
                if g.get('class') == 'row']
        self.assertEqual(rows, [d.figure.name for d in self.every
                                if d.absolute is None] +
                         [d.figure.name for d in self.every if d.absolute is not None])
        marks = [r.get('class') for r in self.root.iter(SVG + 'rect')
                 if (r.get('class') or '').startswith('mark')]
        self.assertEqual(marks.count('mark filled') - 1,      # less the legend's
                         sum(d.significant for d in self.every))

    def test_the_legend_names_the_sides(self) -> None:
        legend = ' '.join(line for g in self.root.iter(SVG + 'g') if g.get('class') == 'legend'
                          for t in g.iter(SVG + 'text') for line in t.itertext())
        self.assertIn(f'{B} vs {A}', legend)
        self.assertIn(A, legend.replace(f'{B} vs {A}', ''))
        self.assertNotIn('B higher', self.svg)
        self.assertNotIn('B lower', self.svg)
        self.assertNotIn('nan', self.svg)

    def test_it_renders(self) -> None:
        """rsvg-convert (librsvg2-bin), where installed, makes a PNG of it."""
        tool = shutil.which('rsvg-convert')
        if tool is None:
            self.skipTest('rsvg-convert is not installed (Debian: librsvg2-bin)')
        with tempfile.TemporaryDirectory() as tmp:
            svg, png = Path(tmp) / 'p.svg', Path(tmp) / 'p.png'
            svg.write_text(self.svg)
            subprocess.run([tool, '-o', str(png), str(svg)], check=True, timeout=60,
                           capture_output=True)
            self.assertEqual(png.read_bytes()[:8], b'\x89PNG\r\n\x1a\n')


class Edges(unittest.TestCase):
    def test_a_percent_of_zero_and_no_figures(self) -> None:
        """A base median of 0 in a figure judged in percent: a row, no 'nan'; and no
        figures at all is a picture too."""
        pct, _ = _figures()
        d = _counted(pct[0], [0.0] * 3, [1.0, 2.0, 3.0])
        cases: list[list[metrics.Difference]] = [[d], []]
        for diffs in cases:
            svg = plot.render(diffs, A, B, 't')
            self.assertNotIn('nan', svg)
            rows = [g for g in ET.fromstring(svg).iter(SVG + 'g') if g.get('class') == 'row']
            self.assertEqual(len(rows), len(diffs))


class Axes(unittest.TestCase):
    def test_labels_differ_at_any_scale(self) -> None:
        for lo, hi in ((6487.3, 6492.1), (-0.003, 0.0002), (0.002, 0.006), (7e4, 9.1e4),
                       (1.2e6, 1.2e6 + 3), (-0.19, 3.6), (0, 0), (7000, 7000), (-5, -5)):
            ax = plot.axis(lo, hi)
            self.assertEqual(len(set(ax.labels)), len(ax.labels), (lo, hi, ax.labels))
            self.assertLessEqual(ax.ticks[0], lo)
            self.assertGreaterEqual(ax.ticks[-1], hi)
            if lo >= 0:
                self.assertGreaterEqual(ax.ticks[0], 0, (lo, hi, ax.ticks))

    def test_no_spread_is_a_sane_axis(self) -> None:
        ax = plot.axis(7000.0, 7000.0)
        self.assertEqual(ax.labels, ('6,900', '6,950', '7,000', '7,050', '7,100'))


if __name__ == '__main__':
    unittest.main()
