# SPDX-License-Identifier: GPL-2.0
"""make review: a patched kernel against its base, for a reply on the list.

The base is the tree (KERNEL= or KDIR=) with this package installed. The
patch is applied in memory first, so one that does not apply fails before
any build, naming the hunk. The patched tree is a hard-linked copy in
KLOC_CACHE/review/<key>/, key = hash of the tree, the package series and
the patch; its build dirs sit beside it, so a second review of the same
pair rebuilds nothing (a changed config fragment rebuilds in place).

Then: KUnit, every suite on every topology, on both kernels, and the case
statuses compared; the loopback kselftest in SLUB guests of both, A/B
interleaved on one topology; the report, JSON (with a KCIDB record) and
a plot.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kloc import progress
from kloc.bench import counted as counted_runs, interleave, metrics
from kloc.guests import guest
from kloc.kunit import runner
from kloc.qemu import topology
from kloc.series import changes, install
from kloc.trees import linkcopy
from kloc.series.patching import DEFAULT_MODE, Contents, Modes, apply_text, conflict, file_changes
from kloc.errors import KlocError
from kloc.trees.sources import Tree, uncommitted
from kloc.review import copies
from kloc.review.patch_input import PatchInfo


ALLOCATOR = 'slub'   # the loopback A/B runs in SLUB guests


class ReviewError(KlocError):
    """The review cannot go on; the message says why and what to do."""


@dataclass(frozen=True)
class ReviewOptions:
    topologies: tuple[str, ...]     # KUnit topologies
    bench_topology: str             # where the loopback A/B runs
    runs: int
    seconds: float
    alpha: float
    timeout: int
    jobs: int
    out: Path
    kunit: bool = True
    aa: bool = False                # A/A: the base against itself
    force: bool = False             # FORCE=1: replace files edited by hand
    mde: float = 3.6                # the change of interest, percent
    counted: int = 0                # counted boots a side (QEMU plugin); 0: none
    runner: interleave.Runner = interleave.run  # the timed runs: here, or a LAVA lab


Statuses = dict[tuple[str, str], str]
NO_KTAP = '(boot)'   # the case of a run whose kernel printed no KTAP


@dataclass(frozen=True)
class StatusChange:
    topology: str
    case: str
    base: str
    patched: str


@dataclass
class ReviewOutcome:
    base: Tree
    patched: Tree
    patch: PatchInfo | None
    kunit_changes: list[StatusChange] = field(default_factory=list)
    kunit_totals: dict[str, dict[str, int]] = field(default_factory=dict)
    # side -> (topology, case path) -> status, as the runs' KTAP gave them
    kunit_statuses: dict[str, Statuses] = field(default_factory=dict)
    diffs: list[metrics.Difference] = field(default_factory=list)
    counted: counted_runs.CountedResult | None = None
    failed_runs: dict[str, int] = field(default_factory=dict)
    qemu_command: list[str] = field(default_factory=list)
    key: dict[str, str] = field(default_factory=dict)
    reused: bool = False
    # Files of the base tree with uncommitted edits (hand edits of managed
    # files, and a git tree's modified tracked files): the review ran on them.
    dirty: list[str] = field(default_factory=list)


def series_hash() -> str:
    """What the package installs: every hook patch and added file, by content."""
    h = hashlib.sha256()
    for change in changes.load_series():
        files = list(change.patches.values()) + [a.src for a in change.additions]
        h.update(change.name.encode() + b'\0' + change.body.encode())
        for p in files:
            h.update(str(p).encode() + b'\0' + p.read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Applied:
    """The patch applied in memory: every file it touches (None: absent after it), the
    permission bits of each that is there."""
    contents: Contents
    modes: Modes


@dataclass(frozen=True)
class Checked:
    """What check() found: the series installs, and the patch applies on top of it."""
    base: Tree
    patch: PatchInfo | None
    applied: Applied | None


def _mode(p: Path) -> int:
    try:
        return stat.S_IMODE(p.stat().st_mode)
    except OSError:
        return DEFAULT_MODE


def apply_to(base: Tree, patch: PatchInfo, planned: Contents) -> Applied:
    """The patch applied in memory to the base as planned: a file in planned is as the
    install would leave it, any other as the tree has it. Writes nothing.

    A file the patch changes, deletes, renames or copies must be there, and one it
    creates (or renames or copies to) must not: else ReviewError, naming it. A hunk
    that does not apply is a HunkError.
    """
    def read(rel: str) -> bytes | None:
        if rel in planned:
            return planned[rel]
        p = base.path / rel
        return p.read_bytes() if p.is_file() else None

    state: Contents = {rel: read(rel) for rel in patch.files}
    problem = conflict(file_changes(patch.text), lambda rel: state.get(rel) is not None)
    if problem:
        change, rel, what = problem
        verb = change.verb if rel == (change.old or change.new) or what == 'missing' \
            else f'{change.verb} {change.old} to'
        tree = f'Linux {base.version} at {base.path}'
        if what == 'missing':
            raise ReviewError(f'PATCH={patch.path.name} {verb} {rel}, which {tree} does '
                              'not have: is the patch for another tree? Give the right one '
                              'with KDIR= or KERNEL=')
        raise ReviewError(f'PATCH={patch.path.name} {verb} {rel}, which {tree} already '
                          'has: is the patch for another tree, or applied already? Give '
                          'the right one with KDIR= or KERNEL=')
    modes = {rel: _mode(base.path / rel) for rel, data in state.items() if data is not None}
    contents, out_modes = apply_text(patch.text, state, modes, f'PATCH={patch.path.name}',
                                     patch.path.name)    # HunkError
    return Applied(contents, out_modes)


def check(base: Tree, patch: PatchInfo | None, force: bool = False) -> Checked:
    """All that make review can find wrong before it writes anything, to the tree or
    elsewhere: the package's series must install into the tree (InstallError, or
    EditedFilesError for hand edits it would overwrite), and the patch apply on the
    installed state, hand edits it keeps included (ReviewError, HunkError). Writes
    nothing."""
    planned = install.preview(base.path, base.version, changes.load_series(), force)
    return Checked(base, patch, apply_to(base, patch, planned) if patch else None)


def dirty_files(base: Tree) -> list[str]:
    """The base tree's uncommitted edits: managed files edited by hand, and a git
    tree's changed tracked files that are not the package's."""
    managed = install.managed_files(base.path)
    return sorted(set(install.edited_files(base.path))
                  | {f for f in uncommitted(base.path) if f not in managed})


def _dirty_digest(base: Tree, dirty: list[str]) -> str:
    h = hashlib.sha256()
    for rel in dirty:
        p = base.path / rel
        h.update(rel.encode() + b'\0' + (p.read_bytes() if p.is_file() else b'-') + b'\0')
    return h.hexdigest()


def patched_tree(base: Tree, patch: PatchInfo, cache: Path,
                 applied: Applied | None = None) -> tuple[Tree, bool]:
    """The base with the patch applied, made once per tree, series and patch.

    applied: the patch applied in memory (check()); else it is applied to the
    base tree as it is now.
    """
    if applied is None:
        applied = apply_to(base, patch, {})
    # The key covers the base's uncommitted edits: a copy made before an edit is
    # not the base with the patch after it.
    key = hashlib.sha256('\0'.join([str(base.path), str(base.version), series_hash(),
                                    patch.sha256, _dirty_digest(base, dirty_files(base))]
                                   ).encode()).hexdigest()[:16]
    root = cache / 'review' / f'{base.label}-{key}'
    copies.use(cache, root)
    src, stamp = root / 'src', root / 'kloc-review.json'
    want = {'base': str(base.path), 'version': str(base.version), 'patch': patch.sha256,
            'files': sorted(patch.files)}
    if src.is_dir() and stamp.exists() and json.loads(stamp.read_text()) == want:
        return Tree(src, base.version, 'review'), True
    stamp.unlink(missing_ok=True)
    linkcopy.copy(base.path, src)
    linkcopy.write(src, applied.contents)
    # Each file written is a new inode, not the base's: its mode (the base's, or the
    # one the patch sets) can be set without touching the base.
    for rel, data in applied.contents.items():
        if data is not None:
            os.chmod(src / rel, applied.modes.get(rel, DEFAULT_MODE))
    stamp.write_text(json.dumps(want, indent=1) + '\n')
    return Tree(src, base.version, 'review'), False


def statuses(run_dir: Path) -> Statuses:
    """Every case's status in the runs under run_dir; NO_KTAP when one printed none."""
    out = {}
    for meta in sorted(run_dir.glob('*.meta.json')):
        r = runner.load_run(meta)
        if not r.doc.found:
            out[(r.topology, NO_KTAP)] = 'NO-KTAP'
            continue
        for suite in r.doc.suites:
            for path, leaf in suite.leaves():
                out[(r.topology, path)] = leaf.status.value
    return out


