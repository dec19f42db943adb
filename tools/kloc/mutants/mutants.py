# SPDX-License-Identifier: GPL-2.0
"""Mutants: small breakages of the kernel that the tests must catch.

Each kunit/<suite>/mutants/<X.Y>/<name>.patch (caught by KUnit on an arm64
kernel) and selftests/<test>/mutants/<X.Y>/<name>.patch (caught by the
kselftest in an x86_64 guest) is a diff against the stock kernel of
version X.Y (and later ones until the next X.Y), as a patch would be
posted: it applies to the stock files, and the package's series is then
installed on the result, as review does. A diff to a file the package
adds (a suite) applies to the package's copy. The tree is never touched:
a hard-linked copy beside it takes each mutant in turn, and builds in its
own build dirs, laid out like the tree's so that ccache shares objects
between them. Each kind first runs on the unmutated copy, which must pass.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from kloc import progress
from kloc.guests import guest
from kloc.kunitpy import known, ktap, suites
from kloc.kunitpy.junit import KunitRun
from kloc.qemu import topology
from kloc.trees import linkcopy
from kloc.atomicfile import write_text
from kloc.series import planning
from kloc.series.changes import Change, load_series
from kloc.series.patching import Contents, PatchError, apply_patch, touched_files
from kloc.series.state import InstallError
from kloc.kunitpy.runner import Job, KunitError, build, run_topology
from kloc.trees.sources import Tree
from kloc.paths import PACKAGE_ROOT
from kloc.version import KernelVersion, VersionError
from kloc.errors import KlocError

TOPOLOGY = suites.mutant_topology('kunit')          # the ITS away from the boot CPU's node
GUEST_TOPOLOGY = suites.mutant_topology('guest')


class MutantError(KlocError):
    """The mutants cannot be run on this tree."""


@dataclass(frozen=True)
class Mutant:
    name: str
    about: str
    patch: Path
    kind: str = 'kunit'     # or 'guest'


@dataclass
class MutantOutcome:
    name: str
    about: str
    verdict: str                # caught, missed, hung, passes, pristine-fails, ...
    failed_cases: list[str] = field(default_factory=list)
    seconds: float = 0.0
    pristine: bool = False


def load(version: KernelVersion, root: Path = PACKAGE_ROOT) -> list[Mutant]:
    """Each suite's mutants written for the newest X.Y not above version."""
    out = []
    for s in suites.SUITES:
        kind, mdir = s.mutant_kind, root / s.dir / 'mutants'
        if mdir.is_dir():
            found: dict[KernelVersion, Path] = {}
            for d in mdir.iterdir():
                try:
                    v = KernelVersion.parse(d.name)
                except VersionError:
                    continue  # not a version directory
                if v <= version:
                    found[v] = d
            if not found:
                continue
            for p in sorted(found[max(found)].glob('*.patch')):
                first = p.read_text().splitlines()[0]
                about = first.removeprefix('Mutant:').strip()
                out.append(Mutant(p.stem, about, p, kind))
    if not out:
        raise MutantError(f'no mutants for Linux {version}')
    return out


def scratch_copy(tree: Tree, cache: Path) -> Tree:
    """A hard-linked copy of the tree, beside its own build dir."""
    dest = cache / 'mutants' / tree.label / 'src'
    linkcopy.copy(tree.path, dest)
    return Tree(dest, tree.version, 'mutant')


def _failed_cases(run: KunitRun) -> list[str]:
    """The failing cases, but the kernel's known upstream failures (kunitpy/known.py):
    the stock kernel fails those already, so they catch nothing."""
    return [p for s in run.doc.suites for p, leaf in s.leaves()
            if leaf.status in (ktap.Status.FAIL, ktap.Status.CRASHED)
            and known.excuse(run, p, leaf) is None]


