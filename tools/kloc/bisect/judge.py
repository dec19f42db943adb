# SPDX-License-Identifier: GPL-2.0
"""What moved between GOOD and BAD (the signals), and how each step reads.

A KUnit signal is a case, on one topology, that passes at GOOD and fails at
BAD, and still does when the suite runs again at both ends (review.confirm:
a case that changes within GOOD is flaky, not a signal). A step where the
case passes is good, fails (or crashes) is bad; anything else (skipped,
absent, no KTAP) is neither.

A counted signal is a figure that the review of BAD against GOOD calls a
regression or an improvement (metrics.Difference.verdict 'higher' or
'lower': significant, and at least the change of interest). A layout
change alone moves every seed's counts a little, so a step never equals
either end exactly; it is judged against both. It is bad when, against
GOOD, it moves the way BAD moved by at least the change of interest, and,
against BAD, shows no change of interest ('same', or 'small': significant
but less than the change of interest); good the other way round. Anything
else (inconclusive, half-way, the other way) is neither: the figure does
not bisect cleanly at that step.
"""

from __future__ import annotations

from dataclasses import dataclass

from kloc.bench import metrics
from kloc.bisect.search import BAD, GOOD, UNCLEAN

NO_CHANGE = ('same', 'small')
FAILED = ('FAIL', 'CRASHED')


@dataclass(frozen=True)
class Signal:
    kind: str           # 'kunit' or 'counted'
    name: str           # 'topology case' or the figure's name
    topology: str
    good: str           # the status at GOOD, or the figure's median there
    bad: str
    direction: str = ''  # counted: 'higher' or 'lower' at BAD
    worse: bool = False  # counted: a regression (not an improvement)

    @property
    def key(self) -> str:
        return f'{self.kind}:{self.topology}:{self.name}'


def kunit_signals(changes: list[tuple[str, str, str, str]]) -> list[Signal]:
    """The confirmed changes (topology, case, status at GOOD, at BAD) that are a pass
    turned into a failure."""
    return [Signal('kunit', case, topo, a, b) for topo, case, a, b in changes
            if a == 'PASS' and b in FAILED]


def counted_signals(diffs: list[metrics.Difference], topology: str) -> list[Signal]:
    return [Signal('counted', d.figure.name, topology, f'{d.a.median:.6g}', f'{d.b.median:.6g}',
                   d.verdict, metrics.better_or_worse(d) == 'worse')
            for d in diffs if d.verdict in ('higher', 'lower')]


def kunit_step(status: str) -> str:
    if status == 'PASS':
        return GOOD
    return BAD if status in FAILED else UNCLEAN


def counted_step(signal: Signal, vs_good: str, vs_bad: str) -> str:
    """A step, from the verdicts of GOOD -> step and step -> BAD on the signal's figure."""
    if vs_good == signal.direction and vs_bad in NO_CHANGE:
        return BAD
    if vs_good in NO_CHANGE and vs_bad == signal.direction:
        return GOOD
    return UNCLEAN
