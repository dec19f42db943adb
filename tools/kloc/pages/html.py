# SPDX-License-Identifier: GPL-2.0
"""report.html from run.json: one self-contained page (inline CSS and SVG, no script,
nothing fetched), readable on a laptop screen and printable.

Every text from run.json is escaped; the one SVG taken from OUT (the comparison's
plot) is embedded only if it parses as XML made of drawing elements alone, with no
event attribute or link, else it is named, not shown.
"""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from kloc.its.figures import ABOUT as ITS_ABOUT, MSI_TABLES
from kloc.pages.built import summary as built_summary

# What each judged figure stands for, and what it cannot say.
MEANS = {
    'insns_pkt_single': 'Instructions the guest ran per datagram, one sender thread, '
    'counted by QEMU\'s plugin under icount: path length, not time (no stalls, no '
    'miss latency, no lock waits).',
    'insns_pkt_all': 'The same with one sender thread per CPU.',
    'fcontended_pkt_all': 'Accesses per datagram to a cache line another CPU stores to in '
    'the same window, their bytes apart (false sharing): what would move the line on '
    'hardware if the CPUs ran interleaved access by access. Counted from QEMU\'s access '
    'stream; not a measured HITM.',
    'fsharing_pkt_all': 'Transfers of falsely shared lines between the modelled per-CPU '
    'caches, in the order QEMU ran the vCPUs (one host thread): they depend on where '
    'QEMU switches vCPUs. A model, not hardware.',
    'pps_single': 'Datagrams per second of wall clock, one thread, in an emulated guest '
    '(TCG): the speed of emulation, shown, not judged where counts are.',
    'pps_total': 'The same with one thread per CPU, summed.',
    'scaling_efficiency': 'All CPUs\' datagrams per second over N times one thread\'s.',
}
ITS_MODEL = ('Exact counts of QEMU\'s ITS model, which caches nothing: upper bounds of a '
             'real ITS\'s table traffic, which caches translations. Local and remote are '
             'to the ITS\'s NUMA node. Any time put on them is a model (ITS_REMOTE_NS), '
             'not a measurement.')

_SVG_TAGS = {'svg', 'g', 'rect', 'line', 'text', 'tspan', 'path', 'circle', 'polyline',
             'polygon', 'title', 'desc', 'ellipse'}
_NS = '{http://www.w3.org/2000/svg}'

CSS = '''
body { font: 15px/1.45 sans-serif; max-width: 75em; margin: 1em auto; padding: 0 1em;
  color: #111; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em;
  border-bottom: 1px solid #bbb; }
table { border-collapse: collapse; margin: .5em 0; font-size: .92em; }
td:first-child { white-space: nowrap; }
th, td { border: 1px solid #ccc; padding: .2em .45em; text-align: left;
  vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.pass { background: #e3f4e1; } .fail { background: #f9dcdc; } .known { background: #fdf0cf; }
.skip { background: #eee; }
pre { background: #f6f6f6; padding: .4em; font-size: .85em; white-space: pre-wrap;
  word-break: break-all; margin: .2em 0 .8em; }
code { font-size: .9em; } .note { color: #444; font-size: .9em; }
svg { max-width: 100%; height: auto; }
@media print { body { max-width: none; font-size: 11pt; } h2 { break-after: avoid; }
  table, pre, svg { break-inside: avoid; } }
'''


def e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _num(x: object, fmt: str = '.4g') -> str:
    return format(x, fmt) if isinstance(x, (int, float)) and not isinstance(x, bool) \
        else '-'


def safe_svg(path: Path) -> str | None:
    """The SVG, re-serialized, if it is drawing alone; None otherwise."""
    try:
        root = ET.fromstring(path.read_bytes())
    except (OSError, ET.ParseError):
        return None
    for el in root.iter():
        tag = el.tag.removeprefix(_NS) if isinstance(el.tag, str) else ''
        if tag not in _SVG_TAGS:
            return None
        if any(k.lower().startswith('on') or 'href' in k.lower() for k in el.attrib):
            return None
    ET.register_namespace('', _NS[1:-1])
    return ET.tostring(root, encoding='unicode')


