# SPDX-License-Identifier: GPL-2.0
"""The files kloc takes from Debian's qemu source (qemu/source.py, qemu/system.py).

Debian's patches reach the three files kloc keeps through file_diffs(): the
parts of a patch that change them, found by counting each hunk's lines, so
a removed line that starts with "-- " stays in its hunk. They are applied
with the real patch(1) to a real cache.c. The installed QEMU's header is
fetched into a fresh cache, as an ordinary user can: a private apt
configuration, Sources only, no deb-src entry in /etc/apt; a second call
reads nothing from the network.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from kloc.errors import KlocError
from kloc.paths import cache_dir
from kloc.qemu import source, system
from kloc.trees import archive

CACHE_C = 'contrib/plugins/cache.c'
# Two files in one git-style patch; the first hunk removes a line that starts
# with "-- " (so "--- " in the diff) and adds one that starts with "++ ".
TWO_FILES = '''From: someone
Subject: two files

diff --git a/contrib/plugins/cache.c b/contrib/plugins/cache.c
index 1111111..2222222 100644
--- a/contrib/plugins/cache.c
+++ b/contrib/plugins/cache.c
@@ -1,3 +1,3 @@
 one
--- two
+++ two
 three
diff --git a/hw/other.c b/hw/other.c
--- a/hw/other.c
+++ b/hw/other.c
@@ -1 +1 @@
-x
+y
\\ No newline at end of file
'''


def system_header_or_skip() -> Path:
    try:
        return system.header_dir(cache_dir())
    except (system.SystemQemuError, archive.ArchiveError) as e:
        raise unittest.SkipTest(f'no header of the installed QEMU: {e}') from None


class FileDiffsTest(unittest.TestCase):
    def test_only_the_wanted_file_is_kept(self) -> None:
        got = source.file_diffs(TWO_FILES, {CACHE_C})
        self.assertEqual(got.splitlines(), ['--- a/contrib/plugins/cache.c',
                                            '+++ b/contrib/plugins/cache.c',
                                            '@@ -1,3 +1,3 @@', ' one', '--- two',
                                            '+++ two', ' three'])

    def test_lines_like_file_headers_stay_in_their_hunk(self) -> None:
        """"--- two" is a removed line: no file "two" is seen, hw/other.c's part follows."""
        got = source.file_diffs(TWO_FILES, {'hw/other.c'})
        self.assertEqual(got.splitlines(), ['--- a/hw/other.c', '+++ b/hw/other.c', '@@ -1 +1 @@',
                                            '-x', '+y', '\\ No newline at end of file'])
        self.assertEqual(source.file_diffs(TWO_FILES, {'two'}), '')

    def test_a_patch_that_changes_none_of_them_gives_nothing(self) -> None:
        self.assertEqual(source.file_diffs(TWO_FILES, {'include/qemu/qemu-plugin.h'}), '')

    def test_a_bare_newline_is_empty_context(self) -> None:
        diff = '--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n--- a/g\n+++ b/g\n'
        self.assertEqual(source.file_diffs(diff, {'f'}).splitlines()[-1], '+c')


class ApplyTest(unittest.TestCase):
    """Debian's patch parts, applied with patch(1) to QEMU's own cache.c."""

    def setUp(self) -> None:
        header = system_header_or_skip()
        tmp = tempfile.TemporaryDirectory(prefix='kloc-qemu-source-')
        self.addCleanup(tmp.cleanup)
        self.top = Path(tmp.name) / 'qemu-7.2'
        (self.top / 'contrib' / 'plugins').mkdir(parents=True)
        self.orig = (header / source.CACHE_PLUGIN).read_text()
        (self.top / CACHE_C).write_text(self.orig)
        self.first = self.orig.splitlines()[0]

    def patch(self, old: str, new: str) -> str:
        return (f'--- a/{CACHE_C}\n+++ b/{CACHE_C}\n@@ -1 +1 @@\n-{old}\n+{new}\n'
                '--- a/hw/absent.c\n+++ b/hw/absent.c\n@@ -1 +1 @@\n-p\n+q\n')

    def test_the_part_for_the_file_is_applied_the_rest_left(self) -> None:
        source.apply_patches(self.top, [('01-x.patch', self.patch(self.first, '/* x */'))],
                             {CACHE_C})
        got = (self.top / CACHE_C).read_text()
        self.assertEqual(got, self.orig.replace(self.first, '/* x */', 1))
        self.assertFalse((self.top / 'hw').exists())

    def test_a_part_that_does_not_apply_is_refused_by_name(self) -> None:
        with self.assertRaisesRegex(source.QemuSourceError, r"Debian's 02-y\.patch does not "
                                    r'apply to qemu-7\.2'):
            source.apply_patches(self.top, [('02-y.patch', self.patch('no such', 'line'))],
                                 {CACHE_C})


