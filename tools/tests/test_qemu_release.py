# SPDX-License-Identifier: GPL-2.0
"""QEMU 10.0 from bookworm-backports: fetched into the cache, trusted only as the
user's, first on PATH for the commands that start QEMU, and the one they run.

The fetch is real (make deps made it; a fresh cache here fetches it once);
the trust cases plant what another user could, in a copy of the cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from kloc import paths
from kloc.paths import cache_dir
from kloc.qemu import release, source


def real_release() -> release.Release:
    """The release make deps fetched (fetched now if this cache has none)."""
    if os.environ.get(release.OFF) == '1':
        raise unittest.SkipTest(f'{release.OFF}=1: the system\'s QEMU is asked for')
    return release.fetch(cache_dir())


class SeriesTest(unittest.TestCase):
    def test_debian_versions(self) -> None:
        self.assertEqual(release.upstream_series('1:10.0.2+ds-2+deb13u1~bpo12+1'), (10, 0))
        self.assertEqual(release.upstream_series('1:7.2+dfsg-7+deb12u18'), (7, 2))
        self.assertEqual(release.upstream_series('10.1.0+ds-1'), (10, 1))
        self.assertEqual(release.upstream_series('garbage'), (0, 0))


class RealReleaseTest(unittest.TestCase):
    def test_each_binary_is_10_0_with_its_own_data_first(self) -> None:
        r = real_release()
        self.assertEqual(r.series, release.SERIES)
        for b in release.BINARIES:
            out = subprocess.run([str(r.bin_dir / b), '--version'], capture_output=True,
                                 text=True, check=True).stdout
            self.assertIn('version 10.0.', out)
            dirs = subprocess.run([str(r.bin_dir / b), '-L', 'help'], capture_output=True,
                                  text=True, check=True).stdout.split()
            self.assertEqual(dirs[0], str(r.root / 'usr' / 'share' / 'qemu'))

    def test_the_header_is_this_versions_api_4_or_later(self) -> None:
        r = real_release()
        text = (r.header_dir / source.HEADER).read_text()
        line = next(x for x in text.splitlines() if x.startswith('#define QEMU_PLUGIN_VERSION '))
        self.assertGreaterEqual(int(line.split()[2]), 4)
        self.assertIn('qemu_plugin_register_vcpu_insn_exec_inline_per_vcpu', text)

    def test_a_command_that_starts_qemu_finds_10_0_first(self) -> None:
        r = real_release()
        env = dict(os.environ)
        env.pop(release.OFF, None)
        tools = Path(__file__).resolve().parents[1]
        # A QEMU-starting command's PATH, as its children see it (kloc qemu: the same use()).
        code = ('import os, shutil; from kloc.qemu import release; from kloc.paths import '
                'cache_dir; release.use(cache_dir()); print(shutil.which("qemu-system-aarch64"))')
        out = subprocess.run(['/usr/bin/python3', '-c', code], cwd=tools, env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
        self.assertEqual(out, str(r.bin_dir / 'qemu-system-aarch64'))
        env[release.OFF] = '1'
        ran = subprocess.run(['/usr/bin/python3', '-c', code], cwd=tools, env=env,
                             capture_output=True, text=True, check=True)
        self.assertNotIn(str(r.root), ran.stdout.strip())
        self.assertIn(f"{release.OFF}=1: running on the system's QEMU", ran.stderr)
        # Issue 48, item 9: make deps asks for the system's header under OFF=1 before
        # every target; a command that runs no QEMU does not say which QEMU runs.
        quiet = code.replace('release.use(cache_dir())', 'release.use(cache_dir(), runs=False)')
        ran = subprocess.run(['/usr/bin/python3', '-c', quiet], cwd=tools, env=env,
                             capture_output=True, text=True, check=True)
        self.assertNotIn('running on the system', ran.stderr)

    def test_results_name_the_qemu_that_ran(self) -> None:
        """Issue 37: compare.json and review.json record the QEMU PATH found, by path and
        version, not the bare name their command line shows."""
        from kloc.bench import interleave
        from kloc.qemu import topology
        r = real_release()
        with release.using(cache_dir()):
            used = interleave.qemu_used(topology.get('x86_64_2n'))
        self.assertEqual(used['binary'], str(r.bin_dir / 'qemu-system-x86_64'))
        self.assertIn('version 10.0.', used['version'])


class TrustTest(unittest.TestCase):
    """A release folder another user could have written is refused, not run as root."""

    def setUp(self) -> None:
        self.real = real_release()
        self.tmp = Path(tempfile.mkdtemp(prefix='kloc-qemu-trust-'))
        os.chmod(self.tmp, 0o700)
        self.cache = self.tmp / 'cache'
        shutil.copytree(self.real.root, self.cache / 'qemu' / self.real.root.name,
                        symlinks=True)
        os.chmod(self.cache, 0o700)
        self.addCleanup(shutil.rmtree, self.tmp)
        env = mock.patch.dict(os.environ, {'KLOC_CACHE': str(self.cache)})
        env.start()
        self.addCleanup(env.stop)

    def test_a_copy_of_ones_own_is_used(self) -> None:
        got = release.cached(self.cache)
        assert got is not None
        self.assertEqual(got.root, self.cache / 'qemu' / self.real.root.name)

    def test_a_folder_others_can_write_is_refused(self) -> None:
        os.chmod(self.cache / 'qemu' / self.real.root.name, 0o777)
        with self.assertRaisesRegex(paths.CacheTrustError, 'writable by'):
            release.cached(self.cache)

    def test_a_symlinked_release_is_not_taken(self) -> None:
        d = self.cache / 'qemu' / self.real.root.name
        d.rename(self.tmp / 'elsewhere')
        d.symlink_to(self.tmp / 'elsewhere')
        self.assertIsNone(release.cached(self.cache))

    def test_an_incomplete_fetch_is_not_taken(self) -> None:
        (self.cache / 'qemu' / self.real.root.name / release.DONE).unlink()
        self.assertIsNone(release.cached(self.cache))

    def test_a_folder_that_names_another_version_is_not_taken(self) -> None:
        d = self.cache / 'qemu' / self.real.root.name
        (d / release.DONE).write_text('1:7.2+dfsg-7+deb12u18\n')
        self.assertIsNone(release.cached(self.cache))


if __name__ == '__main__':
    unittest.main()
