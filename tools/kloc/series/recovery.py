# SPDX-License-Identifier: GPL-2.0
"""The journal of an install or uninstall, and what the next command does with it.

Before its first write to the tree, an install or uninstall records its
intent (begin()): .kloc/journal.json lists every file it is about to change,
by hash before and after, with the manifest as it was, and .kloc/journal/
keeps each file as it was before. end() drops them after the last write. A
run that is killed or fails half-way leaves them, and the next command that
writes the tree rolls it back (roll_back()) before it does its own job; a
file changed since that run is not rolled back without FORCE.

A damaged journal or manifest (state.py says what is damage) is refused;
with FORCE the state is set aside (a copy goes to save) and the manifest
rebuilt from the tree and the series (planning.reconstruct()). Every
function here writes through a Writer (treefiles.py), with the tree's lock
held (treelock.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kloc import progress
from kloc.series import state as st, treelock
from kloc.series.changes import Change
from kloc.series.planning import Changes, reconstruct
from kloc.series.state import FORCE_HINT, JOURNAL, MANIFEST, STATE_DIR, DamagedStateError, \
    EditedFilesError, Manifest, read_manifest
from kloc.series.treefiles import NO_FAULTS, Faults, Writer, file_mode, read_file, sha, \
    tmp_name
from kloc.version import KernelVersion


# --- the journal ------------------------------------------------------------

def journal_paths(tree: Path) -> tuple[Path, Path]:
    state = tree / STATE_DIR
    return state / JOURNAL, state / st.JOURNAL_DIR


def begin(tree: Path, op: str, before: Manifest | None, changes: Changes, w: Writer) -> None:
    """Record the intent: every file's content before and after, and the old manifest."""
    jfile, jdir = journal_paths(tree)
    if jdir.exists():
        shutil.rmtree(jdir)
    files = {}
    for rel, (old, new, _) in sorted(changes.items()):
        if old is not None:
            w.write(jdir / rel, old, file_mode(tree, rel))
        files[rel] = st.Entry(sha(old), sha(new), file_mode(tree, rel))
    journal = st.Journal(op, files, before.to_json() if before else None)
    w.write(jfile, journal.to_json().encode(), 0o644)


def end(tree: Path, w: Writer) -> None:
    jfile, jdir = journal_paths(tree)
    if os.path.lexists(jfile):
        w.tick()
        jfile.unlink()
    if jdir.exists():
        shutil.rmtree(jdir)


# --- rolling back -----------------------------------------------------------

def _set_aside(tree: Path, save: Path | None, why: str, w: Writer) -> None:
    """FORCE=1 on damaged state: keep a copy in save, then drop it."""
    where = ''
    if save is not None:
        st.copy_state(tree, save)
        where = f' (a copy is in {save / STATE_DIR})'
    progress.say(f'{FORCE_HINT}: {why.split("; run the same command")[0]}; set aside{where}, '
                 'rebuilding the state from the tree and the series')
    w.tick()
    st.clear_state(tree)


def recover(tree: Path, force: bool = False, save: Path | None = None,
            series: list[Change] | None = None, faults: Faults = NO_FAULTS) -> list[str]:
    """Roll back an install or uninstall that was interrupted; return the files restored.

    A damaged journal is refused, or with force set aside (a copy in save).
    """
    with treelock.held(tree, 'recover'):
        st.check_tree(tree, st.package_files(series))
        return roll_back(tree, force, save, series, Writer(faults))


def roll_back(tree: Path, force: bool, save: Path | None, series: list[Change] | None,
              w: Writer) -> list[str]:
    """recover(), for a caller that holds the tree's lock and has checked the tree."""
    jfile, jdir = journal_paths(tree)
    managed = st.package_files(series)
    try:
        journal = st.load_journal(tree, managed)
        olds = {rel: st.saved_copy(tree, rel, e, jfile)
                for rel, e in (journal.files.items() if journal else ())}
    except DamagedStateError as e:
        if not force:
            raise
        _set_aside(tree, save, str(e), w)
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
        tmp_name(tree / rel).unlink(missing_ok=True)
        if sha(read_file(tree, rel)) not in (f.before, f.after):
            edited.append(rel)
    if edited and not force:
        raise EditedFilesError(
            f'an interrupted {journal.op} left a journal in {jfile}, but these files '
            f'changed since: {", ".join(edited)}. Save your edits, then run again with '
            f'{FORCE_HINT} to roll the tree back to before that run')
    restored = []
    for rel, f in sorted(journal.files.items()):
        old = olds[rel]
        if w.put(tree, rel, old, f.mode if old is not None else None):
            restored.append(rel)
    mpath = tree / STATE_DIR / MANIFEST
    if journal.manifest:
        cur = mpath.read_bytes() if mpath.is_file() and not mpath.is_symlink() else None
        if cur != journal.manifest.encode():
            w.write(mpath, journal.manifest.encode(), 0o644)
    elif os.path.lexists(mpath):
        w.tick()
        mpath.unlink()
    end(tree, w)
    _prune(tree, series, w)
    progress.say(f'{tree}: an interrupted {journal.op} was rolled back'
                 + (f' ({len(restored)} files restored)' if restored else ''))
    return restored


def _prune(tree: Path, series: list[Change] | None, w: Writer) -> None:
    """Drop saved originals the manifest does not list; .kloc/ itself if none does."""
    state = tree / STATE_DIR
    m = read_manifest(tree, series)
    if m is None:
        if st.has_state(tree):
            w.tick()
            st.clear_state(tree)
        return
    keep = {rel for rel, r in m.files.items() if r.original is not None}
    orig = state / st.ORIG
    for p in sorted(orig.rglob('*')) if orig.exists() else []:
        if p.is_file() and not p.is_symlink() and str(p.relative_to(orig)) not in keep:
            w.tick()
            p.unlink()


# --- lost or damaged state --------------------------------------------------

def _rebuild_manifest(tree: Path, version: KernelVersion, series: list[Change],
                      save: Path | None, w: Writer) -> Manifest | None:
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
            w.write(state / st.ORIG / rel, orig, file_mode(tree, rel))
        w.write(state / MANIFEST, m.to_json().encode(), 0o644)
        progress.say(f'{tree}: rebuilt {state / MANIFEST} from the series '
                     f'({len(m.files)} files carry the package)')
        return m


def manifest_or_rebuild(tree: Path, version: KernelVersion, series: list[Change],
                        force: bool, save: Path | None, w: Writer) -> Manifest | None:
    """The tree's manifest; rebuilt from the series where it is gone, or (with force)
    damaged or missing a saved original."""
    try:
        m = read_manifest(tree, series)
    except DamagedStateError as e:
        if not force:
            raise
        progress.say(f'{FORCE_HINT}: {str(e).split("; run the same command")[0]}; '
                     'rebuilding it from the tree and the series')
        return _rebuild_manifest(tree, version, series, save, w)
    if m is None:
        return _rebuild_manifest(tree, version, series, save, w)
    missing = [rel for rel, r in m.files.items()
               if r.original is not None and not (tree / STATE_DIR / st.ORIG / rel).is_file()]
    if missing and force:
        return _rebuild_manifest(tree, version, series, save, w)
    return m