class SeriesTest(unittest.TestCase):
    """debian/patches/series comes from a tarball kloc did not make: what it names is
    read only where it is a regular file in debian/patches."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix='kloc-series-')
        self.addCleanup(tmp.cleanup)
        self.tmp = Path(tmp.name)
        self.patches = self.tmp / 'debian' / 'patches'
        (self.patches / 'sub').mkdir(parents=True)
        (self.patches / 'sub' / 'b.patch').write_text('b\n')
        (self.patches / 'a.patch').write_text('a\n')
        (self.tmp / 'secret').write_text('not a patch\n')

    def series(self, *names: str) -> list[tuple[str, str]]:
        (self.patches / 'series').write_text(''.join(f'{n}\n' for n in names))
        return source.read_series(self.patches, 'qemu_1.debian.tar.xz')

    def test_the_named_patches_in_order(self) -> None:
        self.assertEqual(self.series('sub/b.patch -p1', '# a comment', 'a.patch'),
                         [('sub/b.patch', 'b\n'), ('a.patch', 'a\n')])

    def test_a_name_outside_the_folder_is_refused(self) -> None:
        (self.patches / 'link').symlink_to(self.tmp)
        (self.patches / 'c.patch').symlink_to(self.tmp / 'secret')
        for name in (str(self.tmp / 'secret'), '../../secret', 'link/secret', 'c.patch',
                     'absent.patch'):
            with self.subTest(name=name):
                with self.assertRaisesRegex(source.QemuSourceError,
                                            rf'^qemu_1\.debian\.tar\.xz: debian/patches/series '
                                            rf'names {re.escape(name)}, which is no regular'):
                    self.series('a.patch', name)

    def test_a_linked_series_is_refused(self) -> None:
        (self.patches / 'series').symlink_to(self.tmp / 'secret')
        with self.assertRaisesRegex(source.QemuSourceError, 'symbolic link'):
            source.read_series(self.patches, 'qemu_1.debian.tar.xz')


class SystemHeaderTest(unittest.TestCase):
    def test_a_fresh_cache_gets_the_installed_versions_files(self) -> None:
        """As any user, with no deb-src entry: the suites' Sources only."""
        system_header_or_skip()         # the network and the mirror answer
        version = system.installed_version()
        tmp = tempfile.TemporaryDirectory(prefix='kloc-qemu-src-')
        self.addCleanup(tmp.cleanup)
        cache = Path(tmp.name) / 'kloc'
        d = system.header_dir(cache)
        self.assertEqual(d, cache / 'qemu-src' / version.replace(':', '_'))
        self.assertEqual((d / source.DONE).read_text(), version + '\n')
        self.assertIn('#define QEMU_PLUGIN_VERSION ',
                      (d / source.HEADER).read_text())
        self.assertIn('qemu_plugin_install', (d / source.CACHE_PLUGIN).read_text())
        lists = list((cache / 'apt').glob('*/sources.list'))
        self.assertTrue(lists)
        for f in lists:
            for line in f.read_text().splitlines():
                self.assertTrue(line.startswith('deb-src '), (f, line))
        # what the real cache holds is the same bytes
        real = system_header_or_skip()
        for name in source.FROM_SOURCE.values():
            self.assertEqual((d / name).read_bytes(), (real / name).read_bytes(), name)

    def test_a_second_call_reads_no_network(self) -> None:
        d = system_header_or_skip()
        with mock.patch.dict(os.environ, {'KLOC_DEBIAN_MIRROR': 'http://127.0.0.1:9/debian'}), \
                mock.patch.object(archive, 'update', side_effect=AssertionError('fetched')):
            self.assertEqual(system.header_dir(cache_dir()), d)

    def test_a_folder_missing_a_file_is_fetched_again(self) -> None:
        real = system_header_or_skip()
        tmp = tempfile.TemporaryDirectory(prefix='kloc-qemu-src-')
        self.addCleanup(tmp.cleanup)
        cache = Path(tmp.name) / 'kloc'
        d = cache / 'qemu-src' / real.name
        d.mkdir(parents=True)
        os.chmod(cache, 0o700)
        for name in (source.HEADER, source.DONE):       # an older kloc's: no cache.c
            shutil.copyfile(real / name, d / name)
        self.assertEqual(system.header_dir(cache), d)
        self.assertEqual((d / source.CACHE_PLUGIN).read_bytes(),
                         (real / source.CACHE_PLUGIN).read_bytes())

    def test_an_unknown_release_is_refused_saying_why(self) -> None:
        with mock.patch.object(system, 'OS_RELEASE', Path('/nonexistent/os-release')):
            with self.assertRaisesRegex(KlocError, r'/nonexistent/os-release: .*release is '
                                        'not known'):
                system.suites()


if __name__ == '__main__':
    unittest.main()
