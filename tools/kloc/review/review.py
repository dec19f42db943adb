# SPDX-License-Identifier: GPL-2.0
"""make review: a patched kernel against its base, for a reply on the list.

The base is the tree (KERNEL= or KDIR=) with this package installed. The
patch is applied as it would be posted: to the stock files (a file the
package hooks as it was before the package, .kloc/orig; a file the package
adds whole, the package's copy; any other file as the tree has it), and the
package's series is then installed on top of the result, in memory, before
any build. A patch that does not apply to the stock files fails naming the
hunk; one that changes the lines the package puts its own next to is
refused naming the package's change and the line; one made against the
installed tree (it applies only there) is refused as such, unless it
changes the package's own lines: then integrity.py judges it.

A managed file the base carries with hand edits (install keeps them, and
the base is reviewed with them): the patch applies to the edited file with
the package's lines taken out (install.recover_original), and the series
goes on top again. Where the edits changed the package's lines, so that
they no longer come out, the review is refused, naming the file: save and
undo the edits first.

The patched tree is a hard-linked copy in KLOC_CACHE/review/<key>/, key =
hash of the tree, the package series, the patch and the contents it
writes; its build dirs sit beside it, so a second review of the same pair
rebuilds nothing (a changed config fragment rebuilds in place).

Then: KUnit, every suite on every topology, on both kernels, and the case
statuses compared; the loopback kselftest in SLUB guests of both, A/B
interleaved on one topology; the report, JSON (with a KCIDB record) and
a plot.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kloc import progress
from kloc.bench import counted as counted_runs, interleave, metrics
from kloc.guests import guest
from kloc.kunit import runner
from kloc.qemu import topology
from kloc.series import changes, install
from kloc.series.changes import Change
from kloc.trees import linkcopy
from kloc.series.patching import DEFAULT_MODE, Contents, HunkError, Modes, apply_text, conflict, \
    file_changes
from kloc.errors import KlocError
from kloc.paths import dropped_edits_dir
from kloc.trees.sources import Tree, uncommitted
from kloc.version import KernelVersion
from kloc.review import copies, integrity
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
    bench: bool = True              # the loopback A/B (BENCH=0: KUnit only)
    aa: bool = False                # A/A: the base against itself
    force: bool = False             # FORCE=1: replace files edited by hand
    mde: float = 3.6                # the change of interest, percent
    counted: int = 0                # counted boots a side (QEMU plugin); 0: none
    runner: interleave.Runner = interleave.run  # the timed runs: here, or a LAVA lab
    # REVIEW_PACKAGE=1: review a patch that changes what judges it (integrity.py)
    review_package: bool = False


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
    # REVIEW_PACKAGE=1: what the patch changes of the package's tests (or KUnit)
    package: tuple[integrity.Touched, ...] = ()


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
    """The patch applied in memory: every file it touches as the patched tree has it
    (None: absent after it), the permission bits of each that is there.

    found: each of those files as the patch found it: the stock file (with the
    user's kept edits, the package's lines taken out), the package's copy of a
    file it adds whole. stock: False only for a patch to the package's own
    lines made against the installed tree (REVIEW_PACKAGE=1): it found, and
    changed, the files as the package leaves them.
    """
    contents: Contents
    modes: Modes
    found: Contents = field(default_factory=dict)
    stock: bool = True


@dataclass(frozen=True)
class Checked:
    """What check() found: the series installs, and the patch applies as posted with the
    series on top."""
    base: Tree
    patch: PatchInfo | None
    applied: Applied | None
    # what the patch changes of the package's tests (or KUnit): allowed by REVIEW_PACKAGE=1
    package: tuple[integrity.Touched, ...] = ()


def _mode(p: Path) -> int:
    try:
        return stat.S_IMODE(p.stat().st_mode)
    except OSError:
        return DEFAULT_MODE


def _read(base: Tree, rel: str) -> bytes | None:
    p = base.path / rel
    return p.read_bytes() if p.is_file() else None


def found(base: Tree, patch: PatchInfo, start: Contents) -> Contents:
    """Every file the patch touches, as it finds it: a file in start as start has it
    (stock_start(): the stock file), any other as the tree has it (None: absent)."""
    return {rel: start[rel] if rel in start else _read(base, rel) for rel in patch.files}


def stock_reader(base: Tree, series: list[Change], force: bool = False) -> install.PristineFn:
    """The stock content of each file: a managed file's original (.kloc/orig, or, for a
    tree whose .kloc/ is gone, recovered from the series, as install.preview() does),
    any other as the tree has it (None: absent)."""
    try:
        m = install.read_manifest(base.path, series)
    except install.DamagedStateError:
        if not force:
            raise
        m = None
    if m is not None:
        return install.pristine_reader(base.path, series)[1]
    rebuilt, origs = install.reconstruct(base.path, base.version, series)
    files = rebuilt.files if rebuilt else {}

    def read(rel: str) -> bytes | None:
        return origs.get(rel) if rel in files else _read(base, rel)
    return read


def stock_start(base: Tree, patch: PatchInfo, series: list[Change], planned: Contents,
                read: install.PristineFn) -> Contents:
    """Each file the patch touches as it is posted against: the stock file (read());
    a file the package adds whole, the package's copy as the install leaves it
    (planned); a managed file with the user's kept edits (the base is reviewed with
    them), the edited file with the package's lines taken out. ReviewError when those
    no longer come out: the edits changed them."""
    whole, _ = integrity.package_files(base.version, series)
    kept = {rel for rel in install.edited_files(base.path)
            if rel in planned and planned[rel] == _read(base, rel)}
    start: Contents = {}
    for rel in patch.files:
        if rel in whole and rel in planned:
            start[rel] = planned[rel]
        elif rel in kept:
            ok, original = install.recover_original(rel, planned[rel], base.version, series)
            if not ok:
                raise ReviewError(
                    f'PATCH={patch.path.name} changes {rel}, which carries your uncommitted '
                    'edits, and they change the package\'s own lines in it, so the package '
                    'cannot be taken out of it to apply the patch as posted: save your edits '
                    f'(git diff, or a copy of {rel}) and undo them (git stash does both in a '
                    'git tree), then run again; nothing was built or written')
            start[rel] = original
        else:
            start[rel] = read(rel)
    return start


def apply_to(base: Tree, patch: PatchInfo, start: Contents) -> Applied:
    """The patch applied in memory to start (stock_start(), or the base as planned by
    the install); a file not in start as the tree has it. Writes nothing.

    A file the patch changes, deletes, renames or copies must be there, and one it
    creates (or renames or copies to) must not: else ReviewError, naming it. A hunk
    that does not apply is a HunkError.
    """
    state = found(base, patch, start)
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
    return Applied(contents, out_modes, state)


_FAILED = re.compile(r'(\S+): hunk #(\d+) \(at line \d+\) does not apply')
_HUNK = re.compile(r'@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@')


@dataclass(frozen=True)
class _Hunk:
    new: int        # where it starts, in the file as the hook leaves it (1-based)
    new_lines: int
    delta: int      # the lines it adds, less those it removes
    change: int     # its first added or removed line, in the file as the hook finds it


def _hunks(text: str, rel: str) -> list[_Hunk]:
    """The hunks of a hook patch's section for rel, in order."""
    out: list[_Hunk] = []
    current: str | None = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith('+++ '):
            current = line[4:].split('\t')[0].strip().partition('/')[2]
            continue
        m = _HUNK.match(line)
        if m is None or current != rel:
            continue
        old, old_n = int(m.group(1)), int(m.group(2) or 1)
        new, new_n = int(m.group(3)), int(m.group(4) or 1)
        at = old
        for body in lines[i + 1:]:
            if body.startswith(('+', '-')) and not body.startswith(('+++ ', '--- ')):
                break
            if not body.startswith((' ', '\\')) and body:
                break
            if body.startswith(' ') or not body:
                at += 1
        out.append(_Hunk(new, new_n, new_n - old_n, max(at, 1)))
    return out


