# SPDX-License-Identifier: GPL-2.0
"""A LAVA job's results, read back as the package's own results.

lava-run logs one YAML mapping a line: "results" lines are LAVA's results
(the monitors' and LAVA's own, definition "lava"), "target" lines the
console. A lab gives the same two: its results and its job log.

- KUnit: LAVA's results are flat and in console order. The tree they
  belong in is the one kunit.py's parser (kunitpy/ktap.py) reads from the
  console LAVA logged; each of its nodes, suites, cases and parameters in
  the order KTAP prints them (children before their parent), takes the
  status of the next LAVA result if that result has its name. A node with
  no LAVA result never printed its line: it crashed (or never ran). Where
  LAVA's status and the parser's differ, that is a problem of the run.
  The harness's own check of the machine (kloc_topology) is made from the
  console, as for a direct run.
- The kselftest: the TAP cases' statuses and the exit status are LAVA's
  results, the figures its measurements; its JSON record comes from the
  console, as guests/guest.py reads a direct run's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kloc.guests import guest
from kloc.kunitpy import ktap, runner, summary
from kloc.kunitpy.junit import KunitRun
from kloc.lava import monitors, yamlio
from kloc.qemu import topology

STATUS = {'pass': ktap.Status.PASS, 'fail': ktap.Status.FAIL, 'skip': ktap.Status.SKIP}
LINUX_VERSION = re.compile(r'Linux version \S+ .*')


@dataclass(frozen=True)
class LavaResult:
    definition: str
    case: str                   # LAVA's case id (lowercase, \W+ as _)
    name: str                   # the name as the console printed it
    result: str                 # pass, fail, skip or unknown
    measurement: float | None = None
    units: str = ''
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass
class JobLog:
    results: list[LavaResult] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    boot_command: str = ''

    def of(self, definition: str) -> list[LavaResult]:
        return [r for r in self.results if r.definition == definition]

    def lava(self, case: str) -> LavaResult | None:
        """The last of LAVA's own results of that name ("job", "lava-test-monitor")."""
        found = [r for r in self.of('lava') if r.case == case]
        return found[-1] if found else None

    @property
    def complete(self) -> bool:
        """LAVA's verdict: the job ran to its end (a failing test does not change it)."""
        job = self.lava('job')
        return job is not None and job.result == 'pass'

    @property
    def monitored(self) -> bool:
        """Every monitor found its end string."""
        mons = [r for r in self.of('lava') if r.case == 'lava-test-monitor']
        return bool(mons) and all(r.extra.get('status') == 'passed' for r in mons)

    def seconds(self, case: str = 'lava-test-monitor') -> float:
        r = self.lava(case)
        try:
            return float(r.extra.get('duration', 0) if r else 0)
        except (TypeError, ValueError):
            return 0.0

    @property
    def text(self) -> str:
        return '\n'.join(self.console) + '\n'

    def linux_version(self) -> str:
        return linux_version(self.text)


def linux_version(console: str) -> str:
    """The kernel's "Linux version" banner: which build a console comes from."""
    m = LINUX_VERSION.search(console)
    return m.group(0).strip() if m else ''


def _result(msg: dict[str, Any]) -> LavaResult:
    extra = msg.get('extra') if isinstance(msg.get('extra'), dict) else {}
    assert isinstance(extra, dict)
    if 'duration' in msg:
        extra = dict(extra, duration=msg['duration'])
    m = msg.get('measurement')
    try:
        measurement = float(m) if m is not None else None
    except (TypeError, ValueError):
        measurement = None
    return LavaResult(str(msg.get('definition', '')), str(msg.get('case', '')),
                      str(extra.get('test_case_id', msg.get('case', ''))),
                      str(msg.get('result', '')), measurement, str(msg.get('units') or ''),
                      extra)


def unescape(line: str) -> str:
    """A console line as the target printed it: LAVA's log writes each " as \\"
    (lava_dispatcher.shell.ShellLogger; it also drops \\r and ESC, and blank lines)."""
    return line.replace('\\"', '"')


def read_log(text: str) -> JobLog:
    """lava-run's log (its standard output): one YAML mapping a line; or a server's
    (GET /api/v0.2/jobs/<id>/logs/), where each is an item of a YAML list."""
    log = JobLog()
    for line in text.splitlines():
        line = line.removeprefix('- ')      # a server's log: the same lines, as a YAML list
        if not line.startswith('{'):
            continue            # lava-run's own tracebacks, the command line
        try:
            entry = yamlio.load(line)
        except yamlio.YamlError:
            continue
        if not isinstance(entry, dict):
            continue
        lvl, msg = entry.get('lvl'), entry.get('msg')
        if lvl == 'target' and isinstance(msg, str):
            log.console.append(unescape(msg))
        elif lvl == 'results' and isinstance(msg, dict):
            log.results.append(_result(msg))
        elif lvl in ('error', 'exception'):
            log.errors.append(str(msg))
        elif lvl == 'info' and isinstance(msg, str) and msg.startswith('Boot command: '):
            log.boot_command = msg.removeprefix('Boot command: ')
    return log


