# SPDX-License-Identifier: GPL-2.0
"""report.html in a real browser: headless Chromium (Debian's chromium) loads the page
and dumps the DOM it built; every part's verdict and every figure row run.json holds
must be in it, with its words.

StoredReport renders data/run.json, a make run's results (see data/README);
MakeTestReport checks make test's own report (KLOC_REPORT_OUT=OUT, set by
tools/make-test.sh's last phase).
"""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

from kloc.bench import plot
from kloc.bench import counted as counted_runs
from kloc.bench.store import open_store
from kloc.its.figures import MSI_TABLES
from kloc.paths import PACKAGE_ROOT
from kloc.review import patch_input, reporting, review
from kloc.trees.sources import Tree
from kloc.version import KernelVersion
from kloc.pages import html as pages_html

from .helpers import DATA, review_2008


def chromium() -> str:
    found = shutil.which('chromium')
    if not found:
        raise unittest.SkipTest('chromium is not installed (Debian: chromium; make deps)')
    return found


def browse(page: Path, *what: str) -> str:
    """Chromium's --dump-dom of page, or with what (e.g. --screenshot=x.png) its output."""
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([chromium(), '--headless', '--no-sandbox', '--disable-gpu',
                            '--hide-scrollbars', f'--user-data-dir={profile}',
                            '--window-size=1366,2000', *(what or ('--dump-dom',)),
                            page.resolve().as_uri()],
                           capture_output=True, text=True, timeout=180)
    if r.returncode != 0:
        raise AssertionError(f'chromium failed ({r.returncode}): {r.stderr[-2000:]}')
    return r.stdout


def text(x: object) -> str:
    """How a text from run.json appears in the DOM Chromium serializes."""
    return html.escape(str(x), quote=False)


class Checks(unittest.TestCase):
    def check_dom(self, doc: dict[str, Any], dom: str) -> int:
        """Every part, verdict and figure row of doc in dom; how many were checked."""
        checked = 0

        def has(needle: str, what: str) -> None:
            nonlocal checked
            self.assertIn(needle, dom, f'{what} is not in the page')
            checked += 1
        for p in doc['parts']:
            has(f'data-part="{text(p["name"])}"', f'part {p["name"]}')
            has(text(p['verdict']), f'the verdict of {p["name"]}')
            has(text(p['command']), f'the command of {p["name"]}')
        res = doc.get('results') or {}
        kunit = res.get('kunit') or {}
        for m in kunit.get('matrix', []):
            has(f'<td>{text(m["kernel"])}</td><td>{text(m["topology"])}</td>',
                f'KUnit row {m["kernel"]} {m["topology"]}')
        for f in kunit.get('failures', []):
            has(f'data-case="{text(f["case"])}"', f'failure {f["case"]}')
        for m in res.get('mutants', []):
            has(f'data-mutant="{text(m["name"])}"', f'mutant {m["name"]}')
        c = res.get('compare')
        if c:
            has(text(c['verdict']), 'the comparison\'s verdict')
            for which in ('figures', 'counted'):
                figs = c['figures'] if which == 'figures' else \
                    (c.get('counted') or {}).get('figures', [])
                for f in figs:
                    has(f'data-figure="{text(f["figure"])}"', f'figure {f["figure"]}')
                    has(text(f['verdict_words']), f'the verdict of {f["figure"]}')
        for it in res.get('its', []):
            has(f'data-topology="{text(it["topology"])}"', f'ITS {it["topology"]}')
            for t in MSI_TABLES:
                has(f'data-table="{t}"', f'ITS table {t}')
        has(text(pages_html.ITS_MODEL) if res.get('its') else '', 'the ITS model label')
        self.assertNotIn('<script', dom)
        return checked


class StoredReport(Checks):
    def test_every_verdict_and_figure_row(self) -> None:
        doc = json.loads((DATA / 'run.json').read_text())
        with tempfile.TemporaryDirectory() as d:
            page = Path(d) / 'report.html'
            page.write_text(pages_html.render(doc))
            dom = browse(page)
            shot = Path(d) / 'report.png'
            browse(page, f'--screenshot={shot}')
            self.assertGreater(shot.stat().st_size, 10_000)
        n = self.check_dom(doc, dom)
        self.assertGreater(n, 50)

    def test_a_planted_script_is_text_and_a_planted_svg_is_refused(self) -> None:
        """run.json and the plot come from OUT, which kloc does not trust."""
        doc = json.loads((DATA / 'run.json').read_text())
        doc['parts'][0]['verdict'] = '<script>alert(1)</script>'
        with tempfile.TemporaryDirectory() as d:
            svg = Path(d) / 'compare.svg'
            svg.write_text('<svg xmlns="http://www.w3.org/2000/svg"><rect onload="alert(1)"/>'
                           '</svg>')
            compare = doc['results'].get('compare') or {'verdict': '', 'figures': []}
            doc['results']['compare'] = dict(compare, svg_file=str(svg))
            page = Path(d) / 'report.html'
            page.write_text(pages_html.render(doc))
            dom = browse(page)
        self.assertNotIn('<script', dom)
        self.assertIn('&lt;script&gt;alert(1)&lt;/script&gt;', dom)
        self.assertNotIn('onload', dom)


