# SPDX-License-Identifier: GPL-2.0
"""Mutants: small breakages of the kernel that the tests must catch.

Each kunit/<suite>/mutants/<X.Y>/<name>.patch (caught by KUnit on an arm64
kernel) and selftests/<test>/mutants/<X.Y>/<name>.patch (caught by the
kselftest in an x86_64 guest) is a diff against the stock kernel of
version X.Y (and later ones until the next X.Y), as a patch would be
posted: it applies to the stock files, and the package's series is then
installed on the result, as review does. A diff to a file the package
adds (a suite) applies to the package's copy. The tree is never touched:
a hard-linked copy beside it takes each mutant in turn. Each kind first
runs on the unmutated copy, which must pass.

Every variant (the unmutated copy, each mutant) has a build dir of its
own, first copied from the unmutated one's, moved into the one build path
while it builds; so a second run with nothing changed rebuilds nothing:
each file kloc writes for a variant gets the mtime it had the last time
that variant's build dir saw those bytes (a record in the build dir,
.kloc-sources), or now where its bytes are new there. make then rebuilds
in a variant's dir exactly what changed for that variant, and
trees/buildstamp.py skips a build whose inputs are all as last built.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from kloc import progress
from kloc.guests import guest
from kloc.kunitpy import known, ktap, suites
from kloc.kunitpy.junit import KunitRun
from kloc.qemu import topology
from kloc.trees import buildstamp, linkcopy
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


SOURCES = '.kloc-sources'       # in a variant's build dir: rel -> [sha256, mtime_ns]
WHOSE = '.kloc-variant'         # in a variant's build dir: the variant's name
UNMUTATED = 'unmutated'


def stored(canon: Path, variant: str) -> Path:
    """Where a variant's build dir waits while another one builds."""
    return canon.with_name(f'{canon.name}@{variant or UNMUTATED}')


def _whose(build_dir: Path) -> str:
    try:
        name = (build_dir / WHOSE).read_text().strip()
    except OSError:
        return UNMUTATED            # a build dir from before variants had their own
    return name if name and '/' not in name and name != '..' else ''


def occupy(canon: Path, variant: str) -> None:
    """Put variant's build dir at canon, the one path every build uses (the build
    records absolute paths: objtool's dependencies, for one). The dir there goes back
    to its own place; a variant that has none yet starts from a copy of the unmutated
    one's (a real copy: the compiler writes objects in place), less its record and
    stamp, so that every file kloc writes for it is new to it. A dir that says it is
    no variant's is removed."""
    name = variant or UNMUTATED
    if canon.is_dir() and not canon.is_symlink():
        here = _whose(canon)
        if here == name:
            return
        away = stored(canon, here) if here else None
        if away is None or away.exists():
            shutil.rmtree(canon)
        else:
            os.rename(canon, away)
    mine = stored(canon, name)
    if mine.is_dir():
        os.rename(mine, canon)
    elif variant and stored(canon, UNMUTATED).is_dir():
        tmp = canon.with_name(canon.name + '.kloc-tmp')
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(['cp', '-a', '--reflink=auto', str(stored(canon, UNMUTATED)),
                        str(tmp)], check=True)
        for f in (SOURCES, buildstamp.STAMP):
            (tmp / f).unlink(missing_ok=True)
        os.rename(tmp, canon)
    canon.mkdir(parents=True, exist_ok=True)
    write_text(canon / WHOSE, name + '\n')


def prune(canon: Path, names: set[str]) -> None:
    """Remove the build dirs of mutants that are no longer in the package."""
    for d in canon.parent.glob(f'{canon.name}@*'):
        name = d.name.split('@', 1)[1]
        if d.is_dir() and not d.is_symlink() and name not in names | {UNMUTATED}:
            shutil.rmtree(d)


def _record(build_dir: Path) -> dict[str, tuple[str, int]]:
    """The variant's record, as kloc wrote it; anything else reads as empty (every
    file then gets a new mtime, and make rebuilds what it touches)."""
    try:
        doc = json.loads((build_dir / SOURCES).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: (v[0], v[1]) for k, v in doc.items()
            if isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)
            and isinstance(v[1], int) and not isinstance(v[1], bool)}


