# SPDX-License-Identifier: GPL-2.0
"""Install the package's series into a kernel tree, and take it out again.

Nothing is written until every change has been applied in memory. The tree
keeps its state under .kloc/:

  manifest.json   every file the package manages: the hash of the original
                  (null: the file did not exist) and of what was installed
  orig/<path>     the originals, so uninstall restores them byte for byte
  journal.json    while an install or uninstall runs: what it is about to
  journal/<path>  change, and each file as it was before
  lock            while a command writes the tree (treelock.py)

The journal is written (and flushed) before the first write to the tree, so
a run that is killed or fails half-way is rolled back by the next command,
which then does its own job. A file whose content is neither its original
nor what was installed was edited by hand: it is never overwritten or
restored without FORCE, and where the package's changes are still in it,
it is left as it is and the tests run on it. A tree whose .kloc/ is gone,
or a missing saved original, is recovered from the series itself: the
hooks are reversed and the result is checked by applying them again.

What .kloc/ holds is untrusted: state.py checks every document in full, and
every path in it, before anything is written (a path outside the tree, or
that the series does not manage, is damage). Every command that writes the
tree holds its lock (treelock.py) from before it reads the state until its
last write; a second one waits.
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kloc import progress
from kloc.series import state as st, treelock
from kloc.series.patching import Contents, HunkError, apply_patch, touched_files
from kloc.series.changes import Change, SeriesError
from kloc.series.state import FORCE_HINT as FORCE_HINT, JOURNAL as JOURNAL, \
    MANIFEST as MANIFEST, STATE_DIR as STATE_DIR, DamagedStateError as DamagedStateError, \
    InstallError as InstallError, Manifest as Manifest, Record as Record
from kloc.version import KernelVersion


class EditedFilesError(InstallError):
    """Files edited by hand would be overwritten; nothing was written."""


# Fault injection, for the tests: KLOC_FAULT_AFTER=N makes the (N+1)-th write
# of an install or uninstall fail (KLOC_FAULT_MODE=fail: an OSError) or kill
# the process (KLOC_FAULT_MODE=kill, the default: SIGKILL, as a power cut).
_fault_after: int | None = None
_fault_mode = 'kill'
_writes = 0


def set_fault(after: int | None, mode: str = 'kill') -> None:
    global _fault_after, _fault_mode, _writes
    _fault_after, _fault_mode, _writes = after, mode, 0


def _from_env() -> None:
    after = os.environ.get('KLOC_FAULT_AFTER', '')
    if after.isdigit():
        set_fault(int(after), os.environ.get('KLOC_FAULT_MODE', 'kill'))


_from_env()


def writes_done() -> int:
    return _writes


def _tick() -> None:
    """Called before every change to the file system."""
    global _writes
    if _fault_after is not None and _writes >= _fault_after:
        if _fault_mode == 'kill':
            os.kill(os.getpid(), signal.SIGKILL)
        raise OSError(errno.EIO, f'injected fault after {_writes} writes')
    _writes += 1


def sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def read_manifest(tree: Path, series: list[Change] | None = None) -> Manifest | None:
    """The tree's manifest, checked in full (see state.py); None if there is none.

    Its files are checked against the series (the package's by default).
    """
    return st.load_manifest(tree, st.package_files(series))


def _read(tree: Path, rel: str) -> bytes | None:
    p = tree / rel
    return p.read_bytes() if p.is_file() else None


def _mode(tree: Path, rel: str) -> int | None:
    try:
        return os.stat(tree / rel).st_mode & 0o777
    except FileNotFoundError:
        return None


def _tmp_name(path: Path) -> Path:
    return path.with_name(f'.{path.name}.kloc-tmp')


def _write(path: Path, data: bytes, mode: int | None) -> None:
    """Replace path atomically with data (a new inode: hard-linked copies keep theirs)."""
    _tick()
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        mode = _mode(path.parent, path.name) or 0o644
    tmp = _tmp_name(path)
    try:
        with open(tmp, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _remove(tree: Path, rel: str) -> None:
    """Delete a file the package added, and the directories it leaves empty."""
    target = tree / rel
    if not target.exists():
        return
    _tick()
    target.unlink()
    parent = target.parent
    while parent != tree and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def _put(tree: Path, rel: str, data: bytes | None, mode: int | None) -> bool:
    """Make tree/rel hold data (None: absent); True if anything was written."""
    if _read(tree, rel) == data and (data is None or mode is None
                                     or _mode(tree, rel) == mode):
        return False
    if data is None:
        _remove(tree, rel)
    else:
        _write(tree / rel, data, mode)
    return True


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


def _saved_original(tree: Path, rel: str, command: str) -> bytes:
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
            return _saved_original(tree, rel, 'the same command with')
        return _read(tree, rel)
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


def _refuse_pending_journal(tree: Path) -> None:
    """For the read-only paths: a pending journal is reported, not rolled back."""
    jfile, _ = _journal_paths(tree)
    if os.path.lexists(jfile):
        raise InstallError(f'{tree}: an interrupted install or uninstall left {jfile}; run '
                           'make install or make uninstall on it to roll it back first')


def plan(tree: Path, version: KernelVersion, series: list[Change]) -> InstallPlan:
    """The series applied in memory, starting from the pristine tree; writes nothing."""
    _refuse_pending_journal(tree)
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


# --- the journal ------------------------------------------------------------

def _journal_paths(tree: Path) -> tuple[Path, Path]:
    state = tree / STATE_DIR
    return state / JOURNAL, state / 'journal'


def _begin(tree: Path, op: str, before: Manifest | None,
           changes: dict[str, tuple[bytes | None, bytes | None, int | None]]) -> None:
    """Record the intent: every file's content before and after, and the old manifest."""
    jfile, jdir = _journal_paths(tree)
    if jdir.exists():
        shutil.rmtree(jdir)
    files = {}
    for rel, (old, new, _) in sorted(changes.items()):
        if old is not None:
            _write(jdir / rel, old, _mode(tree, rel))
        files[rel] = st.Entry(sha(old), sha(new), _mode(tree, rel))
    journal = st.Journal(op, files, before.to_json() if before else None)
    _write(jfile, journal.to_json().encode(), 0o644)


def _end(tree: Path) -> None:
    jfile, jdir = _journal_paths(tree)
    if os.path.lexists(jfile):
        _tick()
        jfile.unlink()
    if jdir.exists():
        shutil.rmtree(jdir)


def _set_aside(tree: Path, save: Path | None, why: str) -> None:
    """FORCE=1 on damaged state: keep a copy in save, then drop it."""
    where = ''
    if save is not None:
        st.copy_state(tree, save)
        where = f' (a copy is in {save / STATE_DIR})'
    progress.say(f'{FORCE_HINT}: {why.split("; run the same command")[0]}; set aside{where}, '
                 'rebuilding the state from the tree and the series')
    _tick()
    st.clear_state(tree)


def recover(tree: Path, force: bool = False, save: Path | None = None,
            series: list[Change] | None = None) -> list[str]:
    """Roll back an install or uninstall that was interrupted; return the files restored.

    A damaged journal is refused, or with force set aside (a copy in save).
    """
    with treelock.held(tree, 'recover'):
        st.check_tree(tree, st.package_files(series))
        return _recover(tree, force, save, series)


def _recover(tree: Path, force: bool, save: Path | None,
             series: list[Change] | None) -> list[str]:
    jfile, jdir = _journal_paths(tree)
    managed = st.package_files(series)
    try:
        journal = st.load_journal(tree, managed)
        olds = {rel: st.saved_copy(tree, rel, e, jfile)
                for rel, e in (journal.files.items() if journal else ())}
    except DamagedStateError as e:
        if not force:
            raise
        _set_aside(tree, save, str(e))
        return []
    for rel_tmp in tree.glob(f'{STATE_DIR}/**/.*.kloc-tmp'):
        rel_tmp.unlink()
    if journal is None:
        if jdir.exists():                   # killed before the intent was recorded
            shutil.rmtree(jdir)
        return []
    # The journal is there: the run it records wrote to the tree, or was about to.
    edited = []
    for rel, f in sorted(journal.files.items()):
        _tmp_name(tree / rel).unlink(missing_ok=True)
        if sha(_read(tree, rel)) not in (f.before, f.after):
            edited.append(rel)
    if edited and not force:
        raise EditedFilesError(
            f'an interrupted {journal.op} left a journal in {jfile}, but these files '
            f'changed since: {", ".join(edited)}. Save your edits, then run again with '
            f'{FORCE_HINT} to roll the tree back to before that run')
    restored = []
    for rel, f in sorted(journal.files.items()):
        old = olds[rel]
        if _put(tree, rel, old, f.mode if old is not None else None):
            restored.append(rel)
    mpath = tree / STATE_DIR / MANIFEST
    if journal.manifest:
        cur = mpath.read_bytes() if mpath.is_file() and not mpath.is_symlink() else None
        if cur != journal.manifest.encode():
            _write(mpath, journal.manifest.encode(), 0o644)
    elif os.path.lexists(mpath):
        _tick()
        mpath.unlink()
    _end(tree)
    _prune(tree, series)
    progress.say(f'{tree}: an interrupted {journal.op} was rolled back'
                 + (f' ({len(restored)} files restored)' if restored else ''))
    return restored


def _prune(tree: Path, series: list[Change] | None) -> None:
    """Drop saved originals the manifest does not list; .kloc/ itself if none does."""
    state = tree / STATE_DIR
    m = read_manifest(tree, series)
    if m is None:
        if st.has_state(tree):
            _tick()
            st.clear_state(tree)
        return
    keep = {rel for rel, r in m.files.items() if r.original is not None}
    orig = state / st.ORIG
    for p in sorted(orig.rglob('*')) if orig.exists() else []:
        if p.is_file() and not p.is_symlink() and str(p.relative_to(orig)) not in keep:
            _tick()
            p.unlink()


# --- install and uninstall --------------------------------------------------

def _save_edits(tree: Path, rels: list[str], save: Path | None) -> str:
    if not rels or save is None:
        return ''
    for rel in rels:
        data = _read(tree, rel)
        if data is not None:
            (save / rel).parent.mkdir(parents=True, exist_ok=True)
            (save / rel).write_bytes(data)
    return f'; your edited copies are saved in {save}'


def reconstruct(tree: Path, version: KernelVersion,
                series: list[Change]) -> tuple[Manifest | None, dict[str, bytes]]:
    """Work out from the series which files of the tree carry the package; writes nothing.

    For a tree whose .kloc/ is gone or damaged: (the manifest, the originals),
    or (None, {}) if no file carries the package.
    """
    files: dict[str, Record] = {}
    origs: dict[str, bytes] = {}
    for rel in series_files(version, series):
        data = _read(tree, rel)
        found, orig = recover_original(rel, data, version, series)
        if not found:
            continue
        files[rel] = Record(sha(orig), sha(data),
                            _mode(tree, rel) if orig is not None else None)
        if orig is not None:
            origs[rel] = orig
    if not files:
        return None, {}
    return Manifest(str(version), [c.name for c in series], files), origs


def rebuild_manifest(tree: Path, version: KernelVersion, series: list[Change],
                     save: Path | None = None) -> Manifest | None:
    """reconstruct(), and write the result to .kloc/ (the old state goes to save)."""
    with treelock.held(tree, 'rebuild'):
        m, origs = reconstruct(tree, version, series)
        if m is None:
            return None
        state = tree / STATE_DIR
        if st.has_state(tree):
            if save is not None:
                st.copy_state(tree, save)
            st.clear_state(tree)
        for rel, orig in origs.items():
            _write(state / st.ORIG / rel, orig, _mode(tree, rel))
        _write(state / MANIFEST, m.to_json().encode(), 0o644)
        progress.say(f'{tree}: rebuilt {state / MANIFEST} from the series '
                     f'({len(m.files)} files carry the package)')
        return m


def _manifest_or_rebuild(tree: Path, version: KernelVersion, series: list[Change],
                         force: bool, save: Path | None) -> Manifest | None:
    try:
        m = read_manifest(tree, series)
    except DamagedStateError as e:
        if not force:
            raise
        progress.say(f'{FORCE_HINT}: {str(e).split("; run the same command")[0]}; '
                     'rebuilding it from the tree and the series')
        return rebuild_manifest(tree, version, series, save)
    if m is None:
        return rebuild_manifest(tree, version, series, save)
    missing = [rel for rel, r in m.files.items()
               if r.original is not None and not (tree / STATE_DIR / st.ORIG / rel).is_file()]
    if missing and force:
        return rebuild_manifest(tree, version, series, save)
    return m


def _classify(tree: Path, m: Manifest | None) -> dict[str, str]:
    """Each managed file: 'installed', 'original' or 'edited'."""
    out = {}
    for rel, r in (m.files.items() if m else ()):
        cur = sha(_read(tree, rel))
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
    return sorted(rel for rel, s in _classify(tree, m).items() if s == 'edited')


def managed_files(tree: Path) -> set[str]:
    """The files the package's manifest lists (empty when none can be read)."""
    try:
        m = read_manifest(tree)
    except InstallError:
        return set()
    return set(m.files) if m else set()


@dataclass
class Decision:
    """What an install would do, decided before anything is written."""
    plan: InstallPlan
    before: Manifest | None
    manifest: Manifest
    read: PristineFn
    status: dict[str, str]
    changes: dict[str, tuple[bytes | None, bytes | None, int | None]]
    kept: list[str]
    lost: list[str]         # kept edits that dropped some of the package's lines

    def contents(self, tree: Path) -> Contents:
        """Every managed file as it will be after the install (kept edits as they are)."""
        out: Contents = dict(self.plan.final)
        for rel in self.kept:
            out[rel] = _read(tree, rel)
        return out


def _decide(tree: Path, version: KernelVersion, series: list[Change], before: Manifest | None,
            read: PristineFn, force: bool) -> Decision:
    p = plan_from(read, tree, version, series)
    status = _classify(tree, before)
    old = before.files if before else {}
    changes: dict[str, tuple[bytes | None, bytes | None, int | None]] = {}
    kept: list[str] = []
    lost: list[str] = []
    refused: list[str] = []
    records: dict[str, Record] = {}
    for rel in sorted(set(p.final) | set(old)):
        mode: int | None = None
        if rel in p.final:
            want = p.final[rel]
            r0 = old.get(rel)
            records[rel] = Record(sha(p.pristine[rel]), sha(want),
                                  r0.mode if r0 else _mode(tree, rel))
        else:                               # dropped from the series: restore it
            r = old[rel]
            want = None if r.original is None else read(rel)
            mode = r.mode
        cur = _read(tree, rel)
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
    manifest = Manifest(str(version), [s.change.name for s in p.steps], records)
    return Decision(p, before, manifest, read, status, changes, kept, lost)


def preview(tree: Path, version: KernelVersion, series: list[Change],
            force: bool = False) -> Contents:
    """The managed files as install() would leave them; raises what install() would.

    Writes nothing: a pending journal is reported, not rolled back.
    """
    _refuse_pending_journal(tree)
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
            return origs.get(rel) if rel in rebuilt else _read(tree, rel)
    return _decide(tree, version, series, before, read, force).contents(tree)


def install(tree: Path, version: KernelVersion, series: list[Change], force: bool = False,
            save: Path | None = None) -> list[str]:
    """Make the tree carry the series; return the files written (none if current).

    A managed file edited by hand is kept as it is when the package's changes
    are still in it; one that would have to be overwritten is refused, unless
    force (its edited copy then goes to save). Holds the tree's lock throughout.
    """
    with treelock.held(tree, 'install'):
        st.check_tree(tree, st.package_files(series))
        return _install(tree, version, series, force, save)


def _install(tree: Path, version: KernelVersion, series: list[Change], force: bool,
             save: Path | None) -> list[str]:
    _recover(tree, force, save, series)
    before = _manifest_or_rebuild(tree, version, series, force, save)
    state = tree / STATE_DIR
    if before is None and st.has_state(tree):     # leftovers of a run that wrote no file
        _tick()
        st.clear_state(tree)
    _, read = pristine_reader(tree, series)
    d = _decide(tree, version, series, before, read, force)
    p, old, changes = d.plan, before.files if before else {}, d.changes
    if d.kept:
        lost = (f'; the package\'s lines are not all in {", ".join(d.lost)} any more: the '
                'suites that need a missing one say so and fail' if d.lost else '')
        progress.say(f'{tree}: the package is installed as it is now: testing your edits '
                     f'to {", ".join(d.kept)} as they are, writing nothing{lost}')
    if not changes and before is not None and before.to_json() == d.manifest.to_json():
        return []
    dropped = [r for r in changes if d.status.get(r) == 'edited']
    edits = _save_edits(tree, dropped, save)
    _begin(tree, 'install', before, changes)
    for rel in sorted(p.final):
        orig = p.pristine[rel]
        if rel not in old and orig is not None:
            _write(state / st.ORIG / rel, orig, _mode(tree, rel))
    written = []
    for rel, (_, want, mode) in sorted(changes.items()):
        if _put(tree, rel, want, mode):
            written.append(rel)
    for rel in old:
        if rel not in p.final and os.path.lexists(state / st.ORIG / rel):
            _tick()
            (state / st.ORIG / rel).unlink()
    _write(state / MANIFEST, d.manifest.to_json().encode(), 0o644)
    _end(tree)
    if dropped:
        progress.say(f'{tree}: dropped your edits to {", ".join(dropped)}{edits}')
    return written


def uninstall(tree: Path, version: KernelVersion | None = None,
              series: list[Change] | None = None, force: bool = False,
              save: Path | None = None) -> list[str]:
    """Restore every file the install touched; return them.

    With the version and the series, a tree whose .kloc/ is gone is
    recognised and restored too. Holds the tree's lock throughout.
    """
    with treelock.held(tree, 'uninstall'):
        st.check_tree(tree, st.package_files(series))
        return _uninstall(tree, version, series, force, save)


def _uninstall(tree: Path, version: KernelVersion | None, series: list[Change] | None,
               force: bool, save: Path | None) -> list[str]:
    _recover(tree, force, save, series)
    if version is not None and series is not None:
        m = _manifest_or_rebuild(tree, version, series, force, save)
    else:
        m = read_manifest(tree, series)
    if m is None:
        if st.has_state(tree) and version is not None:
            _tick()                         # leftovers of a run that wrote no file
            st.clear_state(tree)
        return []
    status = _classify(tree, m)
    edited = sorted(rel for rel, s in status.items() if s == 'edited')
    if edited and not force:
        raise EditedFilesError(
            f'{tree}: edited since the package was installed: {", ".join(edited)}; '
            'uninstall would discard the edits. Save them first (git diff, or copy the '
            f'files), then run again with {FORCE_HINT} to restore the originals anyway; '
            'nothing was written')
    state = tree / STATE_DIR
    changes: dict[str, tuple[bytes | None, bytes | None, int | None]] = {}
    for rel, r in sorted(m.files.items()):
        if r.original is None:
            want = None
        else:
            want = _saved_original(tree, rel, 'make uninstall')
        cur = _read(tree, rel)
        if cur != want:
            changes[rel] = (cur, want, r.mode)
    edits = _save_edits(tree, edited, save)
    _begin(tree, 'uninstall', m, changes)
    for rel, (_, want, mode) in sorted(changes.items()):
        _put(tree, rel, want, mode)
    _tick()
    (state / MANIFEST).unlink()
    _end(tree)
    _tick()
    st.clear_state(tree)
    if edited:
        progress.say(f'{tree}: dropped your edits to {", ".join(edited)}{edits}')
    return sorted(m.files)


def is_installed(tree: Path) -> bool:
    return (tree / STATE_DIR / MANIFEST).exists()


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