def _stock_line(series: list[Change], change: Change, version: KernelVersion, rel: str,
                n: int) -> int | None:
    """Where hunk #n of change's hook for rel puts its lines, as a line of the stock
    file: the earlier changes' hunks above it taken out."""
    hook = change.patch_for(version)
    hunks = _hunks(hook.read_text(), rel) if hook is not None else []
    if not 0 < n <= len(hunks):
        return None
    line = hunks[n - 1].change
    for earlier in reversed(series[:series.index(change)]):
        hook = earlier.patch_for(version)
        for h in _hunks(hook.read_text(), rel) if hook is not None else []:
            if h.new + h.new_lines <= line:
                line -= h.delta
    return max(line, 1)


def _not_on_top(patch: PatchInfo, series: list[Change], base: Tree,
                e: install.InstallError) -> str:
    """Why the series does not install on the patched stock files, by the package's
    change and the line where it puts its own."""
    cause = str(e.__cause__ or e)
    change = next((c for c in series if cause.startswith(c.name + ': ')), None)
    if change is None:
        return (f'PATCH={patch.path.name}: the package cannot be installed on top of it: '
                f'{e}; nothing was built or written')
    who = f'the package\'s change {change.name} ({change.subject})'
    where: dict[str, list[str]] = {}
    for m in _FAILED.finditer(cause):
        line = _stock_line(series, change, base.version, m.group(1), int(m.group(2)))
        where.setdefault(m.group(1), []).append(str(line) if line else '?')
    if not where:
        detail = cause.split(': ', 2)[-1]
        return (f'PATCH={patch.path.name}: {who} cannot be installed on top of it: {detail}; '
                'nothing was built or written')
    spots = ', and '.join(
        f'{rel} around line{"s" if len(ns) > 1 else ""} {" and ".join(dict.fromkeys(ns))}'
        for rel, ns in where.items())
    return (f'PATCH={patch.path.name} changes {spots}, where {who} adds its lines: the '
            'package cannot be installed on top of it (the patch changes the lines it goes '
            'next to, or on); nothing was built or written')


