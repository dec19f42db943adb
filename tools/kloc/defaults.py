# SPDX-License-Identifier: GPL-2.0
"""Every option's default and range, in one place.

The command line takes its defaults from here, `make help` and `kloc
defaults` print this table, and a tool test checks that the README's
table says the same. Out-of-range values are refused before anything is
built, with the Make variable named.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from kloc.errors import KlocError


class OptionError(KlocError):
    """An option's value is out of its range."""


@dataclass(frozen=True)
class Option:
    make: str                       # the Make variable, e.g. SECONDS
    dest: str                       # the argparse attribute, e.g. seconds
    about: str
    defaults: tuple[tuple[str, str], ...]   # (command, default) pairs; '*' for all
    low: float | None = None        # the range, inclusive unless low_open
    high: float | None = None
    low_open: bool = False
    integer: bool = False

    def default(self, command: str) -> str:
        table = dict(self.defaults)
        return table.get(command, table.get('*', ''))

    def check(self, value: float, command: str) -> None:
        bad = (self.low is not None and (value <= self.low if self.low_open
                                         else value < self.low)) or \
              (self.high is not None and value > self.high) or \
              (isinstance(value, float) and not math.isfinite(value))
        if bad:
            rng = _range(self).replace(', ', ' and ')
            raise OptionError(f'{self.make}={value:g} is out of range: it must be {rng} '
                              f'({self.about}; make {command} uses '
                              f'{self.default(command)} by default)')


def _jobs() -> str:
    return str(os.cpu_count() or 1)


OPTIONS = (
    Option('TIMEOUT', 'timeout', 'seconds one boot may take before it counts as hung',
           (('kunit', '300'), ('review', '300'), ('mutants', '120'), ('guest', '180'),
            ('known-failures', '300'),
            ('compare', '180')), low=1, high=86400, integer=True),
    Option('RUNS', 'runs', 'good runs per side', (('compare', '10'), ('review', '30')),
           low=2, high=10000, integer=True),
    Option('SECONDS', 'seconds', 'measuring time of each phase, in seconds',
           (('compare', '2'), ('review', '1'), ('guest', '1')), low=0, high=3600,
           low_open=True),
    Option('ALPHA', 'alpha', 'the significance level', (('*', '0.05'),), low=0, high=0.5,
           low_open=True),
    Option('MDE', 'mde', 'the change of interest, in percent: a run that could not '
           'detect it is inconclusive', (('compare', '3.6'), ('review', '3.6')), low=0,
           high=100, low_open=True),
    Option('JOBS', 'jobs', 'parallel build jobs and tool-test workers', (('*', 'nproc'),),
           low=1, high=4096, integer=True),
    Option('COUNTED', 'counted', 'boots a side under the QEMU counting plugin, after the '
           'timed runs (0: none; 3 judge instructions per packet)',
           (('compare', '0'), ('review', '0'), ('guest', '0')),
           low=0, high=1000, integer=True),
)

BY_DEST = {o.dest: o for o in OPTIONS}


def value(dest: str, command: str) -> str:
    v = BY_DEST[dest].default(command)
    return _jobs() if v == 'nproc' else v


def check(command: str, values: dict[str, object]) -> None:
    """Refuse an out-of-range option; values maps argparse dests to parsed values."""
    for dest, v in values.items():
        opt = BY_DEST.get(dest)
        if opt is not None and isinstance(v, (int, float)) and not isinstance(v, bool):
            opt.check(v, command)


def _per_command(o: Option) -> str:
    return ', '.join(f'{c} {d}' if c != '*' else d for c, d in o.defaults)


def table() -> str:
    """The defaults, one option a line, as make help shows them."""
    return ''.join(f'  {o.make:<8} {_per_command(o):<44} {o.about}\n' for o in OPTIONS)


def _range(o: Option) -> str:
    lo = '' if o.low is None else (f'> {o.low:g}' if o.low_open else f'>= {o.low:g}')
    hi = '' if o.high is None else f'<= {o.high:g}'
    return ', '.join(x for x in (lo, hi) if x)


def readme_rows() -> str:
    """The README's table of numeric options, one Markdown row each."""
    return ''.join(f'| `{o.make}` | {_per_command(o)} | {_range(o)} | {o.about} |\n'
                   for o in OPTIONS)
