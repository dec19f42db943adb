# SPDX-License-Identifier: GPL-2.0
"""make review: a patched kernel against its base, for a reply on the list.

The base is kloc's copy of the tree (KERNEL= or KDIR=), the package's series
applied there (trees/workcopy.py; the tree itself is never written). First
check(), before anything is written: the patch applies as it would be posted,
to the stock files, with the series on top of the result, in memory
(posted.py); a patch that changes what judges it is refused unless
REVIEW_PACKAGE=1 (integrity.py).

Then run(): the patched tree made (a hard-linked copy of the base's copy,
patched.py), and KUnit, every suite on every
topology, on both kernels, and the case statuses compared; the loopback
kselftest in SLUB guests of both, A/B interleaved on one topology. The
outcome goes to reporting.py: the report, JSON (with a KCIDB record,
kcidb.py) and a plot.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kloc import progress
from kloc.bench import counted as counted_runs, interleave, metrics
from kloc.counting import symbols
from kloc.guests import guest, its_boot, msi, record
from kloc.its import model
from kloc.its.figures import Boots
from kloc.kunitpy import known, runner
from kloc.kunitpy.ktap import Status
from kloc.qemu import topology
from kloc.review import integrity
from kloc.review.patch_input import PatchInfo
from kloc.review.patched import patched_tree, series_hash
from kloc.review.posted import Applied, as_posted, stock_reader
from kloc.series import changes
from kloc.series.planning import dirty_files, preview
from kloc.trees.sources import Tree


ALLOCATOR = 'slub'   # the loopback A/B runs in SLUB guests
NO_TIMED = 'the counted boots judge, and timed ones are not judged; TIMED=1 boots them too'


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
    bench: bool = True              # the loopback A/B (BENCH=0: KUnit only)
    aa: bool = False                # A/A: the base against itself
    force: bool = False             # FORCE=1: replace files edited by hand
    mde: float = 3.6                # the change of interest, percent
    counted: int = 0                # counted boots a side (QEMU plugin); 0: none
    runner: interleave.Runner = interleave.run  # the timed runs: here, or a LAVA lab
    # The timed runs: not judged where counted boots are, so booted only where none
    # are (COUNTED=0), for a LAVA lab, or with TIMED=1 (workflow.check)
    timed: bool = True
    # REVIEW_PACKAGE=1: review a patch that changes what judges it (integrity.py)
    review_package: bool = False
    # The MSI workload in arm64 guests, its_boots a side on each (its_boot.py): for a
    # patch to the ITS driver, or ARCH=arm64; ITS=0: none
    its_topologies: tuple[str, ...] = ()
    its_penalty_ns: float = model.PENALTY_NS  # ITS_REMOTE_NS=: the latency model's
    its_boots: int = its_boot.BOOTS  # boots a side per ITS topology


Statuses = dict[tuple[str, str], str]
NO_KTAP = '(boot)'   # the case of a run whose kernel printed no KTAP
BAD = (Status.FAIL, Status.CRASHED)


@dataclass(frozen=True)
class StatusChange:
    topology: str
    case: str
    base: str
    patched: str
    # Where the suite was run again on the topology (both sides): each side's
    # statuses, run by run; flaky: 'base' (it changes within the base kernel: not
    # the patch's), 'patched' (within the patched kernel only: the patch's), or ''
    runs: dict[str, list[str]] = field(default_factory=dict)
    flaky: str = ''


# topology, case -> the known upstream failure (known.py) that excuses its failure
Excuses = dict[tuple[str, str], str]


@dataclass
class ReviewOutcome:
    base: Tree
    patched: Tree
    patch: PatchInfo | None
    # the patch's KUnit changes: a status that differs between the sides and holds
    # when the suite runs again, or that changes within the patched side only
    kunit_changes: list[StatusChange] = field(default_factory=list)
    # what differed once but is not the patch's: a case that changes within the base
    # kernel when run again, and a known upstream failure excused on both sides that
    # moved from one case to another (known.py, signature checked)
    kunit_flaky: list[StatusChange] = field(default_factory=list)
    kunit_known_moved: list[StatusChange] = field(default_factory=list)
    kunit_totals: dict[str, dict[str, int]] = field(default_factory=dict)
    # side -> (topology, case path) -> status, as the runs' KTAP gave them
    kunit_statuses: dict[str, Statuses] = field(default_factory=dict)
    diffs: list[metrics.Difference] = field(default_factory=list)
    counted: counted_runs.CountedResult | None = None
    failed_runs: dict[str, int] = field(default_factory=dict)
    qemu_command: list[str] = field(default_factory=list)
    qemu: dict[str, str] = field(default_factory=dict)     # interleave.qemu_used()
    layout: dict[str, int] = field(default_factory=dict)   # symbols.moved(): base to patched
    key: dict[str, str] = field(default_factory=dict)
    reused: bool = False
    # Files of the base tree with uncommitted edits (hand edits of managed
    # files, and a git tree's modified tracked files): the review ran on them.
    dirty: list[str] = field(default_factory=list)
    # REVIEW_PACKAGE=1: what the patch changes of the package's tests (or KUnit)
    package: tuple[integrity.Touched, ...] = ()
    # topology -> side -> the ITS's reads per interrupt (its_boots boots), or why none
    its: dict[str, dict[str, Boots | str]] = field(default_factory=dict)
    # why the loopback A/B was not run though asked for: the patch cannot change the
    # guest (guests/record.py); '' where it ran
    bench_skipped: str = ''


@dataclass(frozen=True)
class Checked:
    """What check() found: the series installs, and the patch applies as posted with the
    series on top."""
    base: Tree
    patch: PatchInfo | None
    applied: Applied | None
    # what the patch changes of the package's tests (or KUnit): allowed by REVIEW_PACKAGE=1
    package: tuple[integrity.Touched, ...] = ()


def check(base: Tree, patch: PatchInfo | None, force: bool = False,
          review_package: bool = False) -> Checked:
    """All that make review can find wrong before it writes anything, to the tree or
    elsewhere: the package's series must install into the tree (InstallError, or
    EditedFilesError for hand edits it would overwrite), the patch apply as posted, to
    the stock files, and the series install on top of the result (as_posted():
    ReviewError, HunkError), and the patch change nothing of what judges it, the
    package's tests and KUnit (integrity.py), unless review_package (REVIEW_PACKAGE=1)
    (ReviewError). Writes nothing."""
    series = changes.load_series()
    planned = preview(base.path, base.version, series, force)
    if patch is None:
        return Checked(base, patch, None)
    applied, package = as_posted(base, patch, series, planned,
                                 stock_reader(base, series, force), review_package)
    return Checked(base, patch, applied, tuple(package))


def statuses(run_dir: Path, parser: Tree | None = None) -> Statuses:
    """Every case's status in the runs under run_dir; NO_KTAP when one printed none.
    parser: the tree whose kunit.py parser reads them (runner.load_run)."""
    return read_runs(run_dir, parser)[0]


Failures = tuple[known.KnownFailure, ...]


def read_runs(run_dir: Path, parser: Tree | None = None,
              failures: Failures = known.KNOWN) -> tuple[Statuses, Excuses]:
    """statuses(), and the failing cases a known upstream failure of failures explains
    (known.py: the run's kernel in its range, the tree without its fix, every failed
    check matching its signature)."""
    out, excused = {}, {}
    for meta in sorted(run_dir.glob('*.meta.json')):
        r = runner.load_run(meta, parser)
        if not r.doc.found:
            out[(r.topology, NO_KTAP)] = 'NO-KTAP'
            continue
        for suite in r.doc.suites:
            for path, leaf in suite.leaves():
                out[(r.topology, path)] = leaf.status.value
                k = known.excuse(r, path, leaf, failures) if leaf.status in BAD else None
                if k is not None:
                    excused[(r.topology, path)] = k.name
    return out, excused


def _known_moved(t: str, c: str, a: Statuses, b: Statuses, ka: Excuses, kb: Excuses) -> bool:
    """Whether a case that differs is a known upstream failure that moved: on each side
    it passes or fails as one known failure explains, and that failure is excused on
    the topology on both sides, whichever case it landed in."""
    names = {ka.get((t, c)), kb.get((t, c))} - {None}
    if len(names) != 1:
        return False
    name = names.pop()
    for s, k in ((a, ka), (b, kb)):
        if s.get((t, c)) != 'PASS' and k.get((t, c)) != name:
            return False
        if not any(top == t and n == name for (top, _), n in k.items()):
            return False
    return True


def compare_statuses(a: Statuses, b: Statuses) -> tuple[list[StatusChange],
                                                        dict[str, dict[str, int]]]:
    """The cases whose status differs, and each side's count per status."""
    differ = [StatusChange(t, c, a.get((t, c), 'ABSENT'), b.get((t, c), 'ABSENT'))
              for t, c in sorted(set(a) | set(b)) if a.get((t, c)) != b.get((t, c))]
    return differ, {'base': dict(Counter(a.values())), 'patched': dict(Counter(b.values()))}


