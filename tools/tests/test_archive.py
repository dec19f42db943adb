# SPDX-License-Identifier: GPL-2.0
"""Mainline sources from Debian's sid and experimental, fetched without changing the system.

Real: the archive's lists and the linux-source-7.2 package are downloaded
(once: the unpacked package stays in the cache). The system's apt sources,
its dpkg status and its installed packages must be the same afterwards.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import tarfile
import tempfile
import threading
import unittest
from pathlib import Path
from unittest import mock

from kloc.paths import cache_dir
from kloc.trees import archive


def system_apt_state() -> dict[str, str]:
    """What apt and dpkg on this machine are: sources, pins, status, by content."""
    out = {}
    for root in (Path('/etc/apt'), Path('/var/lib/dpkg/status')):
        paths = [root] if root.is_file() else sorted(p for p in root.rglob('*') if p.is_file())
        for p in paths:
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def installed(package: str) -> bool:
    r = subprocess.run(['dpkg-query', '-W', '-f', '${Status}', package], capture_output=True,
                       text=True)
    return 'ok installed' in r.stdout


class ArchiveTest(unittest.TestCase):
    def test_mainline_source_without_changing_the_system(self) -> None:
        before = system_apt_state()
        tarball = archive.fetch_source(cache_dir(), '7.2', 'sid')
        self.assertEqual(tarball.name, 'linux-source-7.2.tar.xz')
        self.assertTrue(tarball.is_relative_to(cache_dir() / 'debian'), tarball)
        with tarfile.open(tarball, 'r|xz') as tar:
            first = next(iter(tar))
        self.assertTrue(first.name.startswith('linux-source-7.2'), first.name)
        self.assertFalse(installed('linux-source-7.2'))
        self.assertEqual(system_apt_state(), before)

    def test_newest_seven(self) -> None:
        series, suite = archive.newest(cache_dir(), 7)
        self.assertIn(suite, archive.SUITES)
        self.assertGreaterEqual(tuple(int(x) for x in series.split('.')), (7, 2))

    def test_concurrent_commands_share_the_private_apt(self) -> None:
        # Two kloc commands at once (two make targets, or the tool tests'
        # workers) each run apt-get on the suite's private lists; apt's own
        # lock on them must not fail the second.
        errors: list[BaseException] = []

        def look() -> None:
            try:
                archive.newest(cache_dir(), 7)
            except BaseException as e:      # reported below
                errors.append(e)
        threads = [threading.Thread(target=look) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_no_such_series_names_those_there(self) -> None:
        with self.assertRaises(archive.ArchiveError) as e:
            archive.fetch_source(cache_dir(), '7.99', 'sid')
        self.assertIn('offers no linux-source-7.99', str(e.exception))
        self.assertRegex(str(e.exception), r'7\.\d+\.0')

    def test_unreachable_mirror(self) -> None:
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = s.getsockname()[1]
        mirror = {'KLOC_DEBIAN_MIRROR': f'http://127.0.0.1:{port}/debian'}
        with tempfile.TemporaryDirectory() as d, mock.patch.dict(os.environ, mirror), \
                self.assertRaises(archive.ArchiveError) as e:
            archive.fetch_source(Path(d), '7.2', 'sid')
        self.assertIn('KLOC_DEBIAN_MIRROR', str(e.exception))