def _parts(doc: dict[str, Any]) -> list[str]:
    rows = ['<table id="parts"><tr><th>part</th><th>result</th><th>verdict</th>'
            '<th>time</th><th>kernels</th></tr>']
    for p in doc.get('parts', []):
        cls = 'pass' if p.get('ok') else 'fail'
        rebuilt = built_summary(p.get('built'))
        title = '' if p.get('title') in (None, p.get('name')) else \
            f'<br><span class="note">{e(p.get("title"))}</span>'
        rows.append(f'<tr class="{cls}" data-part="{e(p.get("name"))}"><td>{e(p.get("name"))}'
                    f'{title}</td>'
                    f'<td>{"PASS" if p.get("ok") else "FAIL"}</td><td>{e(p.get("verdict"))}'
                    f'</td><td class="num">{_num(p.get("seconds"), ".0f")} s</td>'
                    f'<td>{e(rebuilt)}</td></tr>')
    return rows + ['</table>']


def _kunit(k: dict[str, Any]) -> list[str]:
    if k.get('error'):
        return [f'<p class="fail">{e(k["error"])}</p>']
    matrix = k.get('matrix', [])
    suites = sorted({s['suite'] for m in matrix for s in m.get('suites', [])})
    out = ['<table id="kunit-matrix"><tr><th>kernel</th><th>topology</th>'
           + ''.join(f'<th>{e(s)}</th>' for s in suites) + '</tr>']
    known_cases = {(f['kernel'], f['topology'], f['case'].split('.')[0])
                   for f in k.get('failures', []) if f.get('known')}
    for m in matrix:
        by = {s['suite']: s['counts'] for s in m.get('suites', [])}
        cells = []
        for s in suites:
            c = by.get(s)
            if c is None:
                cells.append('<td class="skip">-</td>' if m.get('booted') else
                             '<td class="fail">no KTAP</td>')
                continue
            bad = c.get('FAIL', 0) + c.get('CRASHED', 0)
            cls = 'pass' if not bad else \
                ('known' if (m['kernel'], m['topology'], s) in known_cases else 'fail')
            cells.append(f'<td class="{cls} num">{c.get("PASS", 0)} pass'
                         + (f', {bad} fail' if bad else '')
                         + (f', {c["SKIP"]} skip' if c.get('SKIP') else '') + '</td>')
        out.append(f'<tr><td>{e(m["kernel"])}</td><td>{e(m["topology"])}</td>'
                   + ''.join(cells) + '</tr>')
    out.append('</table>')
    fails = k.get('failures', [])
    if fails:
        out.append(f'<h3>Failures ({k.get("failures_total", len(fails))}; known upstream ones '
                   'marked)</h3>')
    for f in fails:         # a known one in a line; any other with its console
        head = (f'<b>{e(f["status"])}</b> {e(f["kernel"])} {e(f["topology"])} '
                f'<code>{e(f["case"])}</code>')
        if f.get('known'):
            out.append(f'<p class="failure known" data-case="{e(f["case"])}">{head} '
                       f'(known upstream: {e(f["known"])})</p>')
        else:
            out.append(f'<p class="failure" data-case="{e(f["case"])}">{head}</p>'
                       f'<pre>{e(chr(10).join(f.get("excerpt", [])))}</pre>')
    return out


def _mutants(ms: list[dict[str, Any]]) -> list[str]:
    if not ms:
        return ['<p>No mutant results.</p>']
    out = ['<table id="mutants"><tr><th>kernel</th><th>mutant</th><th>verdict</th>'
           '<th>caught by</th></tr>']
    for m in ms:
        ok = m.get('verdict') == ('passes' if m.get('pristine') else 'caught')
        out.append(f'<tr class="{"pass" if ok else "fail"}" data-mutant="{e(m.get("name"))}">'
                   f'<td>{e(m.get("kernel"))}</td><td>{e(m.get("name"))}<br>'
                   f'<span class="note">{e(m.get("about", ""))}</span></td>'
                   f'<td>{e(m.get("verdict"))}</td>'
                   f'<td>{"<br>".join(e(c) for c in (m.get("failed_cases") or [])[:4])}</td>'
                   '</tr>')
    return out + ['</table>']


