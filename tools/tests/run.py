# SPDX-License-Identifier: GPL-2.0
"""Run the tool tests in parallel: python3 -m tests.run [--jobs N] [-v] [--root-units F]
[--units F].

The tests are discovered once, split into units, and the units are handed out
to N forked workers as each one finishes its last, so that the long ones (the
install interrupted after every write, the stock kselftest) run side by side.
A unit is a whole module when it has setUpModule(), a whole class when it has
setUpClass(), else one test, so that no fixture runs more often than it must.
Prints a dot per passing test as it goes (-v: a line per unit), then every
failure and error with its traceback, the slowest units, and unittest's totals;
exits 1 if any test failed or errored. --root-units FILE lists the units in
which a test was skipped for needing root (helpers.root_only); --units FILE runs
only those: make test, run as root, runs the tests as an ordinary user, then
those units as root.
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import os
import sys
import time
import unittest
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kloc.trees import workcopy

TOOLS = Path(__file__).resolve().parents[1]
# How a test that needs root says so when skipped (helpers.root_only): --root-units
# writes the units of those skips, for --units to run them again as root.
ROOT_ONLY = 'needs root'


@dataclass(frozen=True)
class Problem:
    """One failed, errored or unexpectedly passing test, with its report."""
    kind: str
    test: str
    text: str


@dataclass
class Outcome:
    """What a unit's tests did."""
    unit: str
    run: int = 0
    seconds: float = 0.0
    skipped: int = 0
    expected_failures: int = 0
    problems: list[Problem] = field(default_factory=list)
    needs_root: bool = False    # a test in it was skipped for not being root


def _leaves(suite: unittest.TestSuite) -> Iterator[unittest.TestCase]:
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from _leaves(t)
        else:
            yield t


def _unit_key(test: unittest.TestCase) -> str:
    cls = type(test)
    module = sys.modules.get(cls.__module__)
    if module is not None and hasattr(module, 'setUpModule'):
        return cls.__module__
    if 'setUpClass' in {n for c in cls.__mro__[:-1] if c is not unittest.TestCase
                        for n in vars(c)}:
        return f'{cls.__module__}.{cls.__qualname__}'
    return test.id()


def units(suite: unittest.TestSuite) -> list[tuple[str, list[unittest.TestCase]]]:
    """The suite's tests in discovery order, grouped so that fixtures stay whole."""
    grouped: dict[str, list[unittest.TestCase]] = {}
    for t in _leaves(suite):
        grouped.setdefault(_unit_key(t), []).append(t)
    return list(grouped.items())


_UNITS: list[tuple[str, list[unittest.TestCase]]] = []


def _run_unit(index: int) -> Outcome:
    name, tests = _UNITS[index]
    result = unittest.TextTestResult(io.StringIO(), descriptions=False, verbosity=0)
    t0 = time.monotonic()
    try:
        unittest.TestSuite(tests).run(result)
    finally:
        workcopy.release_all()      # the unit's builds are done: its copies are free
    out = Outcome(name, result.testsRun, time.monotonic() - t0, len(result.skipped),
                  len(result.expectedFailures),
                  needs_root=any(why.startswith(ROOT_ONLY) for _, why in result.skipped))
    for kind, items in (('FAIL', result.failures), ('ERROR', result.errors)):
        out.problems += [Problem(kind, str(t), text) for t, text in items]
    out.problems += [Problem('UNEXPECTED SUCCESS', str(t), '')
                     for t in result.unexpectedSuccesses]
    return out


def _mark(o: Outcome) -> str:
    if any(p.kind == 'ERROR' for p in o.problems):
        return 'E'
    if o.problems:
        return 'F'
    return 's' if o.skipped == o.run and o.run else '.' * max(o.run, 1)


def run(jobs: int, verbose: bool, start: Path, top: Path, only: Path | None = None,
        root_units: Path | None = None) -> int:
    suite = unittest.defaultTestLoader.discover(str(start), top_level_dir=str(top))
    _UNITS[:] = units(suite)
    if only is not None:
        wanted = set(only.read_text().split())
        _UNITS[:] = [u for u in _UNITS if u[0] in wanted]
        missing = wanted - {name for name, _ in _UNITS}
        if missing:
            print(f'{only} names units that are not tests here: {", ".join(sorted(missing))}',
                  file=sys.stderr)
            return 2
        if not _UNITS:
            print(f'{only} names no unit: nothing to run', file=sys.stderr)
            return 0
    t0 = time.monotonic()
    done: list[Outcome] = []
    ctx = multiprocessing.get_context('fork')
    with ctx.Pool(min(jobs, len(_UNITS)) or 1) as pool:
        for o in pool.imap_unordered(_run_unit, range(len(_UNITS))):
            done.append(o)
            if verbose:
                print(f'[{len(done)}/{len(_UNITS)}] {o.unit}: {o.run} tests in '
                      f'{o.seconds:.1f} s {_mark(o)[:1]}', file=sys.stderr, flush=True)
            else:
                print(_mark(o), end='', file=sys.stderr, flush=True)
    wall = time.monotonic() - t0
    problems = [p for o in done for p in o.problems]
    print(file=sys.stderr)
    for p in problems:
        print('=' * 70, f'\n{p.kind}: {p.test}\n', '-' * 70, f'\n{p.text}', sep='',
              file=sys.stderr)
    print('slowest:', ', '.join(f'{o.unit} {o.seconds:.0f} s' for o in
                                sorted(done, key=lambda o: -o.seconds)[:5]), file=sys.stderr)
    total = sum(o.run for o in done)
    print('-' * 70, f'\nRan {total} tests in {wall:.3f}s ({jobs} jobs)\n', sep='',
          file=sys.stderr)
    labels = {'FAIL': 'failures', 'ERROR': 'errors', 'UNEXPECTED SUCCESS': 'unexpected_successes'}
    counts = [(label, sum(p.kind == kind for p in problems)) for kind, label in labels.items()]
    counts += [('skipped', sum(o.skipped for o in done)),
               ('expected_failures', sum(o.expected_failures for o in done))]
    detail = ', '.join(f'{k}={n}' for k, n in counts if n)
    if root_units is not None:
        root_units.write_text(''.join(f'{o.unit}\n' for o in done if o.needs_root))
        print(f'{sum(o.needs_root for o in done)} units skipped tests that need root: '
              f'listed in {root_units}', file=sys.stderr)
    verdict = 'FAILED' if problems else 'OK'
    print(verdict + (f' ({detail})' if detail else ''), file=sys.stderr)
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='python3 -m tests.run', description=__doc__.split('\n')[0])
    ap.add_argument('--jobs', '-j', type=int, default=os.cpu_count() or 1,
                    help='worker processes (default: the number of CPUs)')
    ap.add_argument('--verbose', '-v', action='store_true', help='a line per unit')
    ap.add_argument('--start', type=Path, default=TOOLS / 'tests',
                    help='directory to discover test_*.py in (default: tools/tests)')
    ap.add_argument('--top', type=Path, default=TOOLS,
                    help='the directory the test modules are imported from (default: tools)')
    ap.add_argument('--root-units', type=Path, metavar='FILE',
                    help=f'write there the units with a test skipped as "{ROOT_ONLY}"')
    ap.add_argument('--units', type=Path, metavar='FILE',
                    help='run only the units that FILE lists, one a line (--root-units)')
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f'--jobs {args.jobs}: give 1 or more worker processes')
    return run(args.jobs, args.verbose, args.start, args.top, args.units, args.root_units)


if __name__ == '__main__':
    sys.exit(main())