def _judges_itself(patch: PatchInfo, package: list[integrity.Touched]) -> ReviewError:
    return ReviewError(
        f'PATCH={patch.path.name} changes what judges it: '
        + '; '.join(map(str, package)) + '. make review runs the package\'s own tests '
        'on both kernels, so a patch that changes them (or KUnit) would judge itself; '
        f'nothing was built or written. To review such a change anyway, run again with '
        f'{integrity.OPT_IN}: the report, review.json and the KCIDB record then say so '
        'first')


STOCK = ('the patch was applied as posted, to the stock files (the tree without the '
         'package, which is installed on top after)')


def as_posted(base: Tree, patch: PatchInfo, series: list[Change], planned: Contents,
              read: install.PristineFn, review_package: bool = False
              ) -> tuple[Applied, list[integrity.Touched]]:
    """The patch applied to the stock files (stock_start()), and the series installed on
    top of the result: (every file the patch touches as the patched tree has it, what
    it changes of what judges it). planned: the managed files as the install leaves the
    base; read: the stock files (stock_reader()).

    ReviewError: a file missing or already there; a change to what judges it, unless
    review_package; the series does not install on top (named by the package's change
    and the line). HunkError: a hunk does not apply to the stock files."""
    start = stock_start(base, patch, series, planned, read)
    try:
        posted = apply_to(base, patch, start)
    except HunkError as e:
        return _on_installed(base, patch, series, planned, review_package, e)
    package = integrity.touched(base.version, series, patch.files, posted.found,
                                posted.contents, stock=True)
    if package and not review_package:
        raise _judges_itself(patch, package)
    whole, _ = integrity.package_files(base.version, series)

    def patched(rel: str) -> bytes | None:
        return posted.contents[rel] if rel in posted.contents and rel not in whole \
            else read(rel)
    try:
        plan = install.plan_from(patched, base.path, base.version, series)
    except install.InstallError as e:
        raise ReviewError(_not_on_top(patch, series, base, e)) from e
    contents = {rel: data if rel in whole or rel not in plan.final else plan.final[rel]
                for rel, data in posted.contents.items()}
    return Applied(contents, posted.modes, posted.found), package