def split_known(changes: list[StatusChange], a: Statuses, b: Statuses, ka: Excuses,
                kb: Excuses) -> tuple[list[StatusChange], list[StatusChange]]:
    """compare_statuses()'s changes, given each side's excuses (read_runs): (the
    changes, the known upstream failures that only moved between cases)."""
    moved = [d for d in changes if _known_moved(d.topology, d.case, a, b, ka, kb)]
    return [d for d in changes if d not in moved], moved


def kunit_changes(base_dir: Path, patched_dir: Path) -> tuple[list[StatusChange],
                                                              dict[str, dict[str, int]]]:
    return compare_statuses(statuses(base_dir), statuses(patched_dir))


def _status(s: Statuses, k: Excuses, key: tuple[str, str]) -> str:
    """A case's status, and the known failure that explains it, if any."""
    return s.get(key, 'ABSENT') + (f' (known: {k[key]})' if key in k else '')


def confirm(first: dict[str, tuple[Statuses, Excuses]],
            again: dict[str, tuple[Statuses, Excuses]],
            changes: list[StatusChange]) -> tuple[list[StatusChange], list[StatusChange]]:
    """The changes of the first runs, judged by a second run of each side on their
    topologies: (the patch's, the base's flaky ones). A case whose status changes
    within the base kernel is flaky, not the patch's; one that changes within the
    patched kernel only is the patch's; one that holds on both sides and still
    differs is the patch's. One that no longer differs at all is flaky on a side."""
    mine, flaky = [], []
    for c in changes:
        key = (c.topology, c.case)
        runs = {side: [_status(*first[side], key), _status(*again[side], key)]
                for side in ('base', 'patched')}
        if runs['base'][0] != runs['base'][1]:
            flaky.append(dataclasses.replace(c, runs=runs, flaky='base'))
        elif runs['patched'][0] != runs['patched'][1]:
            mine.append(dataclasses.replace(c, runs=runs, flaky='patched'))
        else:
            mine.append(dataclasses.replace(c, runs=runs))
    return mine, flaky


