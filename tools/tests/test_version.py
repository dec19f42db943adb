# SPDX-License-Identifier: GPL-2.0
from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

from kloc.version import KernelVersion, VersionError, tree_version, version_from_makefile_text


class VersionTest(unittest.TestCase):
    def test_parse_and_order(self) -> None:
        self.assertEqual(KernelVersion.parse('6.12'), KernelVersion(6, 12, 0))
        self.assertEqual(str(KernelVersion.parse('6.1.120')), '6.1.120')
        self.assertLess(KernelVersion.parse('6.1.999'), KernelVersion.parse('6.12'))
        self.assertEqual(KernelVersion.parse('6.12.3').series, '6.12')

    def test_bad_text(self) -> None:
        for bad in ('', '6', 'v6.12', '6.12-rc1', 'six'):
            with self.assertRaises(VersionError):
                KernelVersion.parse(bad)

    def test_makefile(self) -> None:
        text = '# SPDX\nVERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 57\nEXTRAVERSION =\n'
        self.assertEqual(version_from_makefile_text(text), KernelVersion(6, 12, 57))
        with self.assertRaisesRegex(VersionError, 'no VERSION/PATCHLEVEL'):
            version_from_makefile_text('all:\n\ttrue\n')

    def test_not_a_tree(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(VersionError, 'is not a kernel tree'):
                tree_version(Path(d))
