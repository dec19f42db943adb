# SPDX-License-Identifier: GPL-2.0
"""The one-screen summary of KUnit runs."""

from __future__ import annotations

from kloc.kunit.junit import KunitRun
from kloc.kunit.ktap import Status

MAX_LISTED = 15


def ok(runs: list[KunitRun]) -> bool:
    return bool(runs) and all(r.doc.ok for r in runs)


def render(runs: list[KunitRun]) -> str:
    lines = [f'{"kernel":<18} {"topology":<18} {"pass":>5} {"fail":>5} {"skip":>5} '
             f'{"crash":>5} {"time":>7}']
    bad: list[str] = []
    totals = {s: 0 for s in Status}
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
                    bad.append(f'  {leaf.status.value:<7} {r.kernel} {r.topology} {path}'
                               + (f': {leaf.reason}' if leaf.reason else ''))
    if bad:
        lines.append('')
        lines.append('Failed or crashed:')
        lines.extend(bad[:MAX_LISTED])
        if len(bad) > MAX_LISTED:
            lines.append(f'  ... and {len(bad) - MAX_LISTED} more (see the JUnit file)')
    verdict = 'PASS' if ok(runs) else 'FAIL'
    lines.append('')
    lines.append(f'{totals[Status.CRASHED]} of the failures are crashes; '
                 f'{len(runs)} kernel x topology runs')
    lines.append(f'{verdict}: {totals[Status.PASS]} passed, '
                 f'{totals[Status.FAIL] + totals[Status.CRASHED]} failed, '
                 f'{totals[Status.SKIP]} skipped')
    return '\n'.join(lines) + '\n'
