# SPDX-License-Identifier: GPL-2.0
"""make bisect's findings: bisect.json (every step), report.txt (a mail in the
manner of the LKP robot's: each first bad commit, what moved at it against
its parent, the contended lines or the failure, the command that reproduces
it) and report.html (the same, one self-contained page)."""

from __future__ import annotations

import dataclasses
import html
import re
import shlex
import textwrap
from pathlib import Path

from kloc.bench import metrics
from kloc.bisect.gitread import Commit
from kloc.bisect.run import Bisect
from kloc.bisect.search import Search
from kloc.bisect.judge import Signal
from kloc.kunitpy import runner

WIDTH = 72
# KUnit's own lines around a failed expectation: the case's messages are the rest
_BOILERPLATE = re.compile(r'^(# |Expected |\w+ == |ok |not ok |KTAP )')


@dataclasses.dataclass(frozen=True)
class Finding:
    signal: Signal
    result: str                     # 'found', 'unclean', 'skipped'
    first_bad: Commit | None
    parent: Commit | None           # the first bad commit's parent (GOOD if it is first)
    candidates: tuple[Commit, ...]  # 'skipped': where the first bad commit can be
    unclean_at: Commit | None
    steps: tuple[tuple[str, str], ...]   # (sha, outcome) in the order tested


def findings(b: Bisect) -> list[Finding]:
    out = []
    commits = b.c.commits
    for sig in b.signals:
        s: Search = b.searches[sig.key]
        first = commits[s.hi] if s.result == 'found' else None
        parent = None
        if first is not None:
            parent = commits[s.hi - 1] if s.hi > 0 else b.c.good
        out.append(Finding(
            sig, s.result, first, parent,
            tuple(commits[i] for i in s.candidates()) if s.result == 'skipped' else (),
            commits[s.unclean] if s.unclean is not None else None,
            tuple((commits[i].sha, o) for i, o in s.steps)))
    return out


def command(b: Bisect, given_good: str, given_bad: str) -> str:
    s = b.s
    words = ['make', 'bisect', f'KDIR={s.kdir}', f'GOOD={given_good}', f'BAD={given_bad}']
    if s.topologies:
        words.append(f'TOPOLOGIES={",".join(s.topologies)}')
    else:
        words.append('KUNIT=0')
    if s.counted:
        words += [f'TOPOLOGY={s.topology}', f'COUNTED={s.counted}']
    else:
        words.append('BENCH=0')
    return ' '.join(shlex.quote(w) for w in words)


def _name(sig: Signal) -> str:
    if sig.kind == 'kunit':
        return f'KUnit {sig.name} on {sig.topology}'
    return f'{metrics.describe(sig.name).title} on {sig.topology} (counted)'


def _value(b: Bisect, sha: str, name: str) -> tuple[float, float, float] | None:
    """A figure's median at a commit, and its interval: GOOD's and BAD's from the ends'
    comparison, a step's from its comparison with GOOD."""
    ends = b.ends_counted.get('figures')
    if isinstance(ends, dict) and name in ends:
        f = ends[name]
        if sha == b.c.good.sha:
            return f['a'], f['a_lo'], f['a_hi']
        if sha == b.c.bad.sha:
            return f['b'], f['b_lo'], f['b_hi']
    m = b.measured.get(sha)
    if m is None or name not in m.figures.get('vs_good', {}):
        return None
    f = m.figures['vs_good'][name]
    return f['b'], f['b_lo'], f['b_hi']


def _excerpt(b: Bisect, sig: Signal, sha: str, most: int = 6) -> list[str]:
    """The failing case's own messages at sha (its log less KUnit's expectation
    boilerplate), from its KUnit run."""
    m = b.measured.get(sha) or (b.ends['bad'] if sha == b.c.bad.sha else None)
    if m is None or not m.kunit_dir:
        return []
    for meta in sorted(Path(m.kunit_dir).glob('*.meta.json')):
        r = runner.load_run(meta)
        if r.topology != sig.topology or not r.doc.found:
            continue
        for suite in r.doc.suites:
            for path, leaf in suite.leaves():
                if path == sig.name:
                    # from the first failed expectation on: what the boot printed
                    # before it (the probe's own lines) is not the failure
                    log = [x.strip() for x in leaf.log]
                    first = next((k for k, x in enumerate(log)
                                  if 'EXPECTATION FAILED' in x), 0)
                    said = [x for x in log[first:] if x and not _BOILERPLATE.match(x)]
                    return said[:most] + ([f'(+{len(said) - most} more)']
                                          if len(said) > most else [])
    return []


def _wrap(text: str, indent: str = '  ') -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + '  ')


