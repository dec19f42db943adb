# SPDX-License-Identifier: GPL-2.0
"""The user's git tree, read and never written.

Every command here is one that reads: rev-parse, rev-list, merge-base
--is-ancestor, log, ls-tree, diff-tree, cat-file and status, each run with
--no-optional-locks (status would otherwise refresh the index) and with
the file-system monitor and the untracked cache off, so that nothing
under .git changes. A shallow clone (whose history stops) and a partial
clone (whose missing objects git would fetch, writing .git/objects) are
refused before anything is read.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kloc.errors import KlocError

# Reading, with nothing git may write on its own account.
_GIT = ('git', '--no-optional-locks', '-c', 'core.fsmonitor=false',
        '-c', 'core.untrackedCache=false', '-c', 'gc.auto=0')
_ENV = {'GIT_OPTIONAL_LOCKS': '0', 'GIT_NO_LAZY_FETCH': '1', 'GIT_TERMINAL_PROMPT': '0',
        'GIT_CONFIG_NOSYSTEM': '1', 'LC_ALL': 'C'}
GITLINK, SYMLINK = 0o160000, 0o120000


class GitError(KlocError):
    """A KDIR or revision bisect cannot use; the message names the fix."""


@dataclass(frozen=True)
class Entry:
    """One path of a revision's tree (ls-tree) or of a change (diff-tree)."""
    mode: int       # 0o100644, 0o100755, 0o120000; 0 where the path is deleted
    sha: str
    path: str


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:12]


