# SPDX-License-Identifier: GPL-2.0
"""The patch under review applied as it would be posted, in memory; writes nothing.

The patch applies to the stock files (a file the package hooks as it was
before the package, .kloc/orig; a file the package adds whole, the
package's copy; any other file as the tree has it), and the package's
series is then installed on top of the result (as_posted()). A patch that
does not apply to the stock files fails naming the hunk; one that changes
the lines the package puts its own next to is refused naming the package's
change and the line; one made against the installed tree (it applies only
there) is refused as such, unless it changes the package's own lines: then
integrity.py judges it.

A managed file the base carries with hand edits (install keeps them, and
the base is reviewed with them): the patch applies to the edited file with
the package's lines taken out (planning.recover_original), and the series
goes on top again. Where the edits changed the package's lines, so that
they no longer come out, the review is refused, naming the file: save and
undo the edits first.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from kloc.review import integrity
from kloc.review.errors import ReviewError
from kloc.review.patch_input import PatchInfo
from kloc.series.changes import Change
from kloc.series.patching import DEFAULT_MODE, Contents, HunkError, Modes, apply_text, conflict, \
    file_changes
from kloc.series.planning import PristineFn, edited_files, plan_from, pristine_reader, \
    reconstruct, recover_original
from kloc.series.state import DamagedStateError, InstallError, read_manifest
from kloc.series.treefiles import read_file
from kloc.trees import kernels
from kloc.trees.sources import Tree
from kloc.version import KernelVersion


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


def _mode(p: Path) -> int:
    try:
        return stat.S_IMODE(p.stat().st_mode)
    except OSError:
        return DEFAULT_MODE


def found(base: Tree, patch: PatchInfo, start: Contents) -> Contents:
    """Every file the patch touches, as it finds it: a file in start as start has it
    (stock_start(): the stock file), any other as the tree has it (None: absent)."""
    return {rel: start[rel] if rel in start else read_file(base.path, rel) for rel in patch.files}


def stock_reader(base: Tree, series: list[Change], force: bool = False) -> PristineFn:
    """The stock content of each file: a managed file's original (.kloc/orig, or, for a
    tree whose .kloc/ is gone, recovered from the series, as planning.preview() does),
    any other as the tree has it (None: absent)."""
    try:
        m = read_manifest(base.path, series)
    except DamagedStateError:
        if not force:
            raise
        m = None
    if m is not None:
        return pristine_reader(base.path, series)[1]
    rebuilt, origs = reconstruct(base.path, base.version, series)
    files = rebuilt.files if rebuilt else {}

    def read(rel: str) -> bytes | None:
        return origs.get(rel) if rel in files else read_file(base.path, rel)
    return read


def stock_start(base: Tree, patch: PatchInfo, series: list[Change], planned: Contents,
                read: PristineFn) -> Contents:
    """Each file the patch touches as it is posted against: the stock file (read());
    a file the package adds whole, the package's copy as the install leaves it
    (planned); a managed file with the user's kept edits (the base is reviewed with
    them), the edited file with the package's lines taken out. ReviewError when those
    no longer come out: the edits changed them."""
    whole, _ = integrity.package_files(base.version, series)
    kept = {rel for rel in edited_files(base.path)
            if rel in planned and planned[rel] == read_file(base.path, rel)}
    start: Contents = {}
    for rel in patch.files:
        if rel in whole and rel in planned:
            start[rel] = planned[rel]
        elif rel in kept:
            ok, original = recover_original(rel, planned[rel], base.version, series)
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
                e: InstallError) -> str:
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
              read: PristineFn, review_package: bool = False
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
        plan = plan_from(patched, base.path, base.version, series)
    except InstallError as e:
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
        raise HunkError(f'{message}. The base is Linux {base.version} at {base.path}: '
                        'if the patch was made against another kernel, name that one with '
                        f'KERNEL= or KDIR= (make review\'s default is {kernels.NEWEST})'
                        ) from stock
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
