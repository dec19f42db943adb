# SPDX-License-Identifier: GPL-2.0
"""make patches, then git am, for those who want the package in their own tree.

For each supported kernel (its cached Debian tree, read only): a git tree of the
files the series touches and the key files, `kloc patches --kdir` on it, then
`git am -s` of what it wrote. Every commit must apply, the tree must then hold
exactly what kloc's copy of the stock tree holds (the series applied), and kloc
must take the tree as carrying the series already: its copy writes nothing.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from kloc.series import changes, planning
from kloc.trees import kernels, sources

from .helpers import cli, debian_tree, pristine_tree
from .test_workcopy import git


class GitAm(unittest.TestCase):
    def test_make_patches_then_git_am_on_each_kernel(self) -> None:
        for k in kernels.names():
            with self.subTest(kernel=k):
                if not sources.tarball_path(k).exists():
                    self.skipTest(f'linux-source-{k} is not here (make tree KERNEL={k})')
                with tempfile.TemporaryDirectory(prefix='kloc-am-') as tmp:
                    self.check(k, Path(tmp))

    def check(self, kernel: str, tmp: Path) -> None:
        stock = debian_tree(kernel)
        root, version = pristine_tree(tmp / 'linux', kernel)
        git(root, 'init', '-q')
        git(root, 'add', '-A')
        who = ('-c', 'user.name=Dev', '-c', 'user.email=dev@example.org')
        git(root, *who, 'commit', '-q', '-m', 'base')
        env = {'KLOC_CACHE': str(tmp / 'cache')}
        r = cli('patches', '--kdir', str(root), '--out', str(tmp / 'out'), env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        mails = sorted(Path(p) for p in r.stdout.split())
        # it reads the tree: no copy of it is made
        self.assertFalse(os.path.lexists(tmp / 'cache' / 'kdir'))
        self.assertEqual(len(mails), len(changes.load_series()), r.stdout)
        am = subprocess.run(['git', '-C', str(root), *who, 'am', '-q', '-s',
                             *map(str, mails)], capture_output=True, text=True)
        self.assertEqual(am.returncode, 0, am.stderr + am.stdout)
        log = git(root, 'log', '--format=%s%n%b', f'-{len(mails)}')
        self.assertIn('Signed-off-by: Dev <dev@example.org>', log)
        # what git am made is what kloc's copy of the stock tree carries
        for rel in planning.series_files(version, changes.load_series()):
            mine = root / rel
            copy = stock.path / rel
            self.assertEqual(mine.read_bytes() if mine.is_file() else None,
                             copy.read_bytes() if copy.is_file() else None, rel)
        # and kloc takes the tree as it is: nothing to write in its copy
        r = cli('tree', '--kdir', str(root), env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('the series as before', r.stderr)
        self.assertEqual(git(root, '--no-optional-locks', 'status', '--porcelain'), '')
        self.assertFalse(os.path.lexists(root / '.kloc'))


if __name__ == '__main__':
    unittest.main()