class Repo:
    """A git work tree, read-only."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _run(self, *args: str, check: bool = True, data: bytes | None = None) -> bytes:
        env = dict(os.environ, **_ENV)
        r = subprocess.run([*_GIT, '-C', str(self.path), *args], capture_output=True,
                           input=data, env=env)
        if check and r.returncode:
            err = r.stderr.decode(errors='replace').strip().splitlines()
            raise GitError(f'{self.path}: git {" ".join(args[:3])} failed: '
                           f'{err[-1] if err else f"exit {r.returncode}"}')
        return r.stdout

    def text(self, *args: str) -> str:
        return self._run(*args).decode(errors='surrogateescape').strip()

    def check(self) -> None:
        """GitError unless path is the top of a complete git work tree."""
        if not self.path.is_dir():
            raise GitError(f'KDIR={self.path} is not a folder: give a git clone of Linux')
        r = subprocess.run([*_GIT, '-C', str(self.path), 'rev-parse', '--show-toplevel'],
                           capture_output=True, text=True, env=dict(os.environ, **_ENV))
        if r.returncode or Path(r.stdout.strip()).resolve() != self.path.resolve():
            raise GitError(f'KDIR={self.path} is not the top of a git work tree: make bisect '
                           'reads the commits between GOOD and BAD from git; give a git '
                           'clone of Linux')
        if self.text('rev-parse', '--is-shallow-repository') == 'true':
            raise GitError(f'KDIR={self.path} is a shallow clone: its history stops, and '
                           'fetching the rest would write .git; run "git fetch --unshallow" '
                           'yourself, or give a full clone')
        promisor = self._run('config', '--get-regexp',
                             r'^(extensions\.partialclone|remote\..*\.promisor)$',
                             check=False).decode(errors='replace').split('\n')
        if any(line.strip() and not line.strip().endswith(' false') for line in promisor):
            raise GitError(f'KDIR={self.path} is a partial clone: git would fetch the '
                           'objects it lacks, writing .git/objects; give a full clone')

    def resolve(self, rev: str, what: str) -> Commit:
        """The commit rev names (GitError, naming what, if none)."""
        if not rev or rev.startswith('-'):
            raise GitError(f'{what}={rev!r} is not a revision: give a commit, tag or branch')
        sha = self._commit(rev)
        if len(sha) != 40:
            raise GitError(f'{what}={rev} names no commit in {self.path} (git rev-parse '
                           f'--verify {rev} finds none): give a commit, tag or branch it has')
        return Commit(sha, self.subject(sha))

    def _commit(self, rev: str) -> str:
        """The full sha of the commit rev names, or '' where it names none here."""
        return self._run('rev-parse', '--verify', '--quiet', '--end-of-options',
                         f'{rev}^{{commit}}', check=False).decode().strip()

    def has_commit(self, sha: str) -> bool:
        """Whether sha is a commit this repository has (nothing is fetched)."""
        return len(self._commit(sha)) == 40

    def subject(self, sha: str) -> str:
        return self.text('log', '-1', '--format=%s', sha, '--')

    def is_ancestor(self, a: str, b: str) -> bool:
        r = subprocess.run([*_GIT, '-C', str(self.path), 'merge-base', '--is-ancestor', a, b],
                           capture_output=True, env=dict(os.environ, **_ENV))
        return r.returncode == 0

    def first_parents(self, good: str, bad: str) -> list[Commit]:
        """The commits after good up to bad along bad's first parents, oldest first."""
        out = self.text('rev-list', '--first-parent', '--reverse', '--format=%H %s',
                        f'{good}..{bad}', '--')
        commits = []
        for line in out.splitlines():
            if line.startswith('commit '):
                continue
            sha, _, subject = line.partition(' ')
            commits.append(Commit(sha, subject))
        return commits

    def merges(self, good: str, bad: str) -> int:
        """How many of the first-parent commits are merges."""
        out = self.text('rev-list', '--first-parent', '--merges', '--count', f'{good}..{bad}')
        return int(out or 0)

    def tree(self, rev: str) -> list[Entry]:
        """Every blob and symlink of rev's tree (submodules left out)."""
        out = self._run('ls-tree', '-r', '-z', '--full-tree', rev)
        entries = []
        for rec in out.split(b'\0'):
            if not rec:
                continue
            meta, _, path = rec.partition(b'\t')
            mode, kind, sha = meta.decode().split()
            if kind == 'blob':
                entries.append(Entry(int(mode, 8), sha, path.decode(errors='surrogateescape')))
        return entries

    def changes(self, a: str, b: str) -> list[Entry]:
        """What differs from a to b, path by path: the new mode and blob, or mode 0 for a
        path b lacks (renames as a deletion and an addition)."""
        out = self._run('diff-tree', '-r', '-z', '--no-renames', '--no-commit-id', a, b)
        parts = out.split(b'\0')
        entries = []
        i = 0
        while i + 1 < len(parts):
            meta, path = parts[i].decode(), parts[i + 1].decode(errors='surrogateescape')
            i += 2
            if not meta.startswith(':'):
                continue
            _, new_mode, _, new_sha, status = meta[1:].split()
            mode = int(new_mode, 8)
            if status == 'D' or mode == GITLINK:
                entries.append(Entry(0, '', path))
            else:
                entries.append(Entry(mode, new_sha, path))
        return entries

    def blobs(self, shas: list[str]) -> Iterator[bytes]:
        """The blobs' bytes, in order: one git cat-file --batch for them all, fed from a
        thread while the answers are read, so that neither waits on the other."""
        if not shas:
            return
        env = dict(os.environ, **_ENV)
        with subprocess.Popen([*_GIT, '-C', str(self.path), 'cat-file', '--batch',
                               '--buffer'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env=env) as p:
            assert p.stdin is not None and p.stdout is not None
            stdin = p.stdin

            def feed() -> None:
                try:
                    for sha in shas:
                        stdin.write(sha.encode() + b'\n')
                    stdin.close()
                except BrokenPipeError:
                    pass
            writer = threading.Thread(target=feed, daemon=True)
            writer.start()
            try:
                for sha in shas:
                    head = p.stdout.readline().split()
                    if len(head) != 3 or head[1] != b'blob':
                        raise GitError(f'{self.path}: git cat-file found no blob {sha}')
                    size = int(head[2])
                    data = p.stdout.read(size)
                    p.stdout.read(1)
                    yield data
            finally:
                if writer.is_alive():
                    p.kill()
                writer.join()

    def dirty(self) -> list[str]:
        """Tracked files with uncommitted changes (read without touching the index)."""
        out = self._run('status', '--porcelain', '-z', '--untracked-files=no')
        return [rec[3:].decode(errors='surrogateescape') for rec in out.split(b'\0')
                if len(rec) > 3]
