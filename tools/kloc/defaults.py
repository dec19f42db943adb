# SPDX-License-Identifier: GPL-2.0
"""Every option's default and range, and how options are read, in one place.

The command line takes its defaults from here, `make help` and `kloc
defaults` print this table, and a tool test checks that the README's
table says the same. Values are read strictly (number() and boolean() are
the command line's argparse types): a number is ASCII digits, with a
decimal point where the option takes a fraction, and no sign, exponent or
underscore; a boolean is 1, or 0 or nothing. Anything else, or a number
out of range, is refused before anything is built, in one line that names
the Make variable, the value and what is accepted.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from kloc.errors import KlocError


class OptionError(KlocError):
    """An option's value is out of its range."""


@dataclass(frozen=True, kw_only=True)
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

    def accepted(self) -> str:
        """What a value must look like, for messages."""
        if self.integer:
            return 'give ASCII digits only, like 10 (no sign, decimal point or _)'
        return ('give ASCII digits with an optional decimal point, like 2 or 0.5 (no sign, '
                'exponent or _)')

    def parse(self, text: str) -> float:
        """text as this option's number (an int for an integer option), or OptionError."""
        pattern = _INTEGER if self.integer else _DECIMAL
        if not pattern.fullmatch(text):
            raise OptionError(f'{self.make}={shown(text)} is not a number: '
                              f'{self.accepted()} ({self.about})')
        try:
            return int(text) if self.integer else float(text)
        except ValueError:          # more digits than int() reads: out of any range
            raise OptionError(f'{self.make}={_clip(text)} is out of range: it must '
                              f'be {_range(self).replace(", ", " and ")}') from None

    def check(self, value: float, command: str, text: str | None = None) -> None:
        """Refuse value out of range; text, where given, is how the user wrote it."""
        bad = (self.low is not None and (value <= self.low if self.low_open
                                         else value < self.low)) or \
              (self.high is not None and value > self.high) or \
              (isinstance(value, float) and not math.isfinite(value))
        if bad:
            rng = _range(self).replace(', ', ' and ')
            default = self.default(command)
            uses = f'; make {command} uses {default} by default' if default else ''
            given = _clip(shown(text)) if text is not None else _clip(_g(value))
            raise OptionError(f'{self.make}={given} is out of range: it must be {rng} '
                              f'({self.about}{uses})')


# A number's whole text: ASCII digits, with one decimal point for a fraction.
_INTEGER = re.compile(r'[0-9]+', re.ASCII)
_DECIMAL = re.compile(r'[0-9]+(?:\.[0-9]*)?|\.[0-9]+', re.ASCII)


def shown(text: str) -> str:
    """A value as a message shows it: on one line, what cannot be printed escaped."""
    return text if text.isprintable() else text.encode('unicode_escape').decode('ascii')


def _clip(text: str, most: int = 40) -> str:
    """A long value cut short for a message."""
    return text if len(text) <= most else text[:most] + '...'


def _g(value: float) -> str:
    try:
        return f'{value:g}'
    except OverflowError:       # an int too large for a float
        return str(value)[:41]


def _jobs() -> str:
    return str(os.cpu_count() or 1)


OPTIONS = (
    Option(make='TIMEOUT', dest='timeout',
           about='seconds one boot may take before it counts as hung',
           defaults=(('kunit', '300'), ('review', '300'), ('bisect', '300'), ('mutants', '120'),
                     ('guest', '180'), ('known-failures', '300'), ('compare', '180'),
                     ('bench-plugin-cost', '180')),
           low=1, high=86400, integer=True),
    Option(make='RUNS', dest='runs',
           about='good timed runs per side (wall-clock under emulation: shown, judged only '
           'where no counted boots are)',
           defaults=(('compare', '6'), ('review', '10'), ('bench-plugin-cost', '5')), low=2,
           high=10000, integer=True),
    Option(make='SECONDS', dest='seconds',
           about='measuring time of each phase, in seconds (from 0.1: a shorter phase sends '
           'too few packets to time)',
           defaults=(('compare', '2'), ('review', '1'), ('bisect', '1'), ('guest', '1')),
           low=0.1, high=3600),
    Option(make='ALPHA', dest='alpha', about='the significance level',
           defaults=(('*', '0.05'),), low=0, high=0.5, low_open=True),
    Option(make='MDE', dest='mde',
           about='the change of interest, in percent: a run that could not detect it is '
           'inconclusive',
           defaults=(('compare', '3.6'), ('review', '3.6'), ('bisect', '3.6')), low=0,
           high=100, low_open=True),
    Option(make='JOBS', dest='jobs', about='parallel build jobs, tool-test workers and '
           'counted boots at once (timed runs: one at a time)',
           defaults=(('*', 'nproc'),), low=1, high=4096, integer=True),
    Option(make='COUNTED', dest='counted',
           about='boots a side under the QEMU counting plugin, JOBS at once, seed k for '
           'pair k; the verdict rests on their counts (0: none, the timed runs judge)',
           defaults=(('compare', '3'), ('review', '5'), ('bisect', '5'), ('guest', '0')), low=0,
           high=1000,
           integer=True),
)

BY_DEST = {o.dest: o for o in OPTIONS}


def value(dest: str, command: str) -> str:
    v = BY_DEST[dest].default(command)
    return _jobs() if v == 'nproc' else v


def number(dest: str, command: str) -> Callable[[str], float]:
    """The argparse type of a numeric option of command: its number, in range, or an
    error naming the Make variable, the value and what is accepted."""
    o = BY_DEST[dest]

    def parse(text: str) -> float:
        try:
            v = o.parse(text)
            o.check(v, command, text)
        except OptionError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return v
    return parse


def boolean(name: str, text: str) -> Callable[[str], bool]:
    """The argparse type of a yes-or-no option (make: NAME=): 1 is yes, 0 or nothing is
    no, anything else (no, yes, true, 2) is refused; text says what yes does."""
    def parse(value: str) -> bool:
        if value == '1':
            return True
        if value in ('', '0'):
            return False
        raise argparse.ArgumentTypeError(f'{name}={shown(value)} is not 0 or 1: give '
                                         f'{name}=1 to {text}, or {name}=0 (or nothing) '
                                         'not to')
    return parse


def one_line(name: str, empty: bool = True) -> Callable[[str], str]:
    """The argparse type of a path option (make: NAME=): the value as given, unless it
    holds a newline (or, where empty is False, is empty), which no make recipe or script
    passes on intact."""
    def parse(value: str) -> str:
        if '\n' in value or '\r' in value:
            raise argparse.ArgumentTypeError(f'{name}={shown(value)} holds a newline: give '
                                             f'{name}= a path on one line')
        if not value and not empty:
            raise argparse.ArgumentTypeError(f'{name}= is empty: give {name}= a folder '
                                             '(the default is out)')
        return value
    return parse


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
