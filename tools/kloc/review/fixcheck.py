# SPDX-License-Identifier: GPL-2.0
"""make known-failures: each known upstream failure against its fix.

For every entry of tools/kloc/kunitpy/known.py for the tree's kernel, KUnit
runs on the entry's topologies twice: on the stock tree (with the
package installed), where the entry's cases must fail as declared and
nothing else may, and on a copy with the entry's fix patch applied (the
copy make review makes, patched.py), where they must pass and nothing may
fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kloc import progress
from kloc.errors import KlocError
from kloc.kunitpy import known, runner
from kloc.kunitpy.junit import KunitRun
from kloc.paths import PACKAGE_ROOT
from kloc.review import patch_input
from kloc.review.patched import patched_tree
from kloc.trees.sources import Tree


class FixCheckError(KlocError):
    """The known failures cannot be checked on this tree."""


@dataclass
class FixCheck:
    failure: known.KnownFailure
    stock: known.Verdict
    # what fails with the fix: 'kernel topology path' (other entries' failures aside)
    fixed_failures: list[str] = field(default_factory=list)
    patched: Path | None = None

    @property
    def ok(self) -> bool:
        return self.stock.ok and bool(self.stock.known) and not self.fixed_failures


def still_failing(runs: list[KunitRun], k: known.KnownFailure) -> list[str]:
    """What fails with k's fix: every failing case but those another entry (its
    fix not applied) explains, and every run that printed no KTAP."""
    others = tuple(e for e in known.KNOWN if e.name != k.name)
    return ([f'{r.kernel} {r.topology} (no KTAP: the kernel did not boot)'
             for r in runs if not r.doc.found]
            + known.classify(runs, others).unexpected)


def entries_of(tree: Tree) -> list[known.KnownFailure]:
    """The tree's known failures; FixCheckError if there are none to check here."""
    entries = known.for_version(tree.version)
    if not entries:
        raise FixCheckError(f'Linux {tree.version} has no known upstream failures '
                            '(tools/kloc/kunitpy/known.py): nothing to check; they are in '
                            + ', '.join(sorted({k.range() for k in known.KNOWN})))
    if tree.origin != 'debian':
        raise FixCheckError(f'{tree.path} is a KDIR tree: the known failures are those of '
                            'the stock kernel; use KERNEL= instead of KDIR=')
    return entries


def run(tree: Tree, cache: Path, out: Path, jobs: int, timeout: int) -> list[FixCheck]:
    checks = []
    for k in entries_of(tree):
        fix = patch_input.load(PACKAGE_ROOT / k.fix)
        progress.say(f'{k.name}: KUnit on the stock kernel ({", ".join(k.topologies)})')
        stock = runner.run(runner.Job(tree, out / k.name / 'stock', k.topologies, jobs,
                                      timeout, cache))
        v = known.classify(stock)
        patched, _ = patched_tree(tree, fix, cache)
        progress.say(f'{k.name}: KUnit with {fix.path.name}')
        fixed = runner.run(runner.Job(patched, out / k.name / 'fixed', k.topologies, jobs,
                                      timeout, cache))
        checks.append(FixCheck(k, v, still_failing(fixed, k), patched.path))
    return checks


def render(checks: list[FixCheck]) -> str:
    lines = []
    for c in checks:
        k = c.failure
        lines.append(f'{k.name} (Linux {k.range()}): {k.reason}')
        lines.append(f'  write-up: {k.doc}; fix: {k.fix}')
        lines.append(f'  stock kernel: {len(c.stock.known)} cases fail as known'
                     + (f', {len(c.stock.unexpected)} fail otherwise' if c.stock.unexpected
                        else '')
                     + (f'; {len(c.stock.fixed)} declared failures pass' if c.stock.fixed
                        else ''))
        for f in c.stock.unexpected[:10]:
            lines.append(f'    unexpected failure: {f}')
        for f in c.stock.fixed:
            lines.append(f'    unexpected pass: {f}')
        lines.append(f'  with the fix: {len(c.fixed_failures)} cases fail'
                     + ('' if c.fixed_failures else ', every case passes'))
        for f in c.fixed_failures[:10]:
            lines.append(f'    still failing: {f}')
        lines.append(f'  {"ok" if c.ok else "FAILED"}')
    return '\n'.join(lines) + '\n'
