# SPDX-License-Identifier: GPL-2.0
"""The series applied to a tree's files, worked out in memory; writes nothing.

The plan is the whole series applied to the pristine files (pristine_reader():
the tree as it is, but for a managed file its original, saved in .kloc/orig
when the package was installed). decide() compares it with the tree and its
manifest: which files an install writes, which hand edits it keeps (the
package's changes are still in them) and which it must refuse to overwrite
without FORCE. A tree whose .kloc/ is gone or damaged is read from the series
itself (reconstruct()): each file that carries the package, with its hooks
reversed, checked by applying them again. trees/workcopy.py writes the plan
into kloc's copy of the tree. dirty_files() is the tree's uncommitted edits:
make review records them, make mutants refuses them without FORCE.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kloc.series import state as st
from kloc.series.changes import Change, SeriesError
from kloc.series.patching import Contents, HunkError, apply_patch, touched_files
from kloc.series.state import FORCE_HINT, MANIFEST, STATE_DIR, DamagedStateError, \
    EditedFilesError, InstallError, ManagedFile, Manifest, read_manifest
from kloc.series.treefiles import file_mode, read_file, sha, uncommitted
from kloc.version import KernelVersion


# --- reversing the series: what a file was before the package ---------------

def _file_patches(text: str) -> dict[str, str]:
    """Split a -p1 diff into one diff per file it changes."""
    out: dict[str, str] = {}
    chunks = re.split(r'^(?=diff --git )', text, flags=re.MULTILINE)
    if len(chunks) == 1:
        chunks = re.split(r'^(?=--- \S+\n\+\+\+ )', text, flags=re.MULTILINE)
    for chunk in chunks:
        files = touched_files(chunk)
        if len(files) == 1:
            out[files[0]] = chunk
    return out


def _patch_one(rel: str, diff: str, data: bytes | None,
               reverse: bool) -> tuple[bool, bytes | None]:
    """Apply (or reverse) one file's diff, strictly: (whether it applied, the file after
    it; None: absent, as before a diff that creates it)."""
    with tempfile.TemporaryDirectory(prefix='kloc-rev-') as tmp:
        target = Path(tmp) / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if data is not None:
            target.write_bytes(data)
        (Path(tmp) / 'p.diff').write_text(diff)
        proc = subprocess.run(['patch', '-p1', '-F0', '-N', '--batch', '-s',
                               '--no-backup-if-mismatch', '-r', '-', '-d', tmp,
                               '-i', 'p.diff'] + (['-R'] if reverse else []),
                              capture_output=True)
        if proc.returncode != 0:
            return False, None
        return True, target.read_bytes() if target.exists() else None


def _hooks_for(rel: str, version: KernelVersion, series: list[Change]) -> list[str]:
    diffs = []
    for change in series:
        patch = change.patch_or_none(version)
        if patch is not None:
            d = _file_patches(patch.read_text()).get(rel)
            if d is not None:
                diffs.append(d)
    return diffs


def _addition(rel: str, series: list[Change]) -> bytes | None:
    for change in series:
        for add in change.additions:
            if add.dst == rel:
                return add.src.read_bytes()
    return None


def carries_package(rel: str, data: bytes | None, version: KernelVersion,
                    series: list[Change]) -> bool:
    """Whether the package's changes to rel are (still) in data."""
    if data is None:
        return False
    if _addition(rel, series) is not None:
        return True
    cur: bytes | None = data
    for diff in reversed(_hooks_for(rel, version, series)):
        ok, cur = _patch_one(rel, diff, cur, reverse=True)
        if not ok:
            return False
    return True


def recover_original(rel: str, data: bytes | None, version: KernelVersion,
                     series: list[Change]) -> tuple[bool, bytes | None]:
    """(found, original) of a file as installed, by reversing the series.

    Found only if applying the series to the result gives data again.
    """
    if data is None:
        return False, None
    added = _addition(rel, series)
    diffs = _hooks_for(rel, version, series)
    if added is not None and not diffs:
        return data == added, None
    cur: bytes | None = data
    for diff in reversed(diffs):
        ok, cur = _patch_one(rel, diff, cur, reverse=True)
        if not ok:
            return False, None
    again: bytes | None = cur
    for diff in diffs:
        ok, again = _patch_one(rel, diff, again, reverse=False)
        if not ok:
            return False, None
    return again == data, cur


# --- the plan ---------------------------------------------------------------

@dataclass
class Step:
    """One change of the series, applied: the files before and after it."""
    change: Change
    before: Contents
    after: Contents