def compare_statuses(a: Statuses, b: Statuses) -> tuple[list[StatusChange],
                                                        dict[str, dict[str, int]]]:
    """The cases whose status differs, and each side's count per status."""
    differ = [StatusChange(t, c, a.get((t, c), 'ABSENT'), b.get((t, c), 'ABSENT'))
              for t, c in sorted(set(a) | set(b)) if a.get((t, c)) != b.get((t, c))]
    return differ, {'base': dict(Counter(a.values())), 'patched': dict(Counter(b.values()))}


def kunit_changes(base_dir: Path, patched_dir: Path) -> tuple[list[StatusChange],
                                                              dict[str, dict[str, int]]]:
    return compare_statuses(statuses(base_dir), statuses(patched_dir))


def run(base: Tree, patch: PatchInfo | None, opts: ReviewOptions, cache: Path,
        checked: Checked | None = None) -> ReviewOutcome:
    """The review; checked: check(base, patch), if the caller made it already.

    Nothing is written, to the tree or anywhere, before check() has passed.
    """
    if checked is None or checked.base != base or checked.patch != patch:
        checked = check(base, None if opts.aa else patch, opts.force)
    install.install(base.path, base.version, changes.load_series(), force=opts.force,
                    save=cache / 'dropped-edits' / time.strftime('%Y%m%d-%H%M%S'))
    dirty = dirty_files(base)
    if dirty:
        progress.say(f'the base tree has uncommitted edits, reviewed as they are (and so '
                     f'recorded): {", ".join(dirty)}')
    if opts.aa:
        patched, reused = base, True
    else:
        assert patch is not None
        patched, reused = patched_tree(base, patch, cache, checked.applied)
        progress.say(f'patched tree {"reused" if reused else "made"}: {patched.path}')
    outcome = ReviewOutcome(base, patched, patch, reused=reused, dirty=dirty)
    opts.out.mkdir(parents=True, exist_ok=True)
    if opts.kunit and not opts.aa:
        for label, tree in (('base', base), ('patched', patched)):
            progress.say(f'KUnit on the {label} kernel: {", ".join(opts.topologies)}')
            runner.run(runner.Job(tree, opts.out / 'kunit' / label, opts.topologies,
                                  opts.jobs, opts.timeout, cache))
        outcome.kunit_statuses = {side: statuses(opts.out / 'kunit' / side)
                                  for side in ('base', 'patched')}
        outcome.kunit_changes, outcome.kunit_totals = compare_statuses(
            outcome.kunit_statuses['base'], outcome.kunit_statuses['patched'])

    topo = topology.get(opts.bench_topology)
    ga = guest.Guest(base, topo.arch, ALLOCATOR)
    gb = guest.Guest(patched, topo.arch, ALLOCATOR)
    plan = interleave.prepare(('base', ga), ('patched', gb), topo, opts.seconds, opts.runs,
                              opts.timeout, opts.out,
                              {'base': f'{base.path} {base.version}',
                               'patch': patch.sha256 if patch and not opts.aa else 'A/A',
                               'series': series_hash()[:16]}, ('config_base', 'config_patched'))
    plan = counted_runs.with_plugin(plan, opts.counted)
    outcome.key = plan.key
    progress.say(f'loopback A/B: {opts.runs} runs a side on {topo.name}, interleaved')
    store = opts.runner(plan)
    outcome.key = store.key
    outcome.diffs = metrics.compare(store.records('a', opts.runs),
                                    store.records('b', opts.runs), opts.alpha,
                                    opts.mde / 100)
    if plan.counted:
        outcome.counted = counted_runs.run(plan, opts.alpha, opts.mde)
    outcome.failed_runs = {'base': len(store.failed_runs('a')),
                           'patched': len(store.failed_runs('b'))}
    outcome.qemu_command = guest.qemu_command(ga, plan.a.initrd, topo)
    return outcome