def finding_lines(b: Bisect, f: Finding) -> list[str]:
    sig = f.signal
    out = [_name(sig)]
    out += _wrap(f'GOOD {b.c.good.short}: {sig.good}; BAD {b.c.bad.short}: {sig.bad}')
    if f.result == 'found' and f.first_bad is not None and f.parent is not None:
        out += _wrap(f'first bad commit: {f.first_bad.short} ("{f.first_bad.subject}")')
        if sig.kind == 'kunit':
            out += _wrap(f'PASS at its parent {f.parent.short}, '
                         f'{_status(b, f.first_bad.sha, sig)} at it')
            ex = _excerpt(b, sig, f.first_bad.sha)
            if ex:
                out += ['  the failure at it:']
                for x in ex:
                    out += _wrap(x, '    ')
        else:
            at, was = _value(b, f.first_bad.sha, sig.name), _value(b, f.parent.sha, sig.name)
            if at and was:
                what = 'a regression' if sig.worse else 'an improvement'
                out += _wrap(f'{was[0]:.4g} at its parent {f.parent.short} (interval '
                             f'{was[1]:.4g} to {was[2]:.4g}), {at[0]:.4g} at it ({at[1]:.4g} '
                             f'to {at[2]:.4g}): {what}')
            m = b.measured.get(f.first_bad.sha)
            table = m.attribution if m else ''
            if table:
                out += ['  most contended cache lines at it (one thread per CPU):']
                out += [f'    {x}' for x in table.splitlines()]
    elif f.result == 'skipped':
        out += _wrap('does not bisect cleanly: the first bad commit is one of '
                     + ', '.join(c.short for c in f.candidates)
                     + ', and those before the last could not be tested (skipped)')
    else:
        assert f.unclean_at is not None
        out += _wrap(f'does not bisect cleanly: at {f.unclean_at.short} '
                     f'("{f.unclean_at.subject}") it is neither as at GOOD nor as at BAD '
                     f'({_at(b, f.unclean_at.sha, sig)}); not forced')
    out += _wrap('steps: ' + ', '.join(f'{sha[:12]} {o}' for sha, o in f.steps))
    return out


def _same(f: Finding) -> tuple[object, ...]:
    """What KUnit findings share when one block can tell them all."""
    return (f.signal.kind, f.result, f.first_bad, f.unclean_at, f.candidates, f.steps)


def _cases(fs: list[Finding]) -> list[str]:
    """The cases of fs, each parametrised case once with how many of its parameters, per
    topology."""
    out = []
    for topo in sorted({f.signal.topology for f in fs}):
        counts: dict[str, int] = {}
        for f in fs:
            if f.signal.topology == topo:
                suite, _, rest = f.signal.name.partition('.')
                case = f'{suite}.{rest.split(".", 1)[0]}'
                counts[case] = counts.get(case, 0) + 1
        out += _wrap(f'on {topo}: ' + ', '.join(
            c + (f' ({n} parameters)' if n > 1 else '') for c, n in counts.items()), '    ')
    return out


def group_lines(b: Bisect, fs: list[Finding]) -> list[str]:
    """One finding's block; KUnit findings alike in everything but their case, as one
    block naming every case (each on its own in bisect.json)."""
    lines = finding_lines(b, fs[0])
    if len(fs) == 1:
        return lines
    topos = sorted({f.signal.topology for f in fs})
    head = [f'KUnit: {len(fs)} cases on {", ".join(topos)}, each bisected, all alike:']
    head += _cases(fs)
    body: list[str] = []
    for x in lines[1:]:
        if x == '  the failure at it:':
            body += _wrap(f'the failure at it ({fs[0].signal.name} on '
                          f'{fs[0].signal.topology}):')
        else:
            body.append(x)
    return head + body


def _status(b: Bisect, sha: str, sig: Signal) -> str:
    m = b.measured.get(sha) or (b.ends['bad'] if sha == b.c.bad.sha else None)
    return m.statuses.get((sig.topology, sig.name), 'ABSENT') if m else '?'


def _at(b: Bisect, sha: str, sig: Signal) -> str:
    m = b.measured[sha]
    if sig.kind == 'kunit':
        return m.statuses.get((sig.topology, sig.name), 'ABSENT')
    return (f'against GOOD: {m.counted.get("vs_good", {}).get(sig.name, "?")}, '
            f'against BAD: {m.counted.get("vs_bad", {}).get(sig.name, "?")}')