def _on_installed(base: Tree, patch: PatchInfo, series: list[Change], planned: Contents,
                  review_package: bool, stock: HunkError
                  ) -> tuple[Applied, list[integrity.Touched]]:
    """A patch that does not apply to the stock files: made against the installed tree?
    One that changes the package's own lines there is integrity.py's to judge (and,
    with review_package, reviewed as a change to the package); any other fails."""
    message = f'{stock}; {STOCK}'
    try:
        applied = apply_to(base, patch, planned)
    except (HunkError, ReviewError):
        raise HunkError(message) from stock
    package = integrity.touched(base.version, series, patch.files, applied.found,
                                applied.contents)
    if not package:
        raise HunkError(
            f'{message}. It applies to the files as the package leaves them: it was made '
            'against a tree with the package installed, not as it would be posted. Make it '
            'against the stock tree (git diff in a tree without the package), then run '
            'again') from stock
    if not review_package:
        raise _judges_itself(patch, package)
    return Applied(applied.contents, applied.modes, applied.found, stock=False), package


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
    planned = install.preview(base.path, base.version, series, force)
    if patch is None:
        return Checked(base, patch, None)
    applied, package = as_posted(base, patch, series, planned,
                                 stock_reader(base, series, force), review_package)
    return Checked(base, patch, applied, tuple(package))


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


def _applied_digest(applied: Applied) -> str:
    h = hashlib.sha256()
    for rel, data in sorted(applied.contents.items()):
        h.update(rel.encode() + b'\0' + (b'-' if data is None else b'+' + data) + b'\0'
                 + str(applied.modes.get(rel, '')).encode() + b'\0')
    return h.hexdigest()


def _applied_now(base: Tree, patch: PatchInfo) -> Applied:
    """The patch applied to the base as it is: as posted, with the series on top, if
    the base carries the package (its managed files as they are: the install's)."""
    managed = install.managed_files(base.path)
    if not managed:
        return apply_to(base, patch, {})
    series = changes.load_series()
    planned = {rel: _read(base, rel) for rel in managed}
    applied, _ = as_posted(base, patch, series, planned, stock_reader(base, series),
                           review_package=True)
    return applied


def patched_tree(base: Tree, patch: PatchInfo, cache: Path,
                 applied: Applied | None = None) -> tuple[Tree, bool]:
    """The base with the patch applied, made once per tree, series and patch.

    applied: the patch applied in memory (check()); else it is applied here, to
    the base tree as it is now: as posted, with the series on top (as_posted()),
    where the tree carries the package; as the tree has it where it does not.
    """
    if applied is None:
        applied = _applied_now(base, patch)
    # The key covers the base's uncommitted edits (a copy made before an edit is
    # not the base with the patch after it), and what the copy gets written: the
    # stock files patched, the package on top.
    key = hashlib.sha256('\0'.join([str(base.path), str(base.version), series_hash(),
                                    patch.sha256, _dirty_digest(base, dirty_files(base)),
                                    _applied_digest(applied)]).encode()).hexdigest()[:16]
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


def statuses(run_dir: Path, parser: Tree | None = None) -> Statuses:
    """Every case's status in the runs under run_dir; NO_KTAP when one printed none.
    parser: the tree whose kunit.py parser reads them (runner.load_run)."""
    out = {}
    for meta in sorted(run_dir.glob('*.meta.json')):
        r = runner.load_run(meta, parser)
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
        checked = check(base, None if opts.aa else patch, opts.force, opts.review_package)
    if checked.package:
        progress.say(f'{integrity.OPT_IN}: the patch changes what judges it, and the '
                     'report says so first: ' + '; '.join(map(str, checked.package)))
    install.install(base.path, base.version, changes.load_series(), force=opts.force,
                    save=dropped_edits_dir())
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
    outcome = ReviewOutcome(base, patched, patch, reused=reused, dirty=dirty,
                            package=checked.package)
    opts.out.mkdir(parents=True, exist_ok=True)
    if opts.kunit and not opts.aa:
        for label, tree in (('base', base), ('patched', patched)):
            progress.say(f'KUnit on the {label} kernel: {", ".join(opts.topologies)}')
            # Both sides' runs are read with the base's kunit.py parser: the
            # patched tree's is the patch's.
            runner.run(runner.Job(tree, opts.out / 'kunit' / label, opts.topologies,
                                  opts.jobs, opts.timeout, cache, parser=base))
        outcome.kunit_statuses = {side: statuses(opts.out / 'kunit' / side, base)
                                  for side in ('base', 'patched')}
        outcome.kunit_changes, outcome.kunit_totals = compare_statuses(
            outcome.kunit_statuses['base'], outcome.kunit_statuses['patched'])
    if opts.bench:
        _bench(base, patched, patch, opts, outcome)
    return outcome


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
