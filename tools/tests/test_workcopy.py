# SPDX-License-Identifier: GPL-2.0
"""kloc's copy of a tree (trees/workcopy.py): the tree is only read, the copy follows it.

On a small git tree made of the real 6.12 files the series touches: every file of
the tree, .git/ included, is the same before and after (name, size, mtime, mode,
sha256), and so is git status; the copy holds what git lists, the series applied,
and a second refresh relinks and rewrites nothing.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any
from unittest import mock

from kloc.series import changes, planning
from kloc.series.state import MANIFEST, STATE_DIR, TreeLinkError
from kloc.trees import workcopy
from kloc.version import KernelVersion

from .helpers import TOOLS, pristine_tree

SERIES = changes.load_series()
DRIVER = 'drivers/irqchip/irq-gic-v3-its.c'


# sha256 of each file already read, by where it is and its inode's state. A write to
# a file's bytes sets its ctime (the VFS updates it on write(), on the first store
# through a shared mapping, on truncate, and on utimensat(), which cannot set ctime
# back), so a file whose device, inode, size, mtime and ctime are all as when it was
# hashed holds the bytes that were hashed; anything else is read again. Keyed per
# path too: hard links share an inode, and a rename moves one.
_HASHED: dict[tuple[str, int, int, int, int, int], str] = {}


def _sha256(path: str, st: os.stat_result) -> str:
    key = (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    sha = _HASHED.get(key)
    if sha is None:
        data = os.readlink(path).encode() if os.path.islink(path) else Path(path).read_bytes()
        after = os.lstat(path)
        sha = hashlib.sha256(data).hexdigest()
        if (after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns) == key[2:]:
            _HASHED[key] = sha      # not written while it was read
    return sha


def snapshot(root: Path) -> dict[str, tuple[int, int, int, str]]:
    """Every file and link under root, .git/ included: (size, mtime_ns, mode, sha256).
    The sha256 is read again wherever the inode's state says the bytes may have moved
    (_HASHED): a tree snapshotted before and after a command costs one read of it."""
    out = {}
    for top, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            p = os.path.join(top, name)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns, st.st_mode,
                                             _sha256(p, st))
    return out


def git(tree: Path, *args: str) -> str:
    return subprocess.run(['git', '-C', str(tree), *args], check=True, capture_output=True,
                          text=True).stdout


def git_tree(dest: Path) -> Path:
    """A stock 6.12 tree's key files, committed."""
    root, _ = pristine_tree(dest)
    git(root, 'init', '-q')
    (root / '.gitignore').write_text('*.o\n')
    git(root, 'add', '-A')
    git(root, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'stock')
    return root


def forget(copy: Path) -> None:
    """Let go of copy, as a command that exits does: the next prepare() is a new command's."""
    fd = workcopy._HELD.pop(copy, None)
    if fd is not None:
        os.close(fd)
    held = [p for p in os.environ.get(workcopy.HELD_ENV, '').split(os.pathsep)
            if p and p != str(copy)]
    os.environ[workcopy.HELD_ENV] = os.pathsep.join(held)