def step_rows(b: Bisect) -> list[dict[str, object]]:
    """Every revision measured, in order: the ends, then the steps."""
    rows: list[dict[str, object]] = []
    subjects = {c.sha: c.subject for c in (*b.c.commits, b.c.good)}
    for label, sha in (('GOOD', b.c.good.sha), ('BAD', b.c.bad.sha)):
        m = b.ends[label.lower()]
        rows.append({'role': label, 'sha': sha, 'subject': subjects.get(sha, ''),
                     'files': m.files, 'seconds': round(m.seconds, 1),
                     'skipped': m.skipped})
    for sha in b.steps_run:
        m = b.measured[sha]
        role = 'step' if sha not in b.resumed else 'resumed'
        rows.append({'role': role, 'sha': sha, 'subject': subjects.get(sha, ''),
                     'files': m.files, 'seconds': round(m.seconds, 1), 'skipped': m.skipped,
                     'kunit': {f'{t} {c}': st for (t, c), st in m.statuses.items()
                               if any(x.kind == 'kunit' and (x.topology, x.name) == (t, c)
                                      for x in b.signals)},
                     'counted': m.counted, 'figures': m.figures})
    return rows


def render(b: Bisect, given_good: str, given_bad: str, seconds: float) -> str:
    c = b.c
    fs = findings(b)
    out = [f'kloc bisect of {c.settings.kdir}',
           f'GOOD {c.good.short} ("{c.good.subject}")',
           f'BAD  {c.bad.short} ("{c.bad.subject}")']
    out += _wrap(f'{len(c.commits)} commits after GOOD along first parents'
                 + (f' ({c.merges} of them merges: a merged branch counts as its merge '
                    'commit)' if c.merges else '')
                 + f'; {len(b.steps_run)} steps, {seconds:.0f} s in all', '')
    if c.dirty:
        out += _wrap(f'KDIR has uncommitted changes ({len(c.dirty)} files): the committed '
                     'revisions were bisected, not the work tree', '')
    if not b.signals:
        out.append('GOOD and BAD do not differ: no KUnit case passes at GOOD and fails at '
                   'BAD, and no counted figure moves by the change of interest')
    groups: dict[tuple[object, ...], list[Finding]] = {}
    for f in fs:
        key = _same(f) if f.signal.kind == 'kunit' else (id(f),)
        groups.setdefault(key, []).append(f)
    for group in groups.values():
        out += [''] + group_lines(b, group)
    for x in b.flaky:
        end = 'GOOD' if x.flaky == 'base' else 'BAD'
        out += [''] + _wrap(f'flaky at {end}, not bisected: {x.case} on {x.topology} '
                            f'(GOOD: {", ".join(x.runs.get("base", []))}; BAD: '
                            f'{", ".join(x.runs.get("patched", []))})', '')
    out += ['', 'Steps (each revision measured once, for every signal that asked):']
    for r in step_rows(b):
        skipped = r['skipped']
        why = ('; skipped: ' + '; '.join(f'{k}: {v}' for k, v in skipped.items())
               if isinstance(skipped, dict) and skipped else '')
        out += _wrap(f'{r["role"]:<5} {str(r["sha"])[:12]} {r["seconds"]:>5} s  '
                     f'"{r["subject"]}": {r["files"]}{why}')
    out += ['', 'Reproduce:', f'  {command(b, given_good, given_bad)}']
    return '\n'.join(out) + '\n'


def to_json(b: Bisect, given_good: str, given_bad: str, seconds: float) -> dict[str, object]:
    c = b.c
    return {
        'kdir': str(c.settings.kdir), 'first_parent': True,
        'good': {'given': given_good, 'sha': c.good.sha, 'subject': c.good.subject},
        'bad': {'given': given_bad, 'sha': c.bad.sha, 'subject': c.bad.subject},
        'commits': [{'sha': x.sha, 'subject': x.subject} for x in c.commits],
        'merges': c.merges, 'dirty': c.dirty,
        'settings': {'topologies': list(c.settings.topologies), 'topology': c.settings.topology,
                     'counted': c.settings.counted, 'alpha': c.settings.alpha,
                     'mde': c.settings.mde},
        'ends_counted': b.ends_counted,
        'signals': [{'kind': f.signal.kind, 'name': f.signal.name,
                     'topology': f.signal.topology, 'good': f.signal.good,
                     'bad': f.signal.bad, 'direction': f.signal.direction,
                     'result': f.result,
                     'first_bad': {'sha': f.first_bad.sha, 'subject': f.first_bad.subject}
                     if f.first_bad else None,
                     'candidates': [x.sha for x in f.candidates],
                     'unclean_at': f.unclean_at.sha if f.unclean_at else None,
                     'steps': [{'sha': s, 'outcome': o} for s, o in f.steps]}
                    for f in findings(b)],
        'flaky': [dataclasses.asdict(x) for x in b.flaky],
        'steps': step_rows(b), 'seconds': round(seconds, 1),
        'command': command(b, given_good, given_bad)}


def to_html(text: str, title: str) -> str:
    """The report as one self-contained page (no script, no fetch)."""
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;'
            'margin:2em}pre{font-size:14px;line-height:1.35}</style></head><body>'
            f'<h1>{html.escape(title)}</h1><pre>{html.escape(text)}</pre></body></html>\n')