@dataclass
class InstallPlan:
    pristine: Contents
    final: Contents
    steps: list[Step] = field(default_factory=list)


PristineFn = Callable[[str], 'bytes | None']
Changes = dict[str, tuple[bytes | None, bytes | None, int | None]]   # rel: (now, to be, mode)


def saved_original(tree: Path, rel: str, command: str) -> bytes:
    """The original of rel as .kloc/orig keeps it (checked: state.py)."""
    orig = tree / STATE_DIR / st.ORIG / rel
    if not os.path.lexists(orig):
        raise InstallError(f'{orig} is missing: the saved original of {rel} is gone; run '
                           f'{command} {FORCE_HINT} to recover it from the series; nothing '
                           'was written')
    return st.read_regular(orig, st.manifest_damage(tree / STATE_DIR / MANIFEST))


def pristine_reader(tree: Path, series: list[Change] | None = None
                    ) -> tuple[dict[str, bool], PristineFn]:
    """(managed file -> had an original, reader of the pristine tree)."""
    m = read_manifest(tree, series)
    files = m.files if m else {}

    def read(rel: str) -> bytes | None:
        if rel in files:
            if files[rel].original is None:
                return None
            return saved_original(tree, rel, 'the same command with')
        return read_file(tree, rel)
    return {rel: r.original is not None for rel, r in files.items()}, read


def plan_from(read: PristineFn, tree: Path, version: KernelVersion,
              series: list[Change]) -> InstallPlan:
    """Apply the whole series in memory to the pristine files read() gives."""
    state: Contents = {}
    pristine: Contents = {}

    def load(rel: str) -> None:
        if rel not in state:
            pristine[rel] = state[rel] = read(rel)

    result = InstallPlan(pristine, state)
    for change in series:
        before: Contents = {}
        after: Contents = {}
        try:
            patch = change.patch_for(version)
        except SeriesError as e:
            raise InstallError(str(e)) from e
        if patch is not None:
            for rel in touched_files(patch.read_text()):
                load(rel)
                before[rel] = state[rel]
            try:
                out = apply_patch(patch, state, change.name)
            except HunkError as e:
                raise InstallError(f'Linux {version} at {tree}: {e}') from e
            state.update(out)
            after.update(out)
        for add in change.additions:
            load(add.dst)
            if pristine[add.dst] is not None and add.dst not in before:
                raise InstallError(f'{tree / add.dst} already exists in the tree; '
                                   'it is not ours to replace')
            before.setdefault(add.dst, state[add.dst])
            state[add.dst] = after[add.dst] = add.src.read_bytes()
        result.steps.append(Step(change, before, after))
    return result


def plan(tree: Path, version: KernelVersion, series: list[Change]) -> InstallPlan:
    """The series applied in memory, starting from the pristine tree; writes nothing."""
    _, read = pristine_reader(tree, series)
    return plan_from(read, tree, version, series)


def series_files(version: KernelVersion, series: list[Change]) -> list[str]:
    files: list[str] = []
    for change in series:
        patch = change.patch_or_none(version)
        if patch is not None:
            files += touched_files(patch.read_text())
        files += [a.dst for a in change.additions]
    return sorted(set(files))


def added_lines(p: InstallPlan) -> list[tuple[str, int]]:
    """(path, 1-based line) of every line the series adds or changes."""
    out: list[tuple[str, int]] = []
    for rel, data in sorted(p.final.items()):
        after = (data or b'').decode(errors='replace').splitlines()
        before = (p.pristine.get(rel) or b'').decode(errors='replace').splitlines()
        sm = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
        for tag, _, _, j1, j2 in sm.get_opcodes():
            if tag in ('replace', 'insert'):
                out.extend((rel, j + 1) for j in range(j1, j2))
    return out


# --- what the tree carries --------------------------------------------------

def reconstruct(tree: Path, version: KernelVersion,
                series: list[Change]) -> tuple[Manifest | None, dict[str, bytes]]:
    """Work out from the series which files of the tree carry the package; writes nothing.

    For a tree whose .kloc/ is gone or damaged: (the manifest, the originals),
    or (None, {}) if no file carries the package.
    """
    files: dict[str, ManagedFile] = {}
    origs: dict[str, bytes] = {}
    for rel in series_files(version, series):
        data = read_file(tree, rel)
        found, orig = recover_original(rel, data, version, series)
        if not found:
            continue
        files[rel] = ManagedFile(sha(orig), sha(data),
                                 file_mode(tree, rel) if orig is not None else None)
        if orig is not None:
            origs[rel] = orig
    if not files:
        return None, {}
    return Manifest(str(version), [c.name for c in series], files), origs


