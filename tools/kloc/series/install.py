# SPDX-License-Identifier: GPL-2.0
"""Install the package's series into a kernel tree, and take it out again.

Nothing is written until every change has been applied in memory
(planning.py). The tree keeps its state under .kloc/:

  manifest.json   every file the package manages: the hash of the original
                  (null: the file did not exist) and of what was installed
  orig/<path>     the originals, so uninstall restores them byte for byte
  journal.json    while an install or uninstall runs: what it is about to
  journal/<path>  change, and each file as it was before (recovery.py)
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
last write; a second one waits. Every write goes through a Writer
(treefiles.py); the tests interrupt install() and uninstall() after each one
by giving them Faults.
"""

from __future__ import annotations

import os
from pathlib import Path

from kloc import progress
from kloc.series import recovery, state as st, treelock
from kloc.series.changes import Change
from kloc.series.planning import Changes, classify, decide, pristine_reader, saved_original
from kloc.series.state import FORCE_HINT, MANIFEST, STATE_DIR, EditedFilesError, read_manifest
from kloc.series.treefiles import NO_FAULTS, Faults, Writer, file_mode, read_file
from kloc.version import KernelVersion


def _save_edits(tree: Path, rels: list[str], save: Path | None) -> str:
    if not rels or save is None:
        return ''
    for rel in rels:
        data = read_file(tree, rel)
        if data is not None:
            (save / rel).parent.mkdir(parents=True, exist_ok=True)
            (save / rel).write_bytes(data)
    return f'; your edited copies are saved in {save}'


def install(tree: Path, version: KernelVersion, series: list[Change], force: bool = False,
            save: Path | None = None, faults: Faults = NO_FAULTS) -> list[str]:
    """Make the tree carry the series; return the files written (none if current).

    A managed file edited by hand is kept as it is when the package's changes
    are still in it; one that would have to be overwritten is refused, unless
    force (its edited copy then goes to save). Holds the tree's lock throughout.
    faults: for the tests, a write to fail or to be killed at (none by default).
    """
    with treelock.held(tree, 'install'):
        st.check_tree(tree, st.package_files(series))
        return _install(tree, version, series, force, save, Writer(faults))


def _install(tree: Path, version: KernelVersion, series: list[Change], force: bool,
             save: Path | None, w: Writer) -> list[str]:
    recovery.roll_back(tree, force, save, series, w)
    before = recovery.manifest_or_rebuild(tree, version, series, force, save, w)
    state = tree / STATE_DIR
    if before is None and st.has_state(tree):     # leftovers of a run that wrote no file
        w.tick()
        st.clear_state(tree)
    _, read = pristine_reader(tree, series)
    d = decide(tree, version, series, before, read, force)
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
    recovery.begin(tree, 'install', before, changes, w)
    for rel in sorted(p.final):
        orig = p.pristine[rel]
        if rel not in old and orig is not None:
            w.write(state / st.ORIG / rel, orig, file_mode(tree, rel))
    written = []
    for rel, (_, want, mode) in sorted(changes.items()):
        if w.put(tree, rel, want, mode):
            written.append(rel)
    for rel in old:
        if rel not in p.final and os.path.lexists(state / st.ORIG / rel):
            w.tick()
            (state / st.ORIG / rel).unlink()
    w.write(state / MANIFEST, d.manifest.to_json().encode(), 0o644)
    recovery.end(tree, w)
    if dropped:
        progress.say(f'{tree}: dropped your edits to {", ".join(dropped)}{edits}')
    return written


def uninstall(tree: Path, version: KernelVersion | None = None,
              series: list[Change] | None = None, force: bool = False,
              save: Path | None = None, faults: Faults = NO_FAULTS) -> list[str]:
    """Restore every file the install touched; return them.

    With the version and the series, a tree whose .kloc/ is gone is
    recognised and restored too. Holds the tree's lock throughout.
    faults: for the tests, a write to fail or to be killed at (none by default).
    """
    with treelock.held(tree, 'uninstall'):
        st.check_tree(tree, st.package_files(series))
        return _uninstall(tree, version, series, force, save, Writer(faults))


def _uninstall(tree: Path, version: KernelVersion | None, series: list[Change] | None,
               force: bool, save: Path | None, w: Writer) -> list[str]:
    recovery.roll_back(tree, force, save, series, w)
    if version is not None and series is not None:
        m = recovery.manifest_or_rebuild(tree, version, series, force, save, w)
    else:
        m = read_manifest(tree, series)
    if m is None:
        if st.has_state(tree) and version is not None:
            w.tick()                        # leftovers of a run that wrote no file
            st.clear_state(tree)
        return []
    status = classify(tree, m)
    edited = sorted(rel for rel, s in status.items() if s == 'edited')
    if edited and not force:
        raise EditedFilesError(
            f'{tree}: edited since the package was installed: {", ".join(edited)}; '
            'uninstall would discard the edits. Save them first (git diff, or copy the '
            f'files), then run again with {FORCE_HINT} to restore the originals anyway; '
            'nothing was written')
    state = tree / STATE_DIR
    changes: Changes = {}
    for rel, r in sorted(m.files.items()):
        if r.original is None:
            want = None
        else:
            want = saved_original(tree, rel, 'make uninstall')
        cur = read_file(tree, rel)
        if cur != want:
            changes[rel] = (cur, want, r.mode)
    edits = _save_edits(tree, edited, save)
    recovery.begin(tree, 'uninstall', m, changes, w)
    for rel, (_, want, mode) in sorted(changes.items()):
        w.put(tree, rel, want, mode)
    w.tick()
    (state / MANIFEST).unlink()
    recovery.end(tree, w)
    w.tick()
    st.clear_state(tree)
    if edited:
        progress.say(f'{tree}: dropped your edits to {", ".join(edited)}{edits}')
    return sorted(m.files)