def run(base: Tree, patch: PatchInfo | None, opts: ReviewOptions, cache: Path,
        checked: Checked | None = None) -> ReviewOutcome:
    """The review; checked: check(base, patch), if the caller made it already.

    Nothing is built or written but kloc's copy of the tree (made as the tree was
    resolved) before check() has passed; the tree itself is never written.
    """
    if checked is None or checked.base != base or checked.patch != patch:
        checked = check(base, None if opts.aa else patch, opts.force, opts.review_package)
    if checked.package:
        progress.say(f'{integrity.OPT_IN}: the patch changes what judges it, and the '
                     'report says so first: ' + '; '.join(map(str, checked.package)))
    dirty = dirty_files(base.source or base.path)
    if dirty:
        progress.say(f'the base tree has uncommitted edits, reviewed as they are (and so '
                     f'recorded): {", ".join(dirty)}')
    if opts.aa:
        patched, reused = base, True
    else:
        assert patch is not None
        patched, reused = patched_tree(base, patch, cache, checked.applied)
        progress.say(f'patched tree {"reused" if reused else "made"}: {patched.path}')
    outcome = ReviewOutcome(base, patched, patch, reused=reused, dirty=dirty,
                            package=checked.package)
    opts.out.mkdir(parents=True, exist_ok=True)
    if opts.kunit and not opts.aa:
        _kunit(base, patched, opts, cache, outcome)
    if opts.bench:
        outcome.bench_skipped = _cannot_move(base, patch, opts)
        if outcome.bench_skipped:
            progress.say(f'loopback A/B: not run: {outcome.bench_skipped}')
        else:
            _bench(base, patched, patch, opts, outcome)
    if opts.its_topologies and not opts.aa:
        _its(base, patched, opts, outcome)
    return outcome


