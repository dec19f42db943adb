# SPDX-License-Identifier: GPL-2.0
"""make review's PATCH=: git deletions, renames and mode changes; what is not a file."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from kloc.review import patch_input
from kloc.review.errors import ReviewError
from kloc.review.patched import patched_tree
from kloc.series.patching import (Contents, HunkError, PatchError, apply_text, file_changes,
                                  touched_files)
from kloc.trees.sources import Tree
from kloc.version import KernelVersion

from .test_cli import TOOLS

LOOPBACK = 'drivers/net/loopback.c'
DELETE = '''\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: t <t@t>
Subject: [PATCH] net: drop the old driver

---
diff --git a/drivers/net/old.c b/drivers/net/old.c
deleted file mode 100644
index 3b18e51..0000000
--- a/drivers/net/old.c
+++ /dev/null
@@ -1,3 +0,0 @@
-int a;
-int b;
-int c;
'''
PLAIN_DELETE = '''\
--- a/drivers/net/old.c
+++ /dev/null
@@ -1,3 +0,0 @@
-int a;
-int b;
-int c;
'''
RENAME = '''\
diff --git a/drivers/net/old.c b/drivers/net/new.c
similarity index 100%
rename from drivers/net/old.c
rename to drivers/net/new.c
'''
RENAME_HUNKS = '''\
diff --git a/drivers/net/old.c b/drivers/net/sub/new.c
similarity index 67%
rename from drivers/net/old.c
rename to drivers/net/sub/new.c
index 3b18e51..8d2a1c2 100644
--- a/drivers/net/old.c
+++ b/drivers/net/sub/new.c
@@ -1,3 +1,3 @@
 int a;
-int b;
+long b;
 int c;
'''
MODE = '''\
diff --git a/scripts/run.sh b/scripts/run.sh
old mode 100644
new mode 100755
'''
MODE_AND_HUNK = '''\
diff --git a/scripts/run.sh b/scripts/run.sh
old mode 100644
new mode 100755
index 1111111..2222222
--- a/scripts/run.sh
+++ b/scripts/run.sh
@@ -1 +1,2 @@
 echo hi
+echo there
'''


class Parse(unittest.TestCase):
    """What the parser sees in each kind of section."""

    def test_kinds(self) -> None:
        self.assertEqual([(c.old, c.new, c.verb) for c in file_changes(DELETE)],
                         [('drivers/net/old.c', None, 'deletes')])
        self.assertEqual([(c.old, c.new, c.verb) for c in file_changes(PLAIN_DELETE)],
                         [('drivers/net/old.c', None, 'deletes')])
        self.assertEqual([(c.old, c.new, c.verb, c.hunks) for c in file_changes(RENAME)],
                         [('drivers/net/old.c', 'drivers/net/new.c', 'renames', 0)])
        self.assertEqual([(c.old, c.new, c.hunks) for c in file_changes(RENAME_HUNKS)],
                         [('drivers/net/old.c', 'drivers/net/sub/new.c', 1)])
        (c,) = file_changes(MODE)
        self.assertEqual((c.old, c.new, c.mode, c.verb),
                         ('scripts/run.sh', 'scripts/run.sh', 0o755, 'changes the mode of'))
        self.assertEqual(touched_files(RENAME + MODE_AND_HUNK + DELETE),
                         ['drivers/net/old.c', 'drivers/net/new.c', 'scripts/run.sh'])

    def test_a_removed_line_that_looks_like_a_header_is_a_hunk_line(self) -> None:
        text = ('--- a/x/q.sql\n+++ b/x/q.sql\n@@ -1,3 +1,1 @@\n--- a/x/other.sql\n'
                '-+++ b/x/other.sql\n keep\n')
        self.assertEqual(touched_files(text), ['x/q.sql'])

    def test_refused(self) -> None:
        for text, why in (
                ('--- a/../etc/passwd\n+++ b/../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n',
                 'outside the tree'),
                ('diff --git a/x/l b/x/l\nnew file mode 120000\n--- /dev/null\n+++ b/x/l\n'
                 '@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n',
                 'a symbolic link'),
                ('diff --git a/a/b b/c/d\nrename from a/b\nrename to ../d\n',
                 'outside the tree')):
            with self.subTest(why=why), self.assertRaisesRegex(PatchError, why):
                touched_files(text)


class Applied(unittest.TestCase):
    """GNU patch, in memory: the Contents and Modes each kind leaves."""

    STATE: Contents = {'drivers/net/old.c': b'int a;\nint b;\nint c;\n',
                       'scripts/run.sh': b'echo hi\n'}

    def test_each_kind(self) -> None:
        out, modes = apply_text(DELETE, dict(self.STATE), {}, 't')
        self.assertEqual(out, {'drivers/net/old.c': None})
        out, _ = apply_text(PLAIN_DELETE, dict(self.STATE), {}, 't')
        self.assertEqual(out, {'drivers/net/old.c': None})
        out, modes = apply_text(RENAME, dict(self.STATE), {'drivers/net/old.c': 0o600}, 't')
        self.assertEqual(out, {'drivers/net/old.c': None,
                               'drivers/net/new.c': self.STATE['drivers/net/old.c']})
        self.assertEqual(modes, {'drivers/net/new.c': 0o600})
        out, _ = apply_text(RENAME_HUNKS, dict(self.STATE), {}, 't')
        self.assertEqual(out['drivers/net/sub/new.c'], b'int a;\nlong b;\nint c;\n')
        self.assertIsNone(out['drivers/net/old.c'])
        out, modes = apply_text(MODE, dict(self.STATE), {}, 't')
        self.assertEqual((out, modes), ({'scripts/run.sh': b'echo hi\n'},
                                        {'scripts/run.sh': 0o755}))
        out, modes = apply_text(MODE_AND_HUNK, dict(self.STATE), {}, 't')
        self.assertEqual((out, modes), ({'scripts/run.sh': b'echo hi\necho there\n'},
                                        {'scripts/run.sh': 0o755}))

    def test_rename_onto_an_existing_file_is_refused(self) -> None:
        state = dict(self.STATE, **{'drivers/net/new.c': b'theirs\n'})
        with self.assertRaisesRegex(HunkError, 'drivers/net/new.c: already exists'):
            apply_text(RENAME, state, {}, 't')


class PatchedTree(unittest.TestCase):
    """patched.patched_tree on a small tree: deletions, renames, modes; the base kept."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        src = root / 'linux' / 'src'
        for rel, data in (('Makefile', b'VERSION = 6\n'), (LOOPBACK, b'int lo;\n'),
                          ('drivers/net/old.c', b'int a;\nint b;\nint c;\n'),
                          ('scripts/run.sh', b'echo hi\n')):
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_bytes(data)
            os.chmod(src / rel, 0o644)
        self.base = Tree(src, KernelVersion(6, 12, 0), 'kdir')
        self.cache = root / 'cache'

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def load(self, text: str, name: str = 'x.patch') -> patch_input.PatchInfo:
        p = Path(self.tmp.name) / name
        p.write_text(text)
        return patch_input.load(p)

    def snapshot(self) -> dict[str, tuple[bytes, int, int]]:
        out = {}
        for dirpath, _, names in os.walk(self.base.path):
            for n in names:
                p = Path(dirpath) / n
                st = p.stat()
                out[str(p.relative_to(self.base.path))] = (p.read_bytes(), st.st_mode,
                                                           st.st_ino)
        return out

    def test_delete(self) -> None:
        for text in (DELETE, PLAIN_DELETE):
            with self.subTest(text=text[:20]):
                before = self.snapshot()
                p = self.load(text, f'd{len(text)}.patch')
                self.assertEqual(p.files, ('drivers/net/old.c',))
                tree, _ = patched_tree(self.base, p, self.cache)
                self.assertFalse((tree.path / 'drivers/net/old.c').exists())
                self.assertTrue((tree.path / LOOPBACK).exists())
                self.assertEqual(self.snapshot(), before)

    def test_rename_without_and_with_hunks(self) -> None:
        before = self.snapshot()
        tree, _ = patched_tree(self.base, self.load(RENAME, 'r.patch'), self.cache)
        self.assertFalse((tree.path / 'drivers/net/old.c').exists())
        self.assertEqual((tree.path / 'drivers/net/new.c').read_bytes(),
                         b'int a;\nint b;\nint c;\n')
        tree, _ = patched_tree(self.base, self.load(RENAME_HUNKS, 'rh.patch'), self.cache)
        self.assertFalse((tree.path / 'drivers/net/old.c').exists())
        self.assertEqual((tree.path / 'drivers/net/sub/new.c').read_bytes(),
                         b'int a;\nlong b;\nint c;\n')
        self.assertEqual(self.snapshot(), before)

    def test_mode_change_reaches_the_copy_not_the_base(self) -> None:
        for text in (MODE, MODE_AND_HUNK):
            with self.subTest(text=text[-20:]):
                before = self.snapshot()
                p = self.load(text, f'm{len(text)}.patch')
                tree, _ = patched_tree(self.base, p, self.cache)
                st = (tree.path / 'scripts/run.sh').stat()
                self.assertEqual(stat.S_IMODE(st.st_mode), 0o755)
                self.assertEqual(stat.S_IMODE((self.base.path / 'scripts/run.sh').stat()
                                              .st_mode), 0o644)
                self.assertEqual(self.snapshot(), before)

    def test_a_changed_file_keeps_its_mode(self) -> None:
        os.chmod(self.base.path / 'scripts/run.sh', 0o755)
        p = self.load('--- a/scripts/run.sh\n+++ b/scripts/run.sh\n@@ -1 +1 @@\n'
                      '-echo hi\n+echo ho\n')
        tree, _ = patched_tree(self.base, p, self.cache)
        self.assertEqual(stat.S_IMODE((tree.path / 'scripts/run.sh').stat().st_mode), 0o755)

    def test_deleted_or_renamed_file_must_be_in_the_base(self) -> None:
        for text, verb in ((DELETE, 'deletes'), (RENAME, 'renames'),
                           (RENAME_HUNKS, 'renames')):
            with self.subTest(verb=verb, text=text[:30]):
                p = self.load(text.replace('old.c', 'gone.c'), f'g{len(text)}.patch')
                with self.assertRaisesRegex(
                        ReviewError, f'PATCH=g{len(text)}.patch {verb} '
                        r'drivers/net/gone.c, which Linux 6.12.0 at .* does not have'):
                    patched_tree(self.base, p, self.cache)
        self.assertFalse((self.cache / 'review').exists())

    def test_rename_onto_a_file_of_the_base(self) -> None:
        p = self.load(RENAME.replace('new.c', 'loopback.c'))
        with self.assertRaisesRegex(ReviewError, 'renames drivers/net/old.c to '
                                    f'{LOOPBACK}, which Linux 6.12.0 at .* already has'):
            patched_tree(self.base, p, self.cache)

    def test_mbox_rename_then_change(self) -> None:
        second = ('From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n'
                  'Subject: [PATCH 2/2] change it\n\n---\n'
                  'diff --git a/drivers/net/new.c b/drivers/net/new.c\n'
                  '--- a/drivers/net/new.c\n+++ b/drivers/net/new.c\n@@ -1,3 +1,3 @@\n'
                  ' int a;\n int b;\n-int c;\n+int d;\n')
        first = ('From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n'
                 'Subject: [PATCH 1/2] rename it\n\n---\n' + RENAME)
        p = self.load(first + '\n' + second)
        self.assertEqual(p.mails, 2)
        tree, _ = patched_tree(self.base, p, self.cache)
        self.assertEqual((tree.path / 'drivers/net/new.c').read_bytes(),
                         b'int a;\nint b;\nint d;\n')
        self.assertFalse((tree.path / 'drivers/net/old.c').exists())


