# SPDX-License-Identifier: GPL-2.0
"""The cache is trusted only when it is the invoking user's alone.

kloc runs as root, and what is in $KLOC_CACHE ends up run as root: kernel
trees extracted from tarballs, ccache's configuration, qemu-plugin.h.
So a cache (or a folder of it that kloc uses) that someone else owns or
can write is refused, a symlink where kloc expects a folder or its lock
file is refused, tar and dpkg-deb keep no owners and no setuid bits, and
ccache reads a configuration kloc wrote, never one in the cache's ccache/.
Each case plants what another user could, in a temporary cache.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from kloc import filelock, paths
from kloc.errors import KlocError
from kloc.kunitpy import runner
from kloc.qemu import system
from kloc.series import changes, planning
from kloc.trees import archive, sources
from kloc.version import KernelVersion

from .helpers import debian_tree, root_only

TOOLS = Path(__file__).resolve().parents[1]
KEY = ('Kconfig', 'tools/testing/kunit/kunit.py', 'scripts/checkpatch.pl',
       'drivers/irqchip/irq-gic-v3-its.c')


def nobody() -> int:
    try:
        return pwd.getpwnam('nobody').pw_uid
    except KeyError:
        return 65534


def linux_tarball(dest: Path, series: str) -> Path:
    """A small linux-source-<series>.tar.xz whose scripts/helper is setuid and owned by
    nobody, in a folder anyone may write (as a planted tarball would have them)."""
    with tempfile.TemporaryDirectory(prefix='kloc-trust-src-') as tmp:
        top = Path(tmp) / f'linux-source-{series}'
        major, minor = series.split('.')
        for rel in KEY:
            (top / rel).parent.mkdir(parents=True, exist_ok=True)
            (top / rel).write_text('')
        # the files the series changes, as the real tree has them: kloc applies it
        stock = debian_tree(series).source
        assert stock is not None
        for rel in planning.series_files(KernelVersion.parse(series), changes.load_series()):
            if (stock / rel).is_file():
                (top / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(stock / rel, top / rel)
        (top / 'Makefile').write_text(f'VERSION = {major}\nPATCHLEVEL = {minor}\n'
                                      'SUBLEVEL = 0\nEXTRAVERSION =\n')
        helper = top / 'scripts' / 'helper'
        helper.write_text('#!/bin/sh\nid\n')
        os.chown(helper, nobody(), nobody())
        os.chmod(helper, 0o6755)
        (top / 'shared').mkdir()
        os.chmod(top / 'shared', 0o2777)
        dest.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(['tar', '-cJf', str(dest), '-C', tmp, top.name], check=True,
                       env=dict(os.environ, XZ_OPT='-0'))
    return dest


def kloc(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, '-m', 'kloc', *args], cwd=TOOLS,
                          env=dict(os.environ, PYTHONPATH=str(TOOLS), **env),
                          capture_output=True, text=True, timeout=300)


@root_only('plants files of other users')
class Base(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix='kloc-trust-')
        self.addCleanup(tmp.cleanup)
        self.tmp = Path(tmp.name)
        self.cache = self.tmp / 'kloc'
        self.src = self.tmp / 'usr-src'
        linux_tarball(self.src / 'linux-source-6.12.tar.xz', '6.12')

    def env(self, cache: Path | None = None) -> dict[str, str]:
        return {'KLOC_CACHE': str(cache or self.cache),
                'KLOC_LINUX_SOURCE_DIR': str(self.src)}

    def assert_refused(self, r: subprocess.CompletedProcess[str], path: Path,
                       command: str = 'tree') -> None:
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertNotIn('Traceback', r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith(f'kloc {command}: error: '), lines[0])
        self.assertIn(str(path), lines[0])

    def assert_no_setid(self, root: Path) -> None:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                st = os.lstat(os.path.join(dirpath, name))
                self.assertEqual(st.st_mode & 0o6000, 0, os.path.join(dirpath, name))
                self.assertEqual(st.st_uid, os.geteuid(), os.path.join(dirpath, name))


class CacheOwnershipTest(Base):
    def test_a_cache_others_can_write_is_refused(self) -> None:
        self.cache.mkdir()
        os.chmod(self.cache, 0o757)
        r = kloc('tree', '--kernel', '6.12', env=self.env())
        self.assert_refused(r, self.cache)
        self.assertIn('chmod', r.stderr)
        self.assertIn('KLOC_CACHE', r.stderr)
        self.assertFalse((self.cache / 'trees').exists())

    def test_a_cache_of_another_user_is_refused(self) -> None:
        self.cache.mkdir()
        os.chown(self.cache, nobody(), nobody())
        r = kloc('tree', '--kernel', '6.12', env=self.env())
        self.assert_refused(r, self.cache)
        self.assertIn('chown', r.stderr)
        self.assertFalse((self.cache / 'trees').exists())

    def test_a_folder_of_another_user_in_the_cache_is_refused(self) -> None:
        folder = self.cache / 'trees' / 'linux-6.12'
        folder.mkdir(parents=True)
        os.chown(folder, nobody(), nobody())
        r = kloc('tree', '--kernel', '6.12', env=self.env())
        self.assert_refused(r, folder)
        self.assertFalse((folder / 'src').exists())

    def test_a_symlink_where_a_folder_should_be_is_refused(self) -> None:
        elsewhere = self.tmp / 'elsewhere'
        elsewhere.mkdir()
        self.cache.mkdir()
        (self.cache / 'trees').symlink_to(elsewhere)
        r = kloc('tree', '--kernel', '6.12', env=self.env())
        self.assert_refused(r, self.cache / 'trees')
        self.assertEqual(list(elsewhere.iterdir()), [])

    def test_a_cache_in_a_folder_anyone_can_write_is_refused(self) -> None:
        shared = self.tmp / 'shared'
        shared.mkdir()
        os.chmod(shared, 0o777)         # no sticky bit: anyone can rename the cache away
        r = kloc('tree', '--kernel', '6.12', env=self.env(shared / 'kloc'))
        self.assert_refused(r, shared)

    def test_a_cache_in_a_sticky_folder_is_used(self) -> None:
        sticky = self.tmp / 'sticky'
        sticky.mkdir()
        os.chmod(sticky, 0o1777)        # like /tmp
        r = kloc('tree', '--kernel', '6.12', env=self.env(sticky / 'kloc'))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_missing_cache_is_made_for_its_owner_alone(self) -> None:
        cache = self.tmp / 'a' / 'b' / 'kloc'
        r = kloc('tree', '--kernel', '6.12', env=self.env(cache))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(stat.S_IMODE(cache.stat().st_mode), 0o700)
        self.assertEqual(Path(r.stdout.strip()), cache / 'trees' / 'linux-6.12' / 'src')

    def test_a_cache_removed_after_its_check_is_made_again(self) -> None:
        # checked once per process, but a folder removed since (a test's cleanup, rm -rf
        # by hand) is made again, not taken for there
        trees = paths.cache_subdir(self.cache, 'trees')
        shutil.rmtree(self.cache)
        self.assertEqual(paths.cache_subdir(self.cache, 'trees'), trees)
        self.assertTrue(trees.is_dir())
        self.assertEqual(stat.S_IMODE(self.cache.stat().st_mode), 0o700)

    def test_cache_dir_refuses_a_cache_others_can_write(self) -> None:
        self.cache.mkdir()
        os.chmod(self.cache, 0o777)
        with mock.patch.dict(os.environ, {'KLOC_CACHE': str(self.cache)}):
            with self.assertRaises(KlocError) as e:
                paths.cache_dir()
        self.assertIn(str(self.cache), str(e.exception))
        self.assertNotIn('\n', str(e.exception))


class ExtractionTest(Base):
    def test_a_tarball_keeps_no_owner_and_no_setuid_bit(self) -> None:
        self.cache.mkdir()
        with mock.patch.dict(os.environ, self.env()):
            tree = sources.debian_tree('6.12', self.cache)
        assert tree.source is not None      # the extraction; the copy has links to it
        helper = tree.source / 'scripts' / 'helper'
        self.assertTrue(helper.is_file())
        self.assert_no_setid(tree.source)
        self.assert_no_setid(tree.path)
        self.assertEqual(stat.S_IMODE((tree.source / 'shared').stat().st_mode) & 0o022, 0)

    def test_a_mainline_tarball_in_the_cache_keeps_no_setuid_bit(self) -> None:
        # the finding: kloc tree --kernel 7.2 on a tarball planted under debian/
        linux_tarball(self.cache / 'debian' / 'linux-source-7.2_7.2.1-1' / 'usr' / 'src' /
                      'linux-source-7.2.tar.xz', '7.2')
        r = kloc('tree', '--kernel', '7.2', env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_no_setid(Path(r.stdout.strip()))

    def test_a_deb_keeps_no_owner_and_no_setuid_bit(self) -> None:
        pkg = self.tmp / 'pkg'
        (pkg / 'DEBIAN').mkdir(parents=True)
        (pkg / 'DEBIAN' / 'control').write_text(
            'Package: linux-source-9.9\nVersion: 9.9.1-1\nArchitecture: all\n'
            'Maintainer: kloc <kloc@example.org>\nDescription: test\n')
        linux_tarball(pkg / 'usr' / 'src' / 'linux-source-9.9.tar.xz', '9.9')
        helper = pkg / 'usr' / 'bin' / 'helper'
        helper.parent.mkdir(parents=True)
        helper.write_text('#!/bin/sh\n')
        os.chown(helper, nobody(), nobody())
        os.chmod(helper, 0o4755)
        deb = self.tmp / 'linux-source-9.9_9.9.1-1_all.deb'
        subprocess.run(['dpkg-deb', '-Zgzip', '-b', str(pkg), str(deb)], check=True,
                       capture_output=True)

        def download(a: archive.Archive, *args: str, cwd: Path | None = None,
                     keep_stderr: bool = False) -> str:
            assert cwd is not None and args[0] == 'download'
            shutil.copy(deb, cwd)
            return ''
        self.cache.mkdir()
        with mock.patch.object(archive, 'update'), \
                mock.patch.object(archive, 'candidate', return_value='9.9.1-1'), \
                mock.patch.object(archive, '_apt', download):
            tarball = archive.fetch_source(self.cache, '9.9', 'sid')
        self.assertTrue(tarball.is_file())
        self.assert_no_setid(tarball.parents[2])


class LockTest(Base):
    def test_a_symlinked_lock_is_refused_and_its_target_kept(self) -> None:
        victim = self.tmp / 'victim'
        victim.write_text('precious\n')
        lock = self.cache / 'trees' / 'linux-6.12' / '.lock'
        lock.parent.mkdir(parents=True)
        lock.symlink_to(victim)
        r = kloc('tree', '--kernel', '6.12', env=self.env())
        self.assert_refused(r, lock)
        self.assertEqual(victim.read_text(), 'precious\n')

    def test_filelock_refuses_a_symlink(self) -> None:
        victim = self.tmp / 'victim'
        victim.write_text('precious\n')
        lock = self.tmp / 'locks' / '.lock'
        lock.parent.mkdir()
        lock.symlink_to(victim)
        with self.assertRaises(KlocError) as e:
            with filelock.exclusive(lock):
                pass
        self.assertIn(str(lock), str(e.exception))
        self.assertEqual(victim.read_text(), 'precious\n')

    def test_filelock_refuses_what_is_not_a_file(self) -> None:
        # a FIFO would block open(path, 'w') forever: in a child, with a timeout
        for kind in ('fifo', 'dir'):
            lock = self.tmp / kind / '.lock'
            lock.parent.mkdir()
            if kind == 'fifo':
                os.mkfifo(lock)
            else:
                lock.mkdir()
            code = ('import sys; from kloc import filelock; from kloc.errors import KlocError\n'
                    'try:\n'
                    f'    with filelock.exclusive(__import__("pathlib").Path({str(lock)!r})):\n'
                    '        pass\n'
                    'except KlocError as e:\n'
                    '    print(e); sys.exit(3)\n')
            try:
                r = subprocess.run([sys.executable, '-c', code], cwd=TOOLS, capture_output=True,
                                   text=True, timeout=20,
                                   env=dict(os.environ, PYTHONPATH=str(TOOLS)))
            except subprocess.TimeoutExpired:
                self.fail(f'filelock.exclusive blocked on a {kind}')
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn(str(lock), r.stdout)

    def test_a_new_lock_is_a_private_file(self) -> None:
        lock = self.tmp / 'locks' / '.lock'
        with filelock.exclusive(lock):
            pass
        st = lock.lstat()
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)


def have_ccache() -> bool:
    return bool(shutil.which('ccache') and shutil.which('gcc'))


class CcacheTest(Base):
    def build_env(self, **extra: str) -> dict[str, str]:
        with mock.patch.dict(os.environ, extra):
            return runner.build_env(self.cache)

    @unittest.skipUnless(have_ccache(), 'ccache or gcc is not installed')
    def test_a_planted_ccache_conf_is_never_read(self) -> None:
        marker = self.tmp / 'ran'
        evil = self.tmp / 'evil'
        evil.write_text(f'#!/bin/sh\ntouch {marker}\nexec "$@"\n')
        evil.chmod(0o755)
        (self.cache / 'ccache').mkdir(parents=True)
        (self.cache / 'ccache' / 'ccache.conf').write_text(
            f'prefix_command = {evil}\nprefix_command_cpp = {evil}\n')
        env = self.build_env()
        (self.tmp / 't.c').write_text('int kloc_trust(void) { return 42; }\n')
        r = subprocess.run(['ccache', 'gcc', '-c', 't.c', '-o', 't.o'], cwd=self.tmp, env=env,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue((self.tmp / 't.o').is_file())
        self.assertFalse(marker.exists(), 'ccache ran the prefix_command of a planted '
                         'ccache.conf')
        config = Path(env['CCACHE_CONFIGPATH'])
        self.assertFalse(config.is_relative_to(Path(env['CCACHE_DIR'])))
        self.assertTrue(stat.S_ISREG(config.lstat().st_mode))
        self.assertEqual(config.lstat().st_uid, os.geteuid())

    def test_kloc_sets_the_ccache_variables_itself(self) -> None:
        env = self.build_env(CCACHE_DIR=str(self.tmp / 'other'),
                             CCACHE_CONFIGPATH=str(self.tmp / 'other.conf'),
                             CCACHE_BASEDIR='/')
        self.assertEqual(env['CCACHE_DIR'], str(self.cache / 'ccache'))
        self.assertEqual(Path(env['CCACHE_CONFIGPATH']).parent, self.cache)
        self.assertEqual(env['CCACHE_BASEDIR'], str(self.cache))
        self.assertIn('CCACHE_MAXSIZE', env)

    def test_a_symlink_at_the_config_is_replaced_not_followed(self) -> None:
        victim = self.tmp / 'victim'
        victim.write_text('precious\n')
        self.cache.mkdir()
        (self.cache / 'ccache.kloc.conf').symlink_to(victim)
        env = self.build_env()
        self.assertEqual(victim.read_text(), 'precious\n')
        config = Path(env['CCACHE_CONFIGPATH'])
        self.assertTrue(stat.S_ISREG(config.lstat().st_mode), config)

    def test_a_ccache_folder_of_another_user_is_refused(self) -> None:
        (self.cache / 'ccache').mkdir(parents=True)
        os.chown(self.cache / 'ccache', nobody(), nobody())
        with self.assertRaises(KlocError) as e:
            self.build_env()
        self.assertIn(str(self.cache / 'ccache'), str(e.exception))


def qemu_source_version() -> str:
    """The qemu source version of the installed qemu-system-* packages, or ''."""
    try:
        return system.installed_version()
    except KlocError:
        return ''


@unittest.skipUnless(shutil.which('dpkg-query') and qemu_source_version(),
                     'no qemu-system-* package is installed')
class CachePathTest(Base):
    """kloc cache-path, which the scripts ask for a folder of the cache and its files:
    the same checks as every command, and a refusal in one line naming the path."""

    def test_the_folder_is_made_for_the_user_alone(self) -> None:
        r = kloc('cache-path', 'qemu-src', '1_10.0', env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        made = self.cache / 'qemu-src' / '1_10.0'
        self.assertEqual(r.stdout, f'{made}\n')
        for d in (self.cache, made.parent, made):
            self.assertEqual(os.stat(d).st_mode & 0o777, 0o700, d)

    def test_a_file_of_another_user_is_refused(self) -> None:
        d = self.cache / 'qemu-src'
        d.mkdir(parents=True, mode=0o700)
        os.chmod(self.cache, 0o700)
        (d / 'cache.c').write_text('')
        os.chown(d / 'cache.c', nobody(), nobody())
        r = kloc('cache-path', 'qemu-src', '--file', 'cache.c', '--file', 'absent.h',
                 env=self.env())
        self.assert_refused(r, d / 'cache.c', 'cache-path')

    def test_a_symlinked_file_is_refused(self) -> None:
        d = self.cache / 'qemu-src'
        d.mkdir(parents=True, mode=0o700)
        os.chmod(self.cache, 0o700)
        (d / 'qemu-plugin.h').symlink_to(self.tmp / 'elsewhere.h')
        r = kloc('cache-path', 'qemu-src', '--file', 'qemu-plugin.h', env=self.env())
        self.assert_refused(r, d / 'qemu-plugin.h', 'cache-path')

    def test_names_that_are_paths_are_refused(self) -> None:
        for args in (('..',), ('qemu-src', '--file', '../x'), ('a/b',)):
            with self.subTest(args=args):
                r = kloc('cache-path', *args, env=self.env())
                self.assertNotEqual(r.returncode, 0, r.stdout)
                self.assertNotIn('Traceback', r.stderr)
                self.assertFalse((self.tmp / 'x').exists())


class QemuHeaderTest(Base):
    """kloc qemu-header (the plugin's Makefile asks it) on the system's QEMU: the folder
    qemu/system.py fetched is used only while it is the user's alone."""

    def setUp(self) -> None:
        super().setUp()
        version = qemu_source_version()
        self.dir = self.cache / 'qemu-src' / version.replace(':', '_')
        self.dir.mkdir(parents=True)
        (self.dir / 'qemu-plugin.h').write_text('#define QEMU_PLUGIN_VERSION 2\n')
        (self.dir / 'source-version').write_text(version + '\n')
        (self.dir / 'cache.c').write_text('')

    def get_header(self) -> subprocess.CompletedProcess[str]:
        # a mirror that answers nothing: a header that is refused must not be fetched
        # again behind the user's back (the cache is not theirs alone; so would be the
        # new one)
        return kloc('qemu-header', env=dict(self.env(), KLOC_SYSTEM_QEMU='1',
                                            KLOC_DEBIAN_MIRROR='http://127.0.0.1:9/debian'))

    def assert_refused_header(self, path: Path) -> None:
        r = self.get_header()
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertEqual(r.stdout, '')
        self.assertNotIn('Traceback', r.stderr)
        lines = [x for x in r.stderr.strip().splitlines() if not x.startswith('[kloc')]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith('kloc qemu-header: error: '), lines[0])
        self.assertIn(str(path), lines[0])

    def test_the_header_kloc_unpacked_is_used(self) -> None:
        r = self.get_header()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), str(self.dir))

    def test_a_header_folder_of_another_user_is_refused(self) -> None:
        os.chown(self.dir, nobody(), nobody())
        self.assert_refused_header(self.dir)

    def test_a_header_of_another_user_is_refused(self) -> None:
        os.chown(self.dir / 'qemu-plugin.h', nobody(), nobody())
        self.assert_refused_header(self.dir / 'qemu-plugin.h')

    def test_a_header_others_can_write_is_refused(self) -> None:
        os.chmod(self.dir / 'qemu-plugin.h', 0o666)
        self.assert_refused_header(self.dir / 'qemu-plugin.h')

    def test_a_symlinked_header_is_refused(self) -> None:
        elsewhere = self.tmp / 'qemu-plugin.h'
        (self.dir / 'qemu-plugin.h').rename(elsewhere)
        (self.dir / 'qemu-plugin.h').symlink_to(elsewhere)
        self.assert_refused_header(self.dir / 'qemu-plugin.h')

    def test_a_symlinked_header_folder_is_refused(self) -> None:
        elsewhere = self.tmp / 'elsewhere'
        self.dir.rename(elsewhere)
        self.dir.symlink_to(elsewhere)
        self.assert_refused_header(self.dir)

    def test_a_cache_others_can_write_is_refused(self) -> None:
        os.chmod(self.cache, 0o777)
        self.assert_refused_header(self.cache)


if __name__ == '__main__':
    unittest.main()