def _figures(figs: list[dict[str, Any]], a: str, b: str, which: str) -> list[str]:
    out = [f'<table class="figures" id="{which}"><tr><th>figure</th><th>what it stands '
           f'for</th><th>{e(a)}</th><th>{e(b)}</th><th>change</th><th>Holm p</th>'
           '<th>verdict</th></tr>']
    for f in figs:
        name = f.get('figure', '')
        ca = f.get(a) or {}
        cb = f.get(b) or {}
        if f.get('change_abs'):         # a count near zero: judged in its unit
            change = f'{f["change_abs"]["change_of_means"]:+.3g}/packet'
        elif isinstance(f.get('change_pct'), float):
            change = f'{f["change_pct"]:+.2f}%'
        else:
            change = '-'
        cls = 'fail' if str(f.get('verdict', '')).startswith(f'{b} ') else ''
        out.append(f'<tr class="{cls}" data-figure="{e(name)}"><td>{e(f.get("title"))}'
                   f'<br><span class="note">{e(f.get("unit"))}</span></td>'
                   f'<td class="note">{e(MEANS.get(name, "a detail, shown, not judged"))}</td>'
                   f'<td class="num">{_num(ca.get("median"))}</td>'
                   f'<td class="num">{_num(cb.get("median"))}</td>'
                   f'<td class="num">{e(change)}</td>'
                   f'<td class="num">{_num(f.get("p_holm"), ".3g")}</td>'
                   f'<td>{e(f.get("verdict_words"))}</td></tr>')
    return out + ['</table>']


def _contended(counted: dict[str, Any]) -> list[str]:
    """Each side's table of the most contended cache lines, as the report has them."""
    return [f'<p>Most contended cache lines, {e(side)}:</p><pre>{e(table)}</pre>'
            for side, table in (counted.get('contended_lines') or {}).items()]


def _compare(c: dict[str, Any] | None) -> list[str]:
    if not c:
        return ['<p>No comparison results.</p>']
    key = c.get('key') or {}
    a, b = str(key.get('a', 'slub')), str(key.get('b', 'slab'))
    out = [f'<p id="compare-verdict"><b>Verdict ({e(b)} against {e(a)}):</b> '
           f'{e(c.get("verdict"))}</p>',
           f'<p class="note">{e(key.get("tree", ""))}, topology {e(key.get("topology", ""))}; '
           f'QEMU: {e((c.get("qemu") or {}).get("version", key.get("qemu", "")))}</p>']
    svg = safe_svg(Path(c['svg_file'])) if c.get('svg_file') else None
    out.append(svg if svg else f'<p class="note">The plot: {e(c.get("svg_file"))}</p>')
    counted = c.get('counted') or {}
    if counted:
        out.append(f'<h3>Counted: {e(counted.get("runs_per_side"))} boots a side under the '
                   'plugin (these judge)</h3>')
        out += _figures(counted.get('figures', []), a, b, 'compare-counted')
        out += _contended(counted)
    out.append(f'<h3>Timed: {e(c.get("runs_per_side"))} runs a side (shown)</h3>')
    out += _figures(c.get('figures', []), a, b, 'compare-timed')
    return out


def _its(items: list[dict[str, Any]]) -> list[str]:
    if not items:
        return ['<p>No ITS results.</p>']
    out = [f'<p class="note">{e(ITS_MODEL)}</p>']
    for it in items:
        doc = it.get('figures') or {}
        boots = doc.get('boots') or [{}]
        first = boots[0] if isinstance(boots[0], dict) else {}
        per = first.get('per_interrupt') or {}
        out.append(f'<h3>{e(it.get("topology"))} ({e(it.get("guest"))}; ITS on node '
                   f'{e(first.get("its_node"))}; {len(boots)} boots'
                   f'{", alike" if doc.get("agree") else ", which differ: the first shown"})'
                   '</h3>')
        out.append(f'<table class="its" data-topology="{e(it.get("topology"))}"><tr><th>table'
                   '</th><th>local reads per interrupt</th><th>remote reads per interrupt</th>'
                   '</tr>')
        for t in MSI_TABLES:
            r = per.get(t) or {}
            out.append(f'<tr data-table="{e(t)}"><td>{e(ITS_ABOUT.get(t, t))}</td>'
                       f'<td class="num">{_num(r.get("local"))}</td>'
                       f'<td class="num">{_num(r.get("remote"))}</td></tr>')
        out.append('</table>')
    return out


def _page(title: str, body: list[str]) -> str:
    """One self-contained HTML page: the style inline, no script."""
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{e(title)}</title><style>{CSS}</style></head><body>\n'
            + '\n'.join(body) + '\n</body></html>\n')