class _Runner:
    """Builds and runs the scratch copy, as it stands, for one kind of mutant."""

    def __init__(self, scratch: Tree, cache: Path, out: Path, jobs: int,
                 timeout: int) -> None:
        self.scratch, self.out, self.timeout = scratch, out, timeout
        self.job = Job(scratch, out, (TOPOLOGY,), jobs, timeout, cache)
        self.initrd: Path | None = None

    def kunit(self, name: str, about: str) -> MutantOutcome:
        start = time.monotonic()
        try:
            build(self.job, 'arm64')
        except KunitError as e:  # a mutant that does not build is not a test result
            return MutantOutcome(name, about, 'does-not-build', [str(e).splitlines()[0]])
        result = run_topology(self.job, TOPOLOGY)
        for suffix in ('console', 'ktap', 'json', 'log', 'meta.json'):
            src = self.out / f'{TOPOLOGY}.{suffix}'
            if src.exists():
                src.rename(self.out / f'{name}.{suffix}')
        doc = result.doc
        secs = time.monotonic() - start
        if not doc.found:
            return MutantOutcome(name, about, 'hung', [], secs)
        failed = _failed_cases(result)
        return MutantOutcome(name, about, 'caught' if failed else 'missed', failed, secs)

    def guest(self, name: str, about: str) -> MutantOutcome:
        """The loopback kselftest in an x86_64 SLUB guest; its counter check must fail."""
        start = time.monotonic()
        g = guest.Guest(self.scratch, 'x86_64', 'slub')
        try:
            guest.build(g, self.out)
        except guest.GuestError as e:
            return MutantOutcome(name, about, 'does-not-build', [str(e).splitlines()[0]])
        if self.initrd is None:
            binary = guest.static_selftest('x86_64', self.scratch.path /
                                           'tools/testing/selftests', self.out)
            self.initrd = guest.initramfs(binary, ['-d', '0.5', '-w', '0.2'],
                                          self.out / 'initramfs.gz', 'x86_64')
        r = guest.run(g, self.initrd, topology.get(GUEST_TOPOLOGY), self.timeout,
                      self.out / f'{name}.console')
        secs = time.monotonic() - start
        if r.ok:
            return MutantOutcome(name, about, 'missed', [], secs)
        rec = r.record or {}
        # The kselftest states its counter verdict; the rule lives in its C only.
        if rec.get('counters_ok') is False:
            return MutantOutcome(name, about, 'caught',
                                 [f'lo_counters: lo counted tx {rec.get("lo_tx")} '
                                  f'rx {rec.get("lo_rx")} dropped {rec.get("lo_dropped")} '
                                  f'of {rec.get("sent")} sent'], secs)
        if rec.get('counters_ok') is not True:
            return MutantOutcome(name, about, 'hung', [r.why], secs)
        return MutantOutcome(name, about, 'failed-otherwise', [r.why], secs)


def installed_with(m: Mutant, tree: Tree, series: list[Change]) -> Contents:
    """The files m touches as the tree would hold them with m applied to the stock
    kernel (or to the package's own copy of a file the series adds) and the series
    installed on top; MutantError names a mutant that does not apply."""
    added = {a.dst: a.src for c in series for a in c.additions}
    _, stock = planning.pristine_reader(tree.path)
    base: Contents = {}
    for rel in touched_files(m.patch.read_text()):
        base[rel] = added[rel].read_bytes() if rel in added else stock(rel)
    try:
        mutated = apply_patch(m.patch, base, m.name)
    except PatchError as e:
        raise MutantError(f'{m.patch}: does not apply to stock Linux {tree.version}: '
                          f'{e}') from e

    def read(rel: str) -> bytes | None:
        return mutated[rel] if rel in mutated and rel not in added else stock(rel)
    try:
        final = planning.plan_from(read, tree.path, tree.version, series).final
    except InstallError as e:
        raise MutantError(f'{m.patch}: the series does not install on top of it: '
                          f'{e}') from e
    return {rel: mutated[rel] if rel in added else final.get(rel, mutated[rel])
            for rel in mutated}


