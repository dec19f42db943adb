# SPDX-License-Identifier: GPL-2.0
"""The LAVA test monitors: how LAVA reads results off a console with no shell.

A monitor (lava_dispatcher/actions/test/monitor.py) waits for its start
string, then matches its pattern against the console until its end string;
each match is one result: the named groups test_case_id and result (mapped
through fixupdict to pass, fail, skip or unknown), and optionally
measurement and units. pexpect compiles the patterns with re.DOTALL and
takes the earliest match of end and pattern.

- KUnit prints KTAP: every result line, at any depth (suites, cases,
  parameters), is a result of the monitor "kunit". LAVA's results are flat
  and in console order; results.py puts each back in its place in the tree
  kunit.py's parser reads from the console LAVA logged.
- The guest kselftest prints TAP and "# <what>: <n> packets/s" lines, then
  its JSON record and exit status between KLOC-RESULT-BEGIN and
  KLOC-RESULT-END (kloc/guests/guest.py). The monitor "lo_counters" takes
  the TAP results and the figures (measurements, unit packets/s);
  "kloc-result" the exit status.

A SKIP line is "ok N name # SKIP why": a lookahead makes the result group
"ok " (with its space) there, which fixupdict maps to skip. Console lines
end in \\r\\r\\n (the serial driver's \\r\\n, and the pty's), so a pattern
ends at a lookahead for \\r or \\n rather than at "\\r?\\n", and starts at
the \\n the previous match left.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LAVA_RESULTS = ('pass', 'fail', 'skip', 'unknown')


@dataclass(frozen=True)
class Monitor:
    name: str                   # LAVA's test suite ("definition") of its results
    start: str
    end: str
    pattern: str
    fixupdict: dict[str, str] = field(default_factory=dict)

    def definition(self) -> dict[str, object]:
        """The monitor as a job definition lists it."""
        d: dict[str, object] = {'name': self.name, 'start': self.start, 'end': self.end,
                                'pattern': self.pattern}
        if self.fixupdict:
            d['fixupdict'] = dict(self.fixupdict)
        return d


# A TAP/KTAP status: "not ok", "ok", or "ok " where a SKIP directive follows.
_STATUS = r'not ok|ok(?= \d+ [^\r\n]*?# SKIP) |ok'
_STATUS_MAP = {'ok': 'pass', 'not ok': 'fail', 'ok ': 'skip'}
# The name runs to the directive or the end of the line, whose \r or \n must have come.
_NAME = r'[^#\r\n]*[^#\s]'
_LINE_END = r'(?=[ \t]*(?:#[^\r\n]*)?[\r\n])'

KUNIT = Monitor(
    name='kunit',
    start=r'K?TAP version \d+',
    # kunit_shutdown=reboot: the kernel restarts when KUnit is done.
    end='reboot: Restarting system',
    pattern=rf'\n *(?P<result>{_STATUS}) ?\d+ (?:- )?(?P<test_case_id>{_NAME}){_LINE_END}',
    fixupdict=_STATUS_MAP)

# The kselftest's figure lines: "# 1 thread on cpu 0: 33494 packets/s (...)".
# One pattern takes them and the TAP results: where the line starts with
# "#" (the group "figure"), the name runs to ":" and a measurement and its
# unit follow; elsewhere no measurement, and an empty unit (LAVA's server
# stores units as text that may not be null).
FIGURE_UNIT = 'packets/s'
KSELFTEST = Monitor(
    name='lo_counters',
    start='TAP version 13',
    end='# Totals:',
    pattern=(rf'\n(?P<result>(?P<figure>#)|{_STATUS}) ?(?(figure)|\d+ )'
             rf'(?P<test_case_id>(?(figure)[^:\r\n]*[^:\s]|{_NAME}))'
             rf'(?(figure): (?P<measurement>\d+(?:\.\d+)?) |{_LINE_END})'
             rf'(?P<units>(?(figure){re.escape(FIGURE_UNIT)}|))'),
    fixupdict={'#': 'pass', **_STATUS_MAP})

# The kselftest's exit status (kselftest.h: 0 pass, 1 fail, 2 xfail, 3 xpass, 4 skip).
# Its one result is the case "END" (LAVA's case id "end") of "kloc-result".
KSELFTEST_EXIT = Monitor(
    name='kloc-result',
    start='KLOC-RESULT-BEGIN',
    end='reboot: Restarting system',
    pattern=r'KLOC-RESULT-(?P<test_case_id>END) (?P<result>\d+)(?=[\r\n])',
    fixupdict={'0': 'pass', '1': 'fail', '2': 'fail', '3': 'fail', '4': 'skip'})

# The figures' names as results.py reports them, from the figure lines' names.
FIGURES = (
    (re.compile(r'1 thread on cpu \d+'), 'pps_single'),
    (re.compile(r'\d+ threads'), 'pps_total'),
    (re.compile(r'node (\d+)'), 'pps_node{}'),
    (re.compile(r'cpu (\d+) node \d+'), 'pps_cpu{}'),
)


def figure_name(test_case_id: str) -> str:
    """The kloc name of a figure line's name ("1 thread on cpu 2": pps_single), or ''."""
    for rx, name in FIGURES:
        m = rx.fullmatch(test_case_id)
        if m:
            return name.format(*m.groups())
    return ''


@dataclass(frozen=True)
class Match:
    """One result, as the monitor makes it (before LAVA lowercases the case id)."""
    test_case_id: str
    result: str
    measurement: str | None = None
    units: str | None = None


def scan(monitor: Monitor, text: str) -> tuple[list[Match], bool]:
    """The monitor's results in text, as LAVA takes them from a console that has
    printed it all, and whether the end string came."""
    start = re.compile(monitor.start, re.DOTALL).search(text)
    if not start:
        return [], False
    end, pattern = re.compile(monitor.end, re.DOTALL), re.compile(monitor.pattern, re.DOTALL)
    pos, out = start.end(), list[Match]()
    while True:
        e, m = end.search(text, pos), pattern.search(text, pos)
        if e and (not m or e.start() <= m.start()):
            return out, True
        if not m:
            return out, False
        g = m.groupdict()
        result = monitor.fixupdict.get(g['result'], g['result'])
        if result in LAVA_RESULTS:
            out.append(Match(g['test_case_id'].strip(), result, g.get('measurement'),
                             g.get('units')))
        pos = m.end()