def render(doc: dict[str, Any]) -> str:
    res = doc.get('results') or {}
    machine = doc.get('machine') or {}
    ok = doc.get('ok')
    title = str(doc.get('title', 'make run'))
    body = [f'<h1>kloc: {e(title)}, {"PASS" if ok else "FAIL"}</h1>',
            f'<p>Tree {e(doc.get("tree"))}; {e(doc.get("qemu"))}; ran on {e(machine.get("host"))}'
            f' ({e(machine.get("arch"))}, {e(machine.get("cpus"))} CPUs, Linux '
            f'{e(machine.get("kernel"))}).</p>',
            '<h2>Parts</h2>', *_parts(doc),
            '<h2>KUnit: kernel x topology x suite</h2>', *_kunit(res.get('kunit') or {}),
            '<h2>Mutants: each kernel with a bug brought back must be caught</h2>',
            *_mutants(res.get('mutants') or []),
            '<h2>SLUB against SLAB (loopback, percpu counters)</h2>',
            *_compare(res.get('compare')),
            '<h2>The ITS interrupt path: table reads per interrupt</h2>',
            *_its(res.get('its') or []),
            '<h2>To reproduce each part</h2>', '<table id="commands">']
    for p in doc.get('parts', []):
        body.append(f'<tr><td>{e(p.get("name"))}</td><td><code>{e(p.get("command"))}</code>'
                    f'</td><td>{e(p.get("details"))}</td></tr>')
    body.append('</table>')
    return _page(f'kloc {title}', body)


def render_review(doc: dict[str, Any], svg: Path | None) -> str:
    """make review's report.html, from its review.json (and its plot, svg)."""
    patch = doc.get('patch') or {}
    subject = patch.get('subject') or ('A/A: the base kernel against itself'
                                       if doc.get('aa') else '')
    base = doc.get('base') or {}
    body = [f'<h1>kloc review: {e(subject)}</h1>',
            f'<p id="review-verdict"><b>Verdict:</b> {e(doc.get("verdict"))}</p>',
            f'<p class="note">Base: Linux {e(base.get("version"))} ({e(base.get("tree"))});'
            f' patch {e(patch.get("file", "none"))}</p>']
    kunit = doc.get('kunit') or {}
    changes = kunit.get('changes') or []
    if doc.get('kunit'):
        body.append(f'<h2>KUnit status changes ({len(changes)})</h2>')
        body.append('<table id="kunit-changes"><tr><th>topology</th><th>case</th>'
                    '<th>base</th><th>patched</th></tr>')
        body += [f'<tr data-case="{e(c.get("case"))}"><td>{e(c.get("topology"))}</td>'
                 f'<td><code>{e(c.get("case"))}</code></td><td>{e(c.get("base"))}</td>'
                 f'<td>{e(c.get("patched"))}</td></tr>' for c in changes]
        body.append('</table>')
    plot = safe_svg(svg) if svg and svg.is_file() else None
    if plot:
        body.append(plot)
    counted = doc.get('counted') or {}
    if counted:
        body.append(f'<h2>Counted: {e(counted.get("runs_per_side"))} boots a side '
                    '(these judge)</h2>')
        body += _figures(counted.get('figures', []), 'base', 'patched', 'review-counted')
        body += _contended(counted)
    loop = doc.get('loopback') or {}
    if loop.get('skipped'):
        body.append(f'<p id="loopback-skipped">Loopback benchmark: not run: '
                    f'{e(loop["skipped"])}</p>')
    elif loop and not loop.get('runs_per_side'):
        body.append(f'<p id="loopback-untimed">Timed runs: {e(loop.get("timed", "none"))}'
                    '</p>')
    elif loop:
        body.append(f'<h2>Timed: {e(loop.get("runs_per_side"))} runs a side (shown)</h2>')
        body += _figures(loop.get('figures', []), 'base', 'patched', 'review-timed')
        q = loop.get('qemu') or {}
        body.append(f'<p class="note">QEMU: {e(q.get("version", ""))} '
                    f'{e(q.get("binary", ""))}</p>')
    if doc.get('its'):
        body.append(f'<h2>The ITS interrupt path</h2><p class="note">{e(ITS_MODEL)}</p>'
                    f'<pre>{e(json.dumps(doc["its"].get("topologies"), indent=1))}</pre>')
    return _page('kloc review', body)