class NotAFile(unittest.TestCase):
    def test_directory_and_fifo_are_named(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            fifo = Path(d) / 'p.fifo'
            os.mkfifo(fifo)
            for path, what in ((Path(d), 'a directory'), (fifo, 'a FIFO')):
                with self.subTest(what=what):
                    with self.assertRaisesRegex(PatchError,
                                                f'^PATCH={path} is {what}; give a patch '
                                                'file$'):
                        patch_input.load(path)
                    # the command line: one line, exit 2, and no wait on the FIFO
                    r = subprocess.run(
                        [sys.executable, '-m', 'kloc', 'review', '--patch', str(path),
                         '--out', str(Path(d) / 'o')], capture_output=True, text=True,
                        env=dict(os.environ, PYTHONPATH=str(TOOLS)), timeout=60)
                    self.assertEqual(r.returncode, 2, r.stderr)
                    self.assertIn(f'PATCH={path} is {what}; give a patch file', r.stderr)
                    self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_unreadable(self) -> None:
        if os.geteuid() == 0:
            self.skipTest('root reads any file')
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / 'x.patch'
            p.write_text('--- a/x/y\n+++ b/x/y\n')
            os.chmod(p, 0)
            with self.assertRaisesRegex(PatchError, 'permission denied'):
                patch_input.load(p)


class Subjects(unittest.TestCase):
    def test_an_unknown_charset_is_not_a_traceback(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / 'x.patch'
            p.write_text('Subject: =?x-bogus?q?caf=E9?=\n\n--- a/x/y\n+++ b/x/y\n'
                         '@@ -1 +1 @@\n-a\n+b\n')
            self.assertEqual(patch_input.load(p).subject, 'caf\ufffd')


if __name__ == '__main__':
    unittest.main()
