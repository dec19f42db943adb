# SPDX-License-Identifier: GPL-2.0
"""KUnit results from a kernel console log, read with kunit.py's own parser.

The parser is tools/testing/kunit/kunit_parser.py of the kernel tree the
log came from, so a case is PASS, FAIL, SKIP or CRASHED exactly as
kunit.py says; this module turns its tree into the Result tree the
reports use. It adds only what kunit_parser cannot give:
- whether the console holds any KTAP at all: a kernel that never reached
  KUnit has none, and its last lines are what a report shows;
- SKIP reasons, which kunit_parser reads but drops;
- a reason for each crashed case, and a name for each case a crash cut
  off (kunit_parser records those nameless).
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import inspect
import io
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from kloc.errors import KlocError


class Status(enum.Enum):
    PASS = 'PASS'
    FAIL = 'FAIL'
    SKIP = 'SKIP'
    CRASHED = 'CRASHED'


@dataclass
class Result:
    name: str
    status: Status = Status.CRASHED
    reason: str = ''          # SKIP reason, or why it crashed
    log: list[str] = field(default_factory=list)
    children: list[Result] = field(default_factory=list)
    planned: int | None = None

    def leaves(self, prefix: str = '') -> list[tuple[str, Result]]:
        """(path, case) for every case that has no subtests."""
        path = f'{prefix}.{self.name}' if prefix else self.name
        if not self.children:
            return [(path, self)]
        out: list[tuple[str, Result]] = []
        for c in self.children:
            out.extend(c.leaves(path))
        # A parent that crashed, or failed with no failing case to show for
        # it (missing subtests), is a result of its own.
        bad = (Status.FAIL, Status.CRASHED)
        if self.status in bad and not any(leaf.status in bad for _, leaf in out):
            out.append((path, self))
        return out


@dataclass
class Document:
    found: bool               # whether any KTAP/TAP header was seen
    suites: list[Result]
    planned: int | None
    trailing: list[str]       # console lines after the last result

    def counts(self) -> dict[Status, int]:
        c = {s: 0 for s in Status}
        for suite in self.suites:
            for _, leaf in suite.leaves():
                c[leaf.status] += 1
        return c

    @property
    def ok(self) -> bool:
        if not self.found or not self.suites:
            return False
        if self.planned is not None and len(self.suites) < self.planned:
            return False
        c = self.counts()
        return c[Status.FAIL] == 0 and c[Status.CRASHED] == 0


# Lines this module reads itself (the runner's extract_ktap uses them too).
TIMESTAMP = re.compile(r'^\[\s*\d+\.\d+\]\s?')
HEADER = re.compile(r'^(\s*)K?TAP version \d+')
_SKIP = re.compile(r'^\s*(?:ok|not ok) \d+ (?:- )?(.*?) # SKIP ?(.*)$')

# No console line is longer (printk's limit is 1024 bytes). kunit_parser's
# result-line expression takes quadratic time on long lines: it sees no more.
LINE_MAX = 1024

# kunit_parser makes one placeholder per planned test that never came: a
# corrupt plan line ("1..99999999999") would take all memory. No suite plans
# this many.
PLAN_MAX = 10000
_PLAN = re.compile(r'^(.*?1\.\.)(\d+)(.*)$', re.DOTALL)   # as kunit_parser reads plans


def _bounded(line: str) -> str:
    """The line as kunit_parser may safely see it."""
    line = line[:LINE_MAX]
    m = _PLAN.match(line)
    if m and (len(m.group(2)) > 5 or int(m.group(2)) > PLAN_MAX):
        return f'{m.group(1)}{PLAN_MAX}{m.group(3)}'
    return line


CRASHED_REASON = 'no result line: the kernel crashed, hung or stopped'


class ParserError(KlocError):
    """kunit.py's parser is missing from the tree, or could not read a log."""


def kunit_dir(tree: Path) -> Path:
    """Where a kernel tree keeps kunit.py and its parser."""
    return tree / 'tools' / 'testing' / 'kunit'


_LOADED: dict[Path, ModuleType] = {}


def _parser(where: Path) -> ModuleType:
    """kunit_parser from one tree; each tree's copy is loaded on its own."""
    where = where.resolve()
    if where in _LOADED:
        return _LOADED[where]
    if not (where / 'kunit_parser.py').is_file():
        raise ParserError(f'{where}/kunit_parser.py is missing: the results are read with '
                          'the kernel tree\'s own kunit.py parser; point KDIR at a whole tree')
    names = ('kunit_parser', 'kunit_printer')
    saved = {n: sys.modules.pop(n) for n in names if n in sys.modules}
    sys.path.insert(0, str(where))
    try:
        module = importlib.import_module('kunit_parser')
    finally:
        sys.path.remove(str(where))
        for n in names:
            sys.modules.pop(n, None)
        sys.modules.update(saved)
    _LOADED[where] = module
    return module