def _kunit(base: Tree, patched: Tree, opts: ReviewOptions, cache: Path,
           outcome: ReviewOutcome) -> None:
    """KUnit, every suite on every topology, on both kernels; where a case's status
    differs, the whole suite again on that topology on both sides (the case alone
    would find another state, the ITT pool's for one), so that a flaky case is not
    read as the patch's change."""
    def side(label: str, tree: Tree, where: str, topologies: tuple[str, ...]) -> Path:
        progress.say(f'KUnit on the {label} kernel: {", ".join(topologies)}')
        # Both sides' runs are read with the base's kunit.py parser: the patched
        # tree's is the patch's.
        out = opts.out / 'kunit' / where
        runner.run(runner.Job(tree, out, topologies, opts.jobs, opts.timeout, cache,
                              parser=base))
        return out
    sides = (('base', base), ('patched', patched))
    first = {label: read_runs(side(label, tree, label, opts.topologies), base)
             for label, tree in sides}
    (sa, ka), (sb, kb) = first['base'], first['patched']
    outcome.kunit_statuses = {'base': sa, 'patched': sb}
    changes, outcome.kunit_totals = compare_statuses(sa, sb)
    changes, outcome.kunit_known_moved = split_known(changes, sa, sb, ka, kb)
    again = tuple(t for t in opts.topologies if any(c.topology == t for c in changes))
    if not again:
        return
    progress.say(f'{len(changes)} KUnit status change(s) on {", ".join(again)}: every '
                 'suite again there, on both kernels, before they are reported')
    second = {label: read_runs(side(label, tree, f'{label}-again', again), base)
              for label, tree in sides}
    outcome.kunit_changes, outcome.kunit_flaky = confirm(first, second, changes)


ITS_DRIVER = 'drivers/irqchip/irq-gic-v3-its.c'


def its_asked(its: bool | str, arch: str) -> bool:
    """Whether the MSI workload was asked for whatever the patch: ITS=1 or ARCH=arm64."""
    return its is True or arch == 'arm64'


def its_topologies(patch: PatchInfo | None, arch: str, its: bool | str,
                   topologies: tuple[str, ...]) -> tuple[str, ...]:
    """Where the review boots the MSI workload: the ITS topologies of TOPOLOGIES, for a
    patch to the ITS driver or ARCH=arm64; none with ITS=0 (its False)."""
    if its is False:
        return ()
    wanted = its_asked(its, arch) or (patch is not None and ITS_DRIVER in patch.files)
    return tuple(t.name for t in its_boot.topologies(topologies)) if wanted else ()


