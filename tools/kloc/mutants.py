# SPDX-License-Identifier: GPL-2.0
"""Mutants: small breakages of the installed driver that the suites must catch.

Each kunit/<suite>/mutants/<X.Y>/<name>.patch applies to a tree of version
X.Y (and later, until the next X.Y) that carries the package. The tree is
never touched: a hard-linked copy beside it takes each mutant in turn, and
builds in its own build dir, laid out like the tree's so that ccache
shares objects between them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import install, ktap, progress, series
from .apply import Contents, apply_patch, touched_files
from .kunit_run import Job, KunitError, build, run_topology
from .ktree import Tree
from .paths import PACKAGE_ROOT
from .version import KernelVersion, VersionError

TOPOLOGY = 'arm64_2n_its1'  # the ITS away from the boot CPU's node


class MutantError(Exception):
    """The mutants cannot be run on this tree."""


@dataclass(frozen=True)
class Mutant:
    name: str
    about: str
    patch: Path


@dataclass
class Outcome:
    name: str
    about: str
    verdict: str                # caught, missed, hung, pristine-fails, ...
    failed_cases: list[str] = field(default_factory=list)
    seconds: float = 0.0


def load(version: KernelVersion, root: Path = PACKAGE_ROOT) -> list[Mutant]:
    """The mutants written for the newest X.Y not above version."""
    found: dict[KernelVersion, Path] = {}
    for d in root.glob('kunit/*/mutants/*'):
        try:
            v = KernelVersion.parse(d.name)
        except VersionError:
            continue  # not a version directory
        if v <= version:
            found.setdefault(v, d)
    if not found:
        raise MutantError(f'no mutants for Linux {version}')
    best = max(found)
    out = []
    for p in sorted(root.glob(f'kunit/*/mutants/{best.series}/*.patch')):
        first = p.read_text().splitlines()[0]
        about = first.removeprefix('Mutant:').strip()
        out.append(Mutant(p.stem, about, p))
    return out


def scratch_copy(tree: Tree, cache: Path) -> Tree:
    """A hard-linked copy of the tree, beside its own build dir."""
    dest = cache / 'mutants' / tree.label / 'src'
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    progress.say(f'copying {tree.path} to {dest} (hard links)')
    subprocess.run(['cp', '-al', str(tree.path), str(dest)], check=True)
    return Tree(dest, tree.version, 'mutant')


def _write(tree: Path, contents: Contents) -> None:
    """Write without touching hard-linked originals: always a new inode.

    Always written, even when unchanged: the fresh mtime makes make rebuild
    the object, which the build dir may hold from another mutant; a
    hard-linked copy carries the original's older mtime.
    """
    for rel, data in contents.items():
        target = tree / rel
        if data is None:
            target.unlink(missing_ok=True)
            continue
        tmp = target.with_name(target.name + '.kloc-tmp')
        tmp.write_bytes(data)
        tmp.replace(target)


def _failed_cases(doc: ktap.Document) -> list[str]:
    return [p for s in doc.suites for p, leaf in s.leaves()
            if leaf.status in (ktap.Status.FAIL, ktap.Status.CRASHED)]


def run(tree: Tree, cache: Path, out: Path, jobs: int, timeout: int) -> list[Outcome]:
    # The mutants are written against the current series: install it.
    install.install(tree.path, tree.version, series.load_series())
    mutants = load(tree.version)
    scratch = scratch_copy(tree, cache)
    job = Job(scratch, out, (TOPOLOGY,), jobs, timeout, cache)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    outcomes: list[Outcome] = []

    def attempt(name: str, about: str, contents: Contents) -> Outcome:
        _write(scratch.path, contents)
        start = time.monotonic()
        try:
            build(job, 'arm64')
        except KunitError as e:  # a mutant that does not build is not a test result
            return Outcome(name, about, 'does-not-build', [str(e).splitlines()[0]])
        result = run_topology(job, TOPOLOGY)
        for suffix in ('console', 'ktap', 'json', 'log', 'meta.json'):
            src = out / f'{TOPOLOGY}.{suffix}'
            if src.exists():
                src.rename(out / f'{name}.{suffix}')
        doc = result.doc
        secs = time.monotonic() - start
        if not doc.found:
            return Outcome(name, about, 'hung', [], secs)
        failed = _failed_cases(doc)
        return Outcome(name, about, 'caught' if failed else 'missed', failed, secs)

    originals: Contents = {}
    for m in mutants:
        for rel in touched_files(m.patch.read_text()):
            originals[rel] = (tree.path / rel).read_bytes()
    try:
        base = attempt('pristine', 'the installed tree, unmutated', dict(originals))
        base.verdict = 'passes' if base.verdict == 'missed' else 'pristine-fails'
        outcomes.append(base)
        progress.say(f'pristine: {base.verdict}')
        for m in mutants:
            state: Contents = dict(originals)
            state.update(apply_patch(m.patch, state, m.name))
            o = attempt(m.name, m.about, state)
            outcomes.append(o)
            progress.say(f'mutant {m.name}: {o.verdict}'
                         + (f' by {", ".join(o.failed_cases[:3])}' if o.failed_cases else ''))
    finally:
        _write(scratch.path, originals)
    (out / 'results.json').write_text(json.dumps(
        [o.__dict__ for o in outcomes], indent=1) + '\n')
    return outcomes


def render(outcomes: list[Outcome]) -> str:
    lines = [f'{"mutant":<30} {"verdict":<14} caught by']
    for o in outcomes:
        cases = ', '.join(c.rsplit('.', 2)[-2] + '.' + c.rsplit('.', 1)[-1]
                          if c.count('.') >= 2 else c for c in o.failed_cases[:3])
        more = f' (+{len(o.failed_cases) - 3})' if len(o.failed_cases) > 3 else ''
        lines.append(f'{o.name:<30} {o.verdict:<14} {cases}{more}')
    return '\n'.join(lines) + '\n'


def ok(outcomes: list[Outcome]) -> bool:
    return bool(outcomes) and outcomes[0].verdict == 'passes' and all(
        o.verdict == 'caught' for o in outcomes[1:])