class Plot(unittest.TestCase):
    def test_kloc_plots_are_embedded(self) -> None:
        """The forest plot kloc draws passes the filter that refuses a planted one."""
        diffs, doc = review_2008()
        with tempfile.TemporaryDirectory() as d:
            svg = Path(d) / 'review.svg'
            svg.write_text(plot.render(diffs, 'base', 'patched', 'the 2008 layout'))
            embedded = pages_html.safe_svg(svg)
        self.assertIsNotNone(embedded)
        assert embedded is not None
        self.assertIn('fcontended_pkt_all', embedded)


class ReviewReport(unittest.TestCase):
    def test_the_reviews_own_page(self) -> None:
        """make review's report.html: its verdict, KUnit's changes, every figure row."""
        counted, doc = review_2008()
        base = Tree(Path('/t/linux-7.2/src'), KernelVersion(7, 2, 13), 'debian')
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(Path(tmp) / 'counted.jsonl', {'test': '2008'})
            o = review.ReviewOutcome(
                base, base, patch_input.load(PACKAGE_ROOT / 'selftests/lo_counters/review/'
                                             'packed-lstats-2008.patch'),
                kunit_changes=[review.StatusChange('arm64_2n_its1', 'a.b.c', 'PASS', 'FAIL')],
                kunit_totals={'base': {'PASS': 3}, 'patched': {'PASS': 2, 'FAIL': 1}},
                counted=counted_runs.CountedResult(5, counted, store,
                                                   doc['contended_lines']))
            opts = review.ReviewOptions(('arm64_2n_its1',), 'x86_64_2n', 10, 1.0, 0.05, 60,
                                        2, Path(tmp), counted=5, bench=False)
            rj = reporting.to_json(o, opts)
            page = Path(tmp) / 'report.html'
            page.write_text(pages_html.render_review(rj, None))
            dom = browse(page)
        self.assertIn(text(rj['verdict']), dom)
        self.assertIn('data-case="a.b.c"', dom)
        counted_doc = rj['counted']
        assert isinstance(counted_doc, dict)
        for f in counted_doc['figures']:
            self.assertIn(f'data-figure="{f["figure"]}"', dom)
            self.assertIn(text(f['verdict_words']), dom)
        self.assertIn('loopback_xmit', dom)


class MakeTestReport(Checks):
    def test_make_tests_own_report(self) -> None:
        out = os.environ.get('KLOC_REPORT_OUT')
        if out is None:
            self.skipTest('KLOC_REPORT_OUT= names make test\'s OUT (tools/make-test.sh)')
        # set, it must name a report: make test's phase must not pass by skipping
        self.assertTrue(out and (Path(out) / 'run.json').is_file(),
                        f'KLOC_REPORT_OUT={out!r} holds no run.json')
        doc = json.loads((Path(out) / 'run.json').read_text())
        dom = browse(Path(out) / 'report.html')
        n = self.check_dom(doc, dom)
        browse(Path(out) / 'report.html', f'--screenshot={Path(out) / "report.png"}')
        print(f'report.html: {n} parts, verdicts and rows found in Chromium\'s DOM; '
              f'screenshot {Path(out) / "report.png"}')


class MakeTestReportOut(unittest.TestCase):
    def test_an_empty_or_wrong_out_fails_not_skips(self) -> None:
        """make test's phase set KLOC_REPORT_OUT to '' (a relative OUT resolved after
        cd tools) and passed with the test skipped; set, a wrong one now fails."""
        for value in ('', '/nonexistent/kloc-report'):
            with self.subTest(value=value):
                r = subprocess.run([sys.executable, '-m', 'unittest',
                                    'tests.test_report_html.MakeTestReport'],
                                   cwd=PACKAGE_ROOT / 'tools', capture_output=True, text=True,
                                   env={**os.environ, 'KLOC_REPORT_OUT': value}, timeout=120)
                self.assertNotEqual(r.returncode, 0, r.stderr)
                self.assertIn('holds no run.json', r.stderr)


if __name__ == '__main__':
    unittest.main()