def write_variant(root: Path, state: Contents, build_dir: Path, base: str) -> str:
    """Write state into the copy (each file a new inode), each file with the mtime its
    bytes had when this build dir last saw them, or now; record them in the build dir
    and return the tree's buildstamp digest: base (the rest of the tree) and these."""
    seen = _record(build_dir)
    now = time.time_ns()
    record: dict[str, tuple[str, int]] = {}
    h = hashlib.sha256(base.encode())
    for rel in sorted(state):
        data = state[rel]
        sha = hashlib.sha256(data).hexdigest() if data is not None else 'deleted'
        old = seen.get(rel)
        mtime = old[1] if old is not None and old[0] == sha else now
        linkcopy.write(root, {rel: data})
        if data is not None:
            os.utime(root / rel, ns=(mtime, mtime))
        record[rel] = (sha, mtime)
        h.update(f'{rel}\0{sha}\0{mtime}\n'.encode())
    build_dir.mkdir(parents=True, exist_ok=True)
    write_text(build_dir / SOURCES, json.dumps({k: list(v) for k, v in record.items()}) + '\n')
    return h.hexdigest()


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
        self.digest = ''            # the tree's, as the variant now written makes it

    def switch(self, kind: str, variant: str, state: Contents, base: str) -> None:
        """Put variant's build dir in place and write its files into the copy."""
        canon = self.build_dir(kind)
        occupy(canon, variant)
        self.digest = write_variant(self.scratch.path, state, canon, base)

    def build_dir(self, kind: str) -> Path:
        if kind == 'kunit':
            return self.job.build_dir('arm64')
        return guest.Guest(self.scratch, 'x86_64', 'slub').build_dir()

    def kunit(self, name: str, about: str) -> MutantOutcome:
        start = time.monotonic()
        job = dataclasses.replace(self.job, tree_digest=self.digest)
        try:
            build(job, 'arm64')
        except KunitError as e:  # a mutant that does not build is not a test result
            return MutantOutcome(name, about, 'does-not-build', [str(e).splitlines()[0]])
        result = run_topology(job, TOPOLOGY)
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
            guest.build(g, self.out, self.digest)
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
    where = tree.source or tree.path
    dirty = planning.dirty_files(where)
    if dirty and not force:
        raise MutantError(
            f'{where} has uncommitted edits: {", ".join(dirty[:8])}'
            f'{" ..." if len(dirty) > 8 else ""}. The mutants are written against the '
            'tree as released plus this package; commit or stash the edits, or run with '
            'FORCE=1 to use the tree as it is')
    if dirty:
        progress.say(f'FORCE=1: the mutants run on a tree with edits to {", ".join(dirty)}')


def run(tree: Tree, cache: Path, out: Path, jobs: int, timeout: int) -> list[MutantOutcome]:
    # The tree carries the current series: it is kloc's copy (trees/workcopy.py).
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
    digest = buildstamp.tree_digest(scratch.path, leave_out=originals)
    try:
        for kind in dict.fromkeys(m.kind for m in mutants):
            attempt = runner.kunit if kind == 'kunit' else runner.guest
            runner.switch(kind, '', originals, digest)
            name = 'pristine' if kind == 'kunit' else f'pristine-{kind}'
            base = attempt(name, f'the installed tree, unmutated ({kind})')
            base.verdict = 'passes' if base.verdict == 'missed' else 'pristine-fails'
            base.pristine = True
            outcomes.append(base)
            progress.say(f'{name}: {base.verdict}')
            mine = [m for m in mutants if m.kind == kind]
            prune(runner.build_dir(kind), {m.name for m in mine})
            for m in mine:
                state: Contents = dict(originals)
                state.update(planned[m.name])
                runner.switch(kind, m.name, state, digest)
                o = attempt(m.name, m.about)
                outcomes.append(o)
                progress.say(f'mutant {m.name}: {o.verdict}'
                             + (f' by {", ".join(o.failed_cases[:3])}' if o.failed_cases
                                else ''))
    finally:
        runner.switch('kunit', '', originals, digest)
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
