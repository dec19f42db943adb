# SPDX-License-Identifier: GPL-2.0
"""The one-screen summary of KUnit runs."""

from __future__ import annotations

from kloc.kunitpy import known
from kloc.kunitpy.junit import KunitRun
from kloc.kunitpy.ktap import Document, Status

MAX_LISTED = 15


def _complete(doc: Document) -> bool:
    """Whether the run printed every suite it planned."""
    return doc.found and bool(doc.suites) and (doc.planned is None
                                               or len(doc.suites) >= doc.planned)


def ok(runs: list[KunitRun], verdict: known.Verdict | None = None) -> bool:
    """Every run complete, and no failure but the known upstream ones, each still there;
    verdict: known.classify(runs), where the caller has it."""
    if verdict is None:
        verdict = known.classify(runs)
    return bool(runs) and all(_complete(r.doc) for r in runs) and verdict.ok


def render(runs: list[KunitRun]) -> str:
    lines = [f'{"kernel":<18} {"topology":<18} {"pass":>5} {"fail":>5} {"skip":>5} '
             f'{"crash":>5} {"time":>7}']
    bad: list[str] = []
    totals = {s: 0 for s in Status}
    v = known.classify(runs)
    for r in runs:
        c = r.doc.counts()
        note = ''
        if not r.doc.found or not r.doc.suites:
            c[Status.CRASHED] += 1
            note = '  no KTAP: did not boot'
            bad.append(f'  CRASHED {r.kernel} {r.topology}: the kernel printed no KTAP '
                       '(did not boot, or hung before KUnit)')
        for s in Status:
            totals[s] += c[s]
        lines.append(f'{r.kernel:<18} {r.topology:<18} {c[Status.PASS]:>5} '
                     f'{c[Status.FAIL]:>5} {c[Status.SKIP]:>5} {c[Status.CRASHED]:>5} '
                     f'{r.seconds:>6.1f}s{note}')
        for suite in r.doc.suites:
            for path, leaf in suite.leaves():
                if leaf.status in (Status.FAIL, Status.CRASHED):
                    name = v.excuse(r, path)
                    tag = f' (known upstream: {name})' if name else ''
                    bad.append(f'  {leaf.status.value:<7} {r.kernel} {r.topology} {path}'
                               + (f': {leaf.reason}' if leaf.reason else '') + tag)
    if bad:
        lines.append('')
        lines.append('Failed or crashed:')
        lines.extend(bad[:MAX_LISTED])
        if len(bad) > MAX_LISTED:
            lines.append(f'  ... and {len(bad) - MAX_LISTED} more (see the JUnit file)')
    if v.known:
        lines.append('')
        lines.append(f'{len(v.known)} of the failures are known upstream failures '
                     '(tools/kloc/kunitpy/known.py), each with its fix patch; '
                     f'{len(v.unexpected)} are not')
    for f in v.fixed:
        lines.append(f'UNEXPECTED PASS: {f}: the stock kernel no longer fails this '
                     'known upstream failure; if it has the fix now, remove the entry '
                     'from tools/kloc/kunitpy/known.py')
    for f in v.passing_elsewhere:
        lines.append(f'note: known upstream failure {f} (this tree may have the fix)')
    verdict = 'PASS' if ok(runs, v) else 'FAIL'
    lines.append('')
    lines.append(f'{totals[Status.CRASHED]} of the failures are crashes; '
                 f'{len(runs)} kernel x topology runs')
    lines.append(f'{verdict}: {totals[Status.PASS]} passed, '
                 f'{totals[Status.FAIL] + totals[Status.CRASHED]} failed'
                 + (f' ({len(v.known)} of them known upstream)' if v.known else '')
                 + f', {totals[Status.SKIP]} skipped')
    return '\n'.join(lines) + '\n'