def _its(base: Tree, patched: Tree, opts: ReviewOptions, outcome: ReviewOutcome) -> None:
    """The MSI workload in arm64 guests of both kernels, its_boots boots a side per
    topology: each boot's counts are exact; the boots show whether placement varies."""
    out = opts.out / 'its'
    initrd = msi.initramfs('arm64', out)
    for label, tree in (('base', base), ('patched', patched)):
        g = guest.Guest(tree, 'arm64', ALLOCATOR)
        progress.say(f'ITS interrupt path: the {label} kernel\'s arm64 guest')
        try:
            guest.build(g, out / label)
        except guest.GuestError as e:
            for t in opts.its_topologies:
                outcome.its.setdefault(t, {})[label] = str(e)
            continue
        for t in opts.its_topologies:
            try:
                fig: Boots | str = Boots(tuple(
                    its_boot.run(g, initrd, topology.get(t), opts.timeout,
                                 out / label / f'boot-{k}') for k in range(opts.its_boots)))
            except guest.GuestError as e:
                fig = str(e)
            outcome.its.setdefault(t, {})[label] = fig


def _cannot_move(base: Tree, patch: PatchInfo | None, opts: ReviewOptions) -> str:
    """Why the loopback guests need not boot (one line), or '': the patch changes only
    .c files the base guest's .config leaves out (decided before any build), or no
    file the base's guest was built from, by kbuild's record, and none that drives a
    build (guests/record.py). A/A reviews, and so make bench-aa, always run."""
    if opts.aa or patch is None:
        return ''
    g = guest.Guest(base, topology.get(opts.bench_topology).arch, ALLOCATOR)
    # First the configuration alone (seconds): a driver the guest's .config leaves out
    # needs no cold build to tell
    why = record.not_configured(base.path, guest.configure(g, opts.out / 'logs'),
                                patch.files, f'the {g.arch} guest ({g.name})')
    if why:
        return why
    guest.build(g, opts.out / 'logs')      # the record to ask; the A/B needs it anyway
    return record.untouched(g, patch.files)


def _bench(base: Tree, patched: Tree, patch: PatchInfo | None, opts: ReviewOptions,
           outcome: ReviewOutcome) -> None:
    """The loopback A/B: timed runs, then counted boots if asked."""
    topo = topology.get(opts.bench_topology)
    ga = guest.Guest(base, topo.arch, ALLOCATOR)
    gb = guest.Guest(patched, topo.arch, ALLOCATOR)
    plan = interleave.prepare(('base', ga), ('patched', gb), topo, opts.seconds, opts.runs,
                              opts.timeout, opts.out,
                              {'base': f'{base.path} {base.version}',
                               'patch': patch.sha256 if patch and not opts.aa else 'A/A',
                               'series': series_hash()[:16]}, ('config_base', 'config_patched'))
    plan = counted_runs.with_plugin(plan, opts.counted, opts.jobs)
    outcome.key = plan.key
    if opts.timed:
        progress.say(f'loopback A/B: {opts.runs} timed runs a side on {topo.name}, '
                     'interleaved')
        store = opts.runner(plan)
        outcome.key = store.key
        outcome.diffs = metrics.compare(store.records('a', opts.runs),
                                        store.records('b', opts.runs), opts.alpha,
                                        opts.mde / 100)
        outcome.failed_runs = {'base': len(store.failed_runs('a')),
                               'patched': len(store.failed_runs('b'))}
    else:
        progress.say(f'loopback A/B: no timed runs ({NO_TIMED})')
    if plan.counted:
        outcome.counted = counted_runs.run(plan, opts.alpha, opts.mde)
    outcome.qemu_command = guest.qemu_command(ga, plan.a.initrd, topo)
    outcome.qemu = interleave.qemu_used(topo)
    outcome.layout = symbols.moved(ga.build_dir() / 'System.map',
                                   gb.build_dir() / 'System.map').to_json()