def _post_order(node: ktap.Result, prefix: str = '') -> Iterator[tuple[str, ktap.Result]]:
    path = f'{prefix}.{node.name}' if prefix else node.name
    for c in node.children:
        yield from _post_order(c, path)
    yield path, node


@dataclass
class LavaKunit:
    run: KunitRun
    log: JobLog
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """The run complete, no failure but a known upstream one (known.py, its
        signature checked, as make kunit judges), and LAVA agreeing with it."""
        return summary.ok([self.run]) and not self.problems


def place(doc: ktap.Document, results: list[LavaResult]) -> list[str]:
    """Give each node of doc the status of its LAVA result; what does not fit."""
    problems: list[str] = []
    i = 0
    for suite in doc.suites:
        for path, node in _post_order(suite):
            r = results[i] if i < len(results) else None
            if r is not None and r.name == node.name and r.result in STATUS:
                status = STATUS[r.result]
                i += 1
            else:
                status = ktap.Status.CRASHED
            if status != node.status:
                problems.append(f'{path}: LAVA says {status.value}, kunit.py\'s parser '
                                f'{node.status.value}')
                node.status = status
    problems += [f'LAVA result {r.definition}/{r.name} ({r.result}) is no KTAP result '
                 'line kunit.py\'s parser read' for r in results[i:]]
    return problems


def kunit(log: JobLog, kernel: str, topo: str, kunit_dir: Path) -> LavaKunit:
    """A KUnit job's results as a run of make kunit (junit.KunitRun)."""
    doc = ktap.parse(log.text, kunit_dir)
    problems = place(doc, log.of(monitors.KUNIT.name))
    if doc.found:
        doc.suites.append(runner.check_topology(doc, topology.get(topo)))
    if not log.complete:
        problems.append('LAVA did not finish the job: ' + '; '.join(log.errors[-3:]))
    elif not log.monitored:
        problems.append('the monitor did not see the end of the run (the kernel crashed, '
                        'hung or did not reboot)')
    return LavaKunit(KunitRun(kernel, topo, doc, log.seconds()), log, problems)


def stable_name(name: str) -> str:
    """A TAP case's name without its numbers (which count datagrams, and vary)."""
    return re.sub(r'\d+', 'N', name)


@dataclass(frozen=True)
class Figure:
    value: float
    unit: str


@dataclass
class LavaSelftest:
    topology: str
    guest: str
    log: JobLog
    statuses: dict[str, str]        # stable case name (and "exit status") -> PASS, FAIL, SKIP
    figures: dict[str, Figure]      # pps_single, pps_total, pps_node<N>, pps_cpu<N>
    record: dict[str, object] | None
    why: str                        # why it is not a good run; '' if it is
    allocator: str = ''

    @property
    def ok(self) -> bool:
        return not self.why


EXIT_STATUS = 'exit status'


def selftest(log: JobLog, topo: str, guest_name: str, allocator: str = '') -> LavaSelftest:
    """A kselftest job's results: statuses, figures and the run's record."""
    statuses: dict[str, str] = {}
    figures: dict[str, Figure] = {}
    problems: list[str] = []
    for r in log.of(monitors.KSELFTEST.name):
        if r.measurement is None:
            statuses[stable_name(r.name)] = r.result.upper()
            continue
        name = monitors.figure_name(r.name)
        if name:
            figures[name] = Figure(r.measurement, r.units)
        else:
            problems.append(f'a figure LAVA measured has no kloc name: {r.name!r}')
    for r in log.of(monitors.KSELFTEST_EXIT.name):
        statuses[EXIT_STATUS] = r.result.upper()
    record, why = guest.parse_console(log.text)
    if record is not None and not why:
        why = guest.check_machine(record, topology.get(topo))
    for name in ('pps_single', 'pps_total'):
        want = record.get(name) if record else None
        got = figures.get(name)
        if got is None:
            problems.append(f'LAVA measured no {name}')
        elif isinstance(want, (int, float)) and got.value != want:
            problems.append(f'LAVA measured {name} {got.value:g}, the record says {want}')
    if EXIT_STATUS not in statuses:
        problems.append('LAVA has no exit status of the kselftest')
    bad = [f'{k} {v}' for k, v in statuses.items() if v != 'PASS']
    if bad:
        problems.append('not passed: ' + ', '.join(bad))
    if not log.complete:
        problems.append('LAVA did not finish the job: ' + '; '.join(log.errors[-3:]))
    elif not log.monitored:
        problems.append('a monitor did not see its end string')
    why = '; '.join(([why] if why else []) + problems)
    return LavaSelftest(topo, guest_name, log, statuses, figures, record, why, allocator)