def _plans_after_headers(stream: Any, module: ModuleType) -> Iterator[tuple[int, str]]:
    """The KTAP lines kunit_parser extracted, with a test plan only where it reads one.

    kunit_parser reads a plan only as the first line after a KTAP (or TAP)
    version line or a "# Subtest:" header, diagnostics between. A plan
    anywhere else it never consumes, and it loops on it for ever, adding a
    test each time until memory runs out (6.1 and 6.12 alike; the property
    test found "KTAP version 1", "ok 1 x", "1..0"). Such a plan goes
    through as a diagnostic line, in the log of the test it falls in.
    """
    expect_plan = False
    while stream:
        number = stream.line_number()
        line = stream.pop()
        if module.TEST_PLAN.match(line):
            if not expect_plan:
                line = f'# stray plan: {line.strip()}'
            expect_plan = False
        elif module.KTAP_START.match(line) or module.TAP_START.match(line) or \
                module.TEST_HEADER.match(line):
            expect_plan = True
        elif module.TEST_RESULT.match(line):
            expect_plan = False
        yield number, line


@contextlib.contextmanager
def _plans_checked(module: ModuleType) -> Iterator[None]:
    """kunit_parser's extract_tap_lines, through _plans_after_headers."""
    extract = getattr(module, 'extract_tap_lines')

    def checked(output: Any) -> Any:
        return module.LineStream(_plans_after_headers(extract(output), module))

    setattr(module, 'extract_tap_lines', checked)
    try:
        yield
    finally:
        setattr(module, 'extract_tap_lines', extract)


@contextlib.contextmanager
def _quiet(module: ModuleType) -> Iterator[None]:
    """kunit_parser prints its summary as it parses: keep it out of kloc's output.

    Up to 6.x it prints through its module's `stdout` printer; later ones
    take the printer as parse_run_tests()'s argument (_parse_run_tests).
    """
    printer = getattr(module, 'stdout', None)
    if printer is None:
        yield
        return
    setattr(module, 'stdout', type(printer)(io.StringIO()))
    try:
        yield
    finally:
        setattr(module, 'stdout', printer)


def _parse_run_tests(module: ModuleType, lines: Iterator[str]) -> Any:
    """kunit_parser.parse_run_tests(), printing nowhere, whichever its signature."""
    if 'printer' in inspect.signature(module.parse_run_tests).parameters:
        return module.parse_run_tests(lines, module.Printer(output=io.StringIO()))
    return module.parse_run_tests(lines)


def _clean(line: str) -> str:
    return TIMESTAMP.sub('', line.rstrip('\r\n'))


def parse(text: str, where: Path) -> Document:
    """The results in a console log, read by the kunit_parser in directory where.

    where's kunit_parser.py is imported, that is run: it must be the kunit.py
    directory of a tree kloc resolved itself (runner.parser_dir), never one a
    result file names.
    """
    lines = [_clean(x) for x in text.splitlines()]
    if not any(HEADER.match(x) for x in lines):
        return Document(False, [], None, lines[-40:])
    module = _parser(where)
    try:
        with _quiet(module), _plans_checked(module):
            main = _parse_run_tests(module, (_bounded(line) + '\n'
                                             for line in text.splitlines()))
    except (RecursionError, ValueError) as e:     # deep nesting; a 5000-digit plan
        raise ParserError(f'kunit.py\'s parser gave up on this log: {e}') from e
    skips = [(m.group(1).strip(), m.group(2).strip())
             for m in map(_SKIP.match, lines) if m]
    suites = [_convert(t, module, skips, k, len(main.subtests), 'suite')
              for k, t in enumerate(main.subtests, 1)]
    planned = main.expected_count if isinstance(main.expected_count, int) else None
    return Document(True, suites, planned, [])


def _status(test: Any, module: ModuleType) -> Status:
    s = module.TestStatus
    if test.status == s.SUCCESS:
        return Status.PASS
    if test.status == s.SKIPPED:
        return Status.SKIP
    if test.status == s.TEST_CRASHED:
        return Status.CRASHED
    return Status.FAIL      # FAILURE, NO_TESTS, FAILURE_TO_PARSE_TESTS


def _convert(test: Any, module: ModuleType, skips: list[tuple[str, str]],
             number: int, of: int, kind: str = 'case') -> Result:
    """One kunit_parser Test, its subtests first, as a Result."""
    children = [_convert(c, module, skips, k, len(test.subtests))
                for k, c in enumerate(test.subtests, 1)]
    log = [str(x) for x in test.log]
    for c in children:
        # kunit_parser gives a parameterised case's messages to the case, not
        # to the parameter that failed: let a failed one show them.
        if c.status == Status.FAIL and not c.log and not c.children:
            c.log = log
    status = _status(test, module)
    name = str(test.name)
    reason = ''
    if status == Status.SKIP:
        # Result lines come in the order kunit_parser finishes tests: ours too.
        while skips:
            skipped, why = skips.pop(0)
            if skipped == name:
                reason = why
                break
    elif status == Status.CRASHED:
        reason = CRASHED_REASON
        if not name and not test.log:
            name = f'({kind} {number} of {of}: never ran)'
            reason = 'never ran: the run stopped before it'
    planned = test.expected_count if isinstance(test.expected_count, int) else None
    return Result(name, status, reason, log, children, planned)
