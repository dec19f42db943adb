# SPDX-License-Identifier: GPL-2.0
"""make bisect's git side (kloc.bisect.gitread, checkout, run.check), on real git
repositories made here: revisions written into bisect's own folder with their modes,
symlinks and fresh mtimes, only what changed written on a move, an interrupted move
finished; the repository, .git/ included, never written; and every bad input refused
in one line, with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

from kloc.bisect import checkout, run as bisect_run
from kloc.bisect.gitread import GitError, Repo

from .test_workcopy import git, snapshot


def commit(repo: Path, msg: str) -> str:
    git(repo, 'add', '-A')
    git(repo, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', msg)
    return git(repo, 'rev-parse', 'HEAD').strip()


def make_repo(root: Path) -> tuple[Path, list[str]]:
    """A repository of five commits: files, an executable, a symlink, a rename, a
    deletion, a folder that becomes a file."""
    repo = root / 'linux'
    repo.parent.mkdir(parents=True, exist_ok=True)
    repo.mkdir()
    git(repo, 'init', '-q')
    git(repo, 'config', 'gc.auto', '0')
    shas = []
    (repo / 'Makefile').write_text('VERSION = 6\nPATCHLEVEL = 12\n')
    (repo / 'a.c').write_text('int a;\n')
    (repo / 'd').mkdir()
    (repo / 'd' / 'x.h').write_text('#define X 1\n')
    shas.append(commit(repo, 'first'))
    (repo / 'run.sh').write_text('#!/bin/sh\necho hi\n')
    os.chmod(repo / 'run.sh', 0o755)
    os.symlink('a.c', repo / 'link.c')
    shas.append(commit(repo, 'an executable and a symlink'))
    (repo / 'a.c').write_text('int a = 1;\n')
    shas.append(commit(repo, 'a.c changed'))
    git(repo, 'mv', 'd/x.h', 'y.h')
    if (repo / 'd').is_dir():
        (repo / 'd').rmdir()
    (repo / 'd').write_text('now a file\n')
    shas.append(commit(repo, 'the folder d becomes a file'))
    os.unlink(repo / 'link.c')
    shas.append(commit(repo, 'the symlink gone'))
    return repo, shas


def listing(root: Path) -> dict[str, tuple[str, int, bytes]]:
    out = {}
    for top, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            p = Path(top) / name
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ('link', 0, os.readlink(p).encode())
            else:
                out[rel] = ('file', p.stat().st_mode & 0o777, p.read_bytes())
    return out


def at(repo: Path, sha: str, dest: Path) -> dict[str, tuple[str, int, bytes]]:
    """What git itself gives of sha (git archive, extracted into dest)."""
    tar = subprocess.run(['git', '-C', str(repo), '-c', 'tar.umask=user', 'archive', sha],
                         capture_output=True, check=True).stdout
    subprocess.run(['tar', '-x', '-C', str(dest)], input=tar, check=True)
    return listing(dest)


class Checkout(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        self.repo, self.shas = make_repo(self.root)
        self.before = snapshot(self.repo)

    def tearDown(self) -> None:
        self.assertEqual(snapshot(self.repo), self.before, 'the repository was written')
        self.tmp.cleanup()

    def test_each_revision_as_git_has_it(self) -> None:
        src = self.root / 'cache' / 'step'
        r = Repo(self.repo)
        self.assertTrue(checkout.checkout(r, self.shas[0], src).full)
        for k, sha in enumerate(self.shas + [self.shas[0], self.shas[4], self.shas[1]]):
            moved = checkout.checkout(r, sha, src)
            self.assertFalse(moved.full)
            dest = self.root / f'want-{k}'
            dest.mkdir()
            self.assertEqual(listing(src), at(self.repo, sha, dest), sha)
            self.assertEqual(checkout.current(src), sha)

    def test_a_move_writes_exactly_the_changed_paths_with_fresh_mtimes(self) -> None:
        src = self.root / 'cache' / 'step'
        r = Repo(self.repo)
        checkout.checkout(r, self.shas[1], src)
        old = {p: os.lstat(src / p).st_mtime_ns for p in listing(src)}
        time.sleep(0.02)
        t0 = time.time_ns()
        moved = checkout.checkout(r, self.shas[2], src)
        self.assertEqual((moved.written, moved.removed), (1, 0))
        fresh = sorted(p for p in listing(src) if os.lstat(src / p).st_mtime_ns != old.get(p))
        self.assertEqual(fresh, ['a.c'])
        self.assertGreaterEqual(os.lstat(src / 'a.c').st_mtime_ns, t0 - 10**7)
        umask = os.umask(0o22)
        os.umask(umask)
        self.assertEqual(os.stat(src / 'run.sh').st_mode & 0o777, 0o777 & ~umask)
        self.assertEqual(os.stat(src / 'a.c').st_mode & 0o777, 0o666 & ~umask)
        self.assertTrue((src / 'link.c').is_symlink())

    def test_an_interrupted_move_is_finished_before_the_next(self) -> None:
        src = self.root / 'cache' / 'step'
        r = Repo(self.repo)
        checkout.checkout(r, self.shas[0], src)
        # as if killed after recording the move to shas[3] and writing nothing
        state = src.parent / f'{src.name}.state.json'
        state.write_text(json.dumps({'rev': self.shas[3], 'from': self.shas[0],
                                     'done': False}))
        self.assertIsNone(checkout.current(src))
        checkout.checkout(r, self.shas[4], src)
        dest = self.root / 'want'
        dest.mkdir()
        self.assertEqual(listing(src), at(self.repo, self.shas[4], dest))

    def test_an_interrupted_first_checkout_starts_over(self) -> None:
        src = self.root / 'cache' / 'step'
        src.mkdir(parents=True)
        (src / 'stray').write_text('half a checkout\n')
        (src.parent / f'{src.name}.state.json').write_text(
            json.dumps({'rev': self.shas[2], 'done': False}))
        checkout.checkout(Repo(self.repo), self.shas[2], src)
        dest = self.root / 'want'
        dest.mkdir()
        self.assertEqual(listing(src), at(self.repo, self.shas[2], dest))

    def test_a_copy_of_commits_the_tree_no_longer_has_gets_a_whole_checkout(self) -> None:
        """The same KDIR made again, or its series rebased and the old commits pruned:
        the copy's recorded revision, or an unfinished move's, is no object of the
        repository, so there is nothing to diff against (make test's second run, found
        by it: "git diff-tree -r -z failed: fatal: bad object")."""
        src = self.root / 'cache' / 'step'
        other, _ = make_repo(self.root / 'other')
        theirs = []
        for k in range(3):
            (other / 'only-there.c').write_text(f'int only_there = {k};\n')
            theirs.append(commit(other, f'not in the tree ({k})'))
        for state in ({'rev': theirs[0], 'done': True},
                      {'rev': theirs[1], 'from': theirs[0], 'done': False}):
            with self.subTest(state=state):
                checkout.checkout(Repo(other), theirs[2], src)
                (src.parent / f'{src.name}.state.json').write_text(json.dumps(state))
                moved = checkout.checkout(Repo(self.repo), self.shas[1], src)
                self.assertTrue(moved.full)
                dest = self.root / f'want-{len(state)}'
                dest.mkdir()
                self.assertEqual(listing(src), at(self.repo, self.shas[1], dest))
                self.assertEqual(checkout.current(src), self.shas[1])


def request(kdir: Path, good: str, bad: str, out: Path) -> bisect_run.Request:
    return bisect_run.Request(kdir=kdir, good=good, bad=bad, settings_out=out,
                              cache=out / 'cache', topologies=('arm64_2n_its1',),
                              topology='x86_64_2n', counted=0, jobs=1, timeout=60,
                              seconds=1, alpha=0.05, mde=3.6)


class Refusals(unittest.TestCase):
    """Each bad input: one line naming the problem and the fix, nothing written."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        self.repo, self.shas = make_repo(self.root)
        self.out = self.root / 'out'

    def tearDown(self) -> None:
        self.assertFalse(self.out.exists(), 'a refused bisect wrote OUT')
        self.tmp.cleanup()

    def refused(self, req: bisect_run.Request, why: str) -> None:
        before = snapshot(req.kdir) if req.kdir.is_dir() else {}
        with self.assertRaisesRegex(GitError, why) as cm:
            bisect_run.check(req)
        self.assertNotIn('\n', str(cm.exception))
        if before:
            self.assertEqual(snapshot(req.kdir), before)

    def test_a_good_that_is_not_an_ancestor(self) -> None:
        git(self.repo, 'checkout', '-q', '-b', 'side', self.shas[1])
        (self.repo / 'side.c').write_text('int side;\n')
        side = commit(self.repo, 'a side branch')
        git(self.repo, 'checkout', '-q', 'master' if 'master' in git(self.repo, 'branch')
            else 'main')
        self.refused(request(self.repo, side, self.shas[4], self.out),
                     'is not an ancestor of BAD')

    def test_a_revision_that_does_not_exist(self) -> None:
        self.refused(request(self.repo, self.shas[0], 'v9.9-nothing', self.out),
                     r'BAD=v9\.9-nothing names no commit')
        self.refused(request(self.repo, '--all', self.shas[4], self.out), 'not a revision')

    def test_the_same_commit(self) -> None:
        self.refused(request(self.repo, self.shas[2], self.shas[2], self.out), 'same commit')

    def test_not_a_git_tree(self) -> None:
        plain = self.root / 'plain'
        plain.mkdir()
        (plain / 'Makefile').write_text('VERSION = 6\n')
        self.refused(request(plain, 'a', 'b', self.out), 'is not the top of a git work tree')
        (self.repo / 'sub').mkdir()
        self.refused(request(self.repo / 'sub', 'a', 'b', self.out),
                     'is not the top of a git')

    def test_a_shallow_clone(self) -> None:
        shallow = self.root / 'shallow'
        subprocess.run(['git', 'clone', '-q', '--depth', '2', f'file://{self.repo}',
                        str(shallow)], check=True, capture_output=True)
        self.refused(request(shallow, 'HEAD~1', 'HEAD', self.out), 'shallow clone')

    def test_a_partial_clone(self) -> None:
        git(self.repo, 'config', 'uploadpack.allowFilter', 'true')
        partial = self.root / 'partial'
        subprocess.run(['git', 'clone', '-q', '--filter=blob:none', f'file://{self.repo}',
                        str(partial)], check=True, capture_output=True)
        self.refused(request(partial, 'HEAD~1', 'HEAD', self.out), 'partial clone')

    def test_a_dirty_tree_is_taken_and_said(self) -> None:
        (self.repo / 'a.c').write_text('int a = 2; /* not committed */\n')
        c = bisect_run.check(request(self.repo, self.shas[0], self.shas[4], self.out))
        self.assertEqual(c.dirty, ['a.c'])
        self.assertEqual([x.sha for x in c.commits], self.shas[1:])


if __name__ == '__main__':
    unittest.main()