def classify(tree: Path, m: Manifest | None) -> dict[str, str]:
    """Each managed file: 'installed', 'original' or 'edited'."""
    out = {}
    for rel, r in (m.files.items() if m else ()):
        cur = sha(read_file(tree, rel))
        if r.installed is None or cur == r.installed:
            out[rel] = 'installed'
        elif cur == r.original:
            out[rel] = 'original'
        else:
            out[rel] = 'edited'
    return out


def edited_files(tree: Path) -> list[str]:
    """Managed files whose content is neither the original nor what was installed."""
    try:
        m = read_manifest(tree)
    except InstallError:
        return []
    return sorted(rel for rel, s in classify(tree, m).items() if s == 'edited')


def managed_files(tree: Path) -> set[str]:
    """The files the package's manifest lists (empty when none can be read)."""
    try:
        m = read_manifest(tree)
    except InstallError:
        return set()
    return set(m.files) if m else set()


def dirty_files(tree: Path) -> list[str]:
    """The tree's uncommitted edits, sorted: managed files edited by hand, and a git
    tree's changed tracked files that are not the package's."""
    managed = managed_files(tree)
    return sorted(set(edited_files(tree)) | {f for f in uncommitted(tree) if f not in managed})


# --- what an install would do -----------------------------------------------

@dataclass
class Decision:
    """What an install would do, decided before anything is written."""
    plan: InstallPlan
    before: Manifest | None
    manifest: Manifest
    read: PristineFn
    status: dict[str, str]
    changes: Changes
    kept: list[str]
    lost: list[str]         # kept edits that dropped some of the package's lines

    def contents(self, tree: Path) -> Contents:
        """Every managed file as it will be after the install (kept edits as they are)."""
        out: Contents = dict(self.plan.final)
        for rel in self.kept:
            out[rel] = read_file(tree, rel)
        return out


def decide(tree: Path, version: KernelVersion, series: list[Change], before: Manifest | None,
           read: PristineFn, force: bool) -> Decision:
    """What an install would write over the tree and its manifest before; refuses
    (EditedFilesError) to overwrite an edit unless force."""
    p = plan_from(read, tree, version, series)
    status = classify(tree, before)
    old = before.files if before else {}
    changes: Changes = {}
    kept: list[str] = []
    lost: list[str] = []
    refused: list[str] = []
    files: dict[str, ManagedFile] = {}
    for rel in sorted(set(p.final) | set(old)):
        mode: int | None = None
        if rel in p.final:
            want = p.final[rel]
            r0 = old.get(rel)
            files[rel] = ManagedFile(sha(p.pristine[rel]), sha(want),
                                     r0.mode if r0 else file_mode(tree, rel))
        else:                               # dropped from the series: restore it
            r = old[rel]
            want = None if r.original is None else read(rel)
            mode = r.mode
        cur = read_file(tree, rel)
        if cur == want:
            continue
        if status.get(rel) == 'edited':
            # The tree carries the package as it is now: there is nothing to install,
            # so the edit is what gets tested, whatever lines it changed.
            if rel in p.final and old[rel].installed == sha(want):
                kept.append(rel)
                if not carries_package(rel, cur, version, series):
                    lost.append(rel)
                continue
            if not force:
                refused.append(rel)
                continue
        changes[rel] = (cur, want, mode)
    if refused:
        raise EditedFilesError(
            f'{tree}: edited since the package was installed, and installing would '
            f'overwrite the edits: {", ".join(refused)}. To keep them, save them (git '
            f'diff, or copy the files) first; to drop them, run again with {FORCE_HINT}; '
            'nothing was written')
    manifest = Manifest(str(version), [s.change.name for s in p.steps], files)
    return Decision(p, before, manifest, read, status, changes, kept, lost)


def preview(tree: Path, version: KernelVersion, series: list[Change],
            force: bool = False) -> Contents:
    """The managed files as install() would leave them; raises what install() would.

    Writes nothing: a pending journal is reported, not rolled back.
    """
    try:
        before = read_manifest(tree, series)
    except DamagedStateError:
        if not force:
            raise
        before = None
    if before is not None:
        _, read = pristine_reader(tree, series)
    else:
        before, origs = reconstruct(tree, version, series)
        rebuilt = before.files if before else {}

        def read(rel: str) -> bytes | None:
            return origs.get(rel) if rel in rebuilt else read_file(tree, rel)
    return decide(tree, version, series, before, read, force).contents(tree)