def check_tree(tree: Tree, force: bool) -> None:
    """The mutants are written against the tree as released plus this package: refuse
    a tree with uncommitted edits (planning.dirty_files), unless FORCE=1."""
    dirty = planning.dirty_files(tree.path)
    if dirty and not force:
        raise MutantError(
            f'{tree.path} has uncommitted edits: {", ".join(dirty[:8])}'
            f'{" ..." if len(dirty) > 8 else ""}. The mutants are written against the '
            'tree as released plus this package; commit or stash the edits, or run with '
            'FORCE=1 to use the tree as it is')
    if dirty:
        progress.say(f'FORCE=1: the mutants run on a tree with edits to {", ".join(dirty)}')


def run(tree: Tree, cache: Path, out: Path, jobs: int, timeout: int) -> list[MutantOutcome]:
    # The tree carries the current series: the caller installs it.
    mutants = load(tree.version)
    series = load_series()
    planned = {m.name: installed_with(m, tree, series) for m in mutants}
    scratch = scratch_copy(tree, cache)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    runner = _Runner(scratch, cache, out, jobs, timeout)
    outcomes: list[MutantOutcome] = []

    originals: Contents = {}
    for m in mutants:
        for rel in touched_files(m.patch.read_text()):
            originals[rel] = (tree.path / rel).read_bytes()
    try:
        for kind in dict.fromkeys(m.kind for m in mutants):
            attempt = runner.kunit if kind == 'kunit' else runner.guest
            linkcopy.write(scratch.path, originals)
            name = 'pristine' if kind == 'kunit' else f'pristine-{kind}'
            base = attempt(name, f'the installed tree, unmutated ({kind})')
            base.verdict = 'passes' if base.verdict == 'missed' else 'pristine-fails'
            base.pristine = True
            outcomes.append(base)
            progress.say(f'{name}: {base.verdict}')
            for m in (m for m in mutants if m.kind == kind):
                state: Contents = dict(originals)
                state.update(planned[m.name])
                linkcopy.write(scratch.path, state)
                o = attempt(m.name, m.about)
                outcomes.append(o)
                progress.say(f'mutant {m.name}: {o.verdict}'
                             + (f' by {", ".join(o.failed_cases[:3])}' if o.failed_cases
                                else ''))
    finally:
        linkcopy.write(scratch.path, originals)
    write_text(out / 'results.json', json.dumps(
        [o.__dict__ for o in outcomes], indent=1) + '\n')
    return outcomes


def verdict(outcomes: list[MutantOutcome], out: Path) -> str:
    """The last line: PASS or FAIL, how many mutants were caught, the pristine runs."""
    caught = sum(o.verdict == 'caught' for o in outcomes if not o.pristine)
    tried = sum(not o.pristine for o in outcomes)
    pristine = ', '.join(f'{o.name} {o.verdict}' for o in outcomes if o.pristine)
    return (f'{"PASS" if ok(outcomes) else "FAIL"}: {caught} of {tried} mutants caught; '
            f'{pristine}; logs in {out}\n')


def render(outcomes: list[MutantOutcome]) -> str:
    lines = [f'{"mutant":<30} {"verdict":<14} caught by']
    for o in outcomes:
        cases = ', '.join(c.rsplit('.', 2)[-2] + '.' + c.rsplit('.', 1)[-1]
                          if c.count('.') >= 2 else c for c in o.failed_cases[:3])
        more = f' (+{len(o.failed_cases) - 3})' if len(o.failed_cases) > 3 else ''
        lines.append(f'{o.name:<30} {o.verdict:<14} {cases}{more}')
    return '\n'.join(lines) + '\n'


def ok(outcomes: list[MutantOutcome]) -> bool:
    return bool(outcomes) and all(
        o.verdict == ('passes' if o.pristine else 'caught') for o in outcomes)
