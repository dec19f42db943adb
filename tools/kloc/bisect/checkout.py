# SPDX-License-Identifier: GPL-2.0
"""A revision's files, written from git into a folder of bisect's own.

The folder is not a git work tree and shares no inode with the user's tree:
each file is written from its blob (gitread.Repo.blobs) as a new file, with
its mode (the executable bit; a symlink as a symlink) and the time it was
written as its mtime. Moving to another revision writes only the paths
that differ from the revision already there (git diff-tree), and removes
those the new one lacks, so that kbuild, seeing fresh mtimes on exactly
those files, rebuilds only what they feed.

A state file beside the folder records the revision in it, or the move in
progress: a move that was interrupted is done again in full (writing a
path twice is harmless), and an interrupted first checkout starts over.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from kloc import progress
from kloc.atomicfile import write_text
from kloc.bisect.gitread import SYMLINK, Entry, GitError, Repo


@dataclass(frozen=True)
class Moved:
    rev: str
    written: int
    removed: int
    seconds: float
    full: bool          # a whole checkout, not a move


def _state(src: Path) -> Path:
    return src.parent / f'{src.name}.state.json'


def current(src: Path) -> str | None:
    """The revision whose files src holds, None if none (or a move left unfinished)."""
    try:
        st = json.loads(_state(src).read_text())
    except (OSError, ValueError):
        return None
    rev = st.get('rev') if isinstance(st, dict) else None
    return rev if isinstance(rev, str) and st.get('done') is True and src.is_dir() else None


def _record(src: Path, **state: object) -> None:
    write_text(_state(src), json.dumps(state) + '\n')


def _safe(src: Path, rel: str) -> Path:
    """src/rel, refused if rel would leave src (git never names such a path)."""
    if rel.startswith('/') or any(p in ('', '.', '..') for p in rel.split('/')):
        raise GitError(f'git named the path {rel!r}, which would leave {src}')
    return src / rel


def _clear(path: Path) -> None:
    """Make way for a file at path: nothing there, and its folders existing."""
    for parent in reversed(path.parents):
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            parent.unlink()
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)


def _umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def _write(repo: Repo, src: Path, entries: list[Entry], fresh: bool = False) -> int:
    """Each entry's blob at its path: a symlink, or a file with git's modes (0777 or
    0666, less the umask, as git checkout writes them). fresh: src was empty, so there
    is nothing in the way, only folders to make."""
    written = 0
    umask = _umask()
    made: set[Path] = set()
    for e, data in zip(entries, repo.blobs([e.sha for e in entries])):
        dest = _safe(src, e.path)
        if not fresh:
            _clear(dest)
        elif dest.parent not in made:
            dest.parent.mkdir(parents=True, exist_ok=True)
            made.add(dest.parent)
        if e.mode == SYMLINK:
            os.symlink(os.fsdecode(data), dest)
        else:
            tmp = dest.with_name(f'.{dest.name}.kloc-tmp')
            with open(tmp, 'wb') as f:
                f.write(data)
            os.chmod(tmp, (0o777 if e.mode & 0o111 else 0o666) & ~umask)
            os.replace(tmp, dest)
        written += 1
        if written % 10000 == 0:
            progress.say(f'  {written:,} of {len(entries):,} files written')
    return written


def _remove(src: Path, paths: list[str]) -> int:
    n = 0
    for rel in paths:
        p = _safe(src, rel)
        if p.is_symlink() or p.is_file():
            p.unlink()
            n += 1
        parent = p.parent
        while parent != src and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    return n


def _move(repo: Repo, src: Path, have: str, rev: str) -> tuple[int, int]:
    _record(src, rev=rev, **{'from': have}, done=False)
    changed = repo.changes(have, rev)
    gone = [e.path for e in changed if not e.mode]
    n = _write(repo, src, [e for e in changed if e.mode])
    removed = _remove(src, gone)
    _record(src, rev=rev, done=True)
    return n, removed


def checkout(repo: Repo, rev: str, src: Path) -> Moved:
    """Make src hold rev's files, writing only what differs from what it holds."""
    start = time.monotonic()
    have = current(src)
    if have == rev:
        return Moved(rev, 0, 0, 0.0, False)
    if have is not None and not repo.has_commit(have):
        # the tree made again, or its series rebased and the old commits pruned
        progress.say(f'{src} holds {have[:12]}, a commit {repo.path} does not have: '
                     'writing a whole checkout')
        have = None
    try:
        was = json.loads(_state(src).read_text())
    except (OSError, ValueError):
        was = {}
    # an interrupted move is finished first (writing a path twice is harmless)
    if have is None and isinstance(was, dict) and isinstance(was.get('from'), str) \
            and isinstance(was.get('rev'), str) and src.is_dir() \
            and repo.has_commit(was['from']) and repo.has_commit(was['rev']):
        progress.say(f'{src}: finishing the move to {was["rev"][:12]} that was interrupted')
        _move(repo, src, was['from'], was['rev'])
        have = was['rev']
        if have == rev:
            return Moved(rev, 0, 0, time.monotonic() - start, False)
    if have is None:
        if src.exists():
            shutil.rmtree(src)
        src.mkdir(parents=True)
        _record(src, rev=rev, done=False)
        entries = repo.tree(rev)
        progress.say(f'writing {rev[:12]}\'s {len(entries):,} files from git into {src}')
        n = _write(repo, src, entries, fresh=True)
        _record(src, rev=rev, done=True)
        return Moved(rev, n, 0, time.monotonic() - start, True)
    n, removed = _move(repo, src, have, rev)
    return Moved(rev, n, removed, time.monotonic() - start, False)