class SnapshotTest(unittest.TestCase):
    """snapshot() reads a file once, yet sees every write: same size, mtime put back."""

    def test_a_write_that_keeps_size_and_mtime_is_seen(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            root = Path(d) / 'tree'
            root.mkdir()
            f = root / 'file.c'
            f.write_bytes(b'int a;\n')
            other = Path(d) / 'link'
            os.link(f, other)               # as make kunit KDIR='s copy links it
            before = snapshot(root)
            self.assertEqual(snapshot(root), before)
            st = f.stat()
            for how in ('write', 'mmap'):
                with self.subTest(how=how):
                    if how == 'write':
                        with open(other, 'r+b') as w:   # through the other link
                            w.write(b'int b;\n')
                    else:
                        with open(other, 'r+b') as w, mmap.mmap(w.fileno(), 0) as m:
                            m[4:5] = b'c'
                    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
                    now = snapshot(root)
                    self.assertEqual(now['file.c'][:3], before['file.c'][:3])
                    self.assertNotEqual(now['file.c'][3], before['file.c'][3])
                    self.assertEqual(now['file.c'][3],
                                     hashlib.sha256(f.read_bytes()).hexdigest())


class CopyTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix='kloc-copy-')
        self.addCleanup(tmp.cleanup)
        self.tmp = Path(tmp.name)
        self.src = git_tree(self.tmp / 'linux')
        self.version = KernelVersion(6, 12)
        self.copy = self.tmp / 'cache' / 'src'
        self.addCleanup(lambda: forget(self.copy))

    def prepare(self) -> workcopy.Refreshed:
        forget(self.copy)
        r = workcopy.prepare(self.src, self.copy, self.version, SERIES, 'test')
        assert r is not None
        return r

    def test_the_tree_is_only_read_and_the_copy_carries_the_series(self) -> None:
        # uncommitted edits, an untracked file, an ignored one
        d = self.src / DRIVER
        d.write_text(d.read_text().replace('Unable to get SGI status', 'No SGI status'))
        (self.src / 'mine.c').write_text('int mine;\n')
        (self.src / 'old.o').write_text('built\n')
        before = snapshot(self.src)
        status = git(self.src, '--no-optional-locks', 'status', '--porcelain')
        r = self.prepare()
        self.assertEqual(snapshot(self.src), before, 'the tree was written')
        self.assertEqual(git(self.src, '--no-optional-locks', 'status', '--porcelain'), status)
        self.assertTrue((self.copy / 'mine.c').is_file())
        self.assertFalse((self.copy / 'old.o').exists(), 'an ignored file was copied')
        self.assertFalse((self.copy / '.git').exists())
        text = (self.copy / DRIVER).read_text()
        self.assertIn('No SGI status', text)
        self.assertNotEqual(text, d.read_text(), 'the series is not applied')
        self.assertIn(DRIVER, r.written)
        self.assertTrue((self.copy / STATE_DIR / MANIFEST).is_file())
        self.assertEqual((self.copy / 'Makefile').stat().st_ino,
                         (self.src / 'Makefile').stat().st_ino, 'not hard-linked')

    def test_a_second_refresh_changes_nothing_an_edit_one_file(self) -> None:
        self.prepare()
        copied = snapshot(self.copy)
        r = self.prepare()
        self.assertEqual((r.linked, r.removed, r.written), (0, 0, []))
        self.assertEqual(snapshot(self.copy), copied, 'mtimes moved: make would rebuild')
        p = self.src / 'mm/percpu.c'
        new = self.src / 'mm/percpu.c.new'
        new.write_bytes(p.read_bytes() + b'/* edited */\n')
        new.replace(p)          # as editors save: a new inode
        (self.src / 'Kconfig').unlink()
        r = self.prepare()
        self.assertEqual((r.linked, r.removed), (1, 1))
        self.assertFalse((self.copy / 'Kconfig').exists())
        self.assertTrue((self.copy / 'mm/percpu.c').read_bytes().endswith(b'/* edited */\n'))

    def test_a_reverted_edit_brings_the_copy_back(self) -> None:
        self.prepare()
        clean = (self.copy / DRIVER).read_bytes()
        d = self.src / DRIVER
        stock = d.read_bytes()
        d.write_bytes(stock.replace(b'Unable to get SGI status', b'No SGI status'))
        self.prepare()
        self.assertNotEqual((self.copy / DRIVER).read_bytes(), clean)
        d.write_bytes(stock)
        r = self.prepare()
        self.assertEqual((self.copy / DRIVER).read_bytes(), clean)
        self.assertEqual(r.written, [DRIVER])

    def test_a_tree_that_carries_the_series_is_used_as_it_is(self) -> None:
        # as after git am of make patches
        self.prepare()
        for rel in planning.series_files(self.version, SERIES):
            data = (self.copy / rel).read_bytes() if (self.copy / rel).is_file() else None
            if data is not None:
                (self.src / rel).parent.mkdir(parents=True, exist_ok=True)
                (self.src / rel).write_bytes(data)
        r = self.prepare()
        self.assertEqual(r.written, [])
        self.assertEqual((self.copy / DRIVER).stat().st_ino, (self.src / DRIVER).stat().st_ino)

    def test_a_link_on_the_way_to_a_file_the_series_writes_is_refused(self) -> None:
        elsewhere = self.tmp / 'elsewhere'
        (self.src / 'drivers/irqchip').rename(elsewhere)
        (self.src / 'drivers/irqchip').symlink_to(elsewhere)
        before = snapshot(elsewhere)
        with self.assertRaises(TreeLinkError):
            self.prepare()
        self.assertEqual(snapshot(elsewhere), before, 'written through the link')

    def test_a_tree_built_in_place_that_git_does_not_track_is_refused(self) -> None:
        plain = self.tmp / 'plain'
        pristine_tree(plain)
        (plain / '.config').write_text('CONFIG_SMP=y\n')
        with self.assertRaisesRegex(workcopy.CopyError, r'not a git tree and holds in-tree '
                                    r'build output \(\.config\).*mrproper'):
            workcopy.listing(plain)
        (plain / '.config').unlink()
        self.assertIn('Makefile', workcopy.listing(plain))

    def test_another_filesystem_gets_copies(self) -> None:
        mnt = self.tmp / 'other-fs'
        mnt.mkdir()
        if subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', str(mnt)],
                          capture_output=True).returncode != 0:
            self.skipTest('cannot mount a tmpfs here (not root)')
        self.addCleanup(lambda: subprocess.run(['umount', '-l', str(mnt)], check=False))
        self.copy = mnt / 'src'
        before = snapshot(self.src)
        r = self.prepare()
        self.assertTrue(r.copied)
        self.assertEqual((self.copy / 'Makefile').read_bytes(),
                         (self.src / 'Makefile').read_bytes())
        self.assertEqual((self.copy / 'Makefile').stat().st_mtime_ns,
                         (self.src / 'Makefile').stat().st_mtime_ns)
        r = self.prepare()
        self.assertEqual((r.linked, r.written), (0, []))
        self.assertEqual(snapshot(self.src), before)

    def test_a_mount_that_refuses_links_gets_copies_after_one_try(self) -> None:
        # a bind mount of the same filesystem: same st_dev, but link() says EXDEV
        other, mnt = self.tmp / 'other', self.tmp / 'bind'
        other.mkdir()
        mnt.mkdir()
        if subprocess.run(['mount', '--bind', str(other), str(mnt)],
                          capture_output=True).returncode != 0:
            self.skipTest('cannot bind-mount here (not root)')
        self.addCleanup(lambda: subprocess.run(['umount', '-l', str(mnt)], check=False))
        self.copy = mnt / 'src'
        tries = []
        real_link = os.link

        def link(*args: Any, **kwargs: Any) -> None:
            tries.append(args[0])
            real_link(*args, **kwargs)
        with mock.patch('os.link', link):
            r = self.prepare()
        self.assertTrue(r.copied)
        self.assertEqual(len(tries), 1, 'a link tried for every file after EXDEV')
        self.assertEqual((self.copy / 'Makefile').read_bytes(),
                         (self.src / 'Makefile').read_bytes())
        with mock.patch('os.link', link):
            r = self.prepare()
        self.assertEqual((r.linked, r.written), (0, []))

    def test_two_commands_share_a_fresh_copy(self) -> None:
        self.prepare()
        code = ('import sys; from pathlib import Path; from kloc.trees import workcopy; '
                'from kloc.version import KernelVersion; '
                'from kloc.series import changes; '
                'r = workcopy.prepare(Path(sys.argv[1]), Path(sys.argv[2]), '
                'KernelVersion(6, 12), changes.load_series(), "t"); '
                'print(r.linked, len(r.written))')
        # this process holds the copy shared; another shares it without waiting
        proc = subprocess.run([sys.executable, '-c', code, str(self.src), str(self.copy)],
                              cwd=TOOLS, capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=str(TOOLS),
                                       **{workcopy.HELD_ENV: ''}))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split(), ['0', '0'])

    def test_release_all_lets_another_command_refresh(self) -> None:
        """tests.run's workers run one unit after another: once a unit is done, the
        copies it held are let go, as if the worker had exited."""
        self.prepare()
        lock = self.copy.parent / f'{self.copy.name}.lock'
        code = ('import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); '
                'fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)')
        held = subprocess.run([sys.executable, '-c', code, str(lock)], capture_output=True)
        self.assertNotEqual(held.returncode, 0, 'the copy was not held')
        os.environ[workcopy.HELD_ENV] = os.pathsep.join(['/a/parents/copy', str(self.copy)])
        workcopy.release_all()
        self.assertEqual(os.environ.pop(workcopy.HELD_ENV), '/a/parents/copy')
        free = subprocess.run([sys.executable, '-c', code, str(lock)], capture_output=True)
        self.assertEqual(free.returncode, 0, free.stderr)


if __name__ == '__main__':
    unittest.main()
