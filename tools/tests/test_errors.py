# SPDX-License-Identifier: GPL-2.0
"""Every error a user can run into is one line naming the path and the fix, exit 2.

Each case runs the real command line on a real condition: a read-only
mount, a full tmpfs, a file where OUT should be, no permission (as the
user nobody), a damaged manifest, out-of-range options. None may print a
traceback. KLOC_ERROR_TABLE=FILE writes the table of cases, messages and
exit codes there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from dataclasses import dataclass
from pathlib import Path

from kloc.series import changes, install
from kloc.version import KernelVersion

from .test_install_safety import TOOLS, pristine_tree

SERIES = changes.load_series()


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    expect: str                     # in the message
    user: str = ''                  # run as this user (setpriv)
    env: tuple[tuple[str, str], ...] = ()


def _mount(*args: str) -> bool:
    return subprocess.run(['mount', *args], capture_output=True).returncode == 0


class ErrorMessageTest(unittest.TestCase):
    rows: list[tuple[str, str, int]] = []
    tmpdir: tempfile.TemporaryDirectory[str]
    tmp: Path
    mounts: list[Path]
    tree: Path
    version: KernelVersion

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmpdir = tempfile.TemporaryDirectory(prefix='kloc-errors-')
        cls.tmp = Path(cls.tmpdir.name)
        cls.mounts = []
        cls.tree, cls.version = pristine_tree(cls.tmp / 'linux')

    @classmethod
    def tearDownClass(cls) -> None:
        for m in reversed(cls.mounts):
            subprocess.run(['umount', '-l', str(m)], capture_output=True)
        cls.tmpdir.cleanup()
        table = os.environ.get('KLOC_ERROR_TABLE')
        if table:
            with open(table, 'w') as f:
                f.write('| case | message | exit |\n| --- | --- | --- |\n')
                for name, msg, rc in cls.rows:
                    f.write(f'| {name} | {msg} | {rc} |\n')

    def mounted(self, *args: str) -> Path:
        point = Path(tempfile.mkdtemp(dir=self.tmp))
        if not _mount(*args, str(point)):
            self.skipTest(f'cannot mount {" ".join(args)} here (not root?)')
        self.mounts.append(point)
        return point

    def run_case(self, c: Case) -> str:
        cmd = [sys.executable, '-m', 'kloc', *c.args]
        if c.user:
            if not shutil.which('setpriv'):
                self.skipTest('no setpriv')
            cmd = ['setpriv', '--reuid', c.user, '--regid', c.user, '--clear-groups',
                   '/usr/bin/python3', '-m', 'kloc', *c.args]
        env = dict(os.environ, PYTHONPATH=str(TOOLS), KLOC_CACHE=str(self.tmp / 'cache'),
                   PYTHONDONTWRITEBYTECODE='1', **dict(c.env))
        r = subprocess.run(cmd, cwd=TOOLS, env=env, capture_output=True, text=True)
        lines = [ln for ln in r.stderr.splitlines() if not ln.startswith('[kloc ')]
        self.rows.append((c.name, lines[-1] if lines else '', r.returncode))
        self.assertNotIn('Traceback', r.stderr, c.name)
        self.assertEqual(r.returncode, 2, f'{c.name}: {r.stderr}')
        self.assertEqual(len(lines), 1, f'{c.name}: not one line: {r.stderr}')
        self.assertIn(c.expect, lines[0], c.name)
        return lines[0]

    def test_read_only_tree(self) -> None:
        ro = self.mounted('--bind', '-o', 'ro', str(self.tree))
        if os.access(ro, os.W_OK) and not _mount('-o', 'remount,ro,bind', str(ro)):
            self.skipTest('cannot make a read-only bind mount')
        msg = self.run_case(Case('read-only KDIR (make install)', ('install', '--kdir', str(ro)),
                                 'read-only file system'))
        self.assertIn(str(ro), msg)

    def test_read_only_out(self) -> None:
        ro = self.mounted('-t', 'tmpfs', '-o', 'ro,size=64k', 'tmpfs')
        msg = self.run_case(Case('read-only OUT (make report)', ('report', '--out', str(ro)),
                                 'read-only file system'))
        self.assertIn(str(ro), msg)

    def test_out_is_a_file(self) -> None:
        f = self.tmp / 'out-file'
        f.write_text('not a directory\n')
        msg = self.run_case(Case('OUT is a file (make report)', ('report', '--out', str(f)),
                                 'is a file, where a directory is needed'))
        self.assertIn(str(f), msg)
        self.assertEqual(f.read_text(), 'not a directory\n')

    def test_disk_full(self) -> None:
        full = self.mounted('-t', 'tmpfs', '-o', 'size=64k', 'tmpfs')
        with open(full / 'filler', 'wb') as f:
            try:
                f.write(b'\0' * (1 << 20))
            except OSError:
                pass
        msg = self.run_case(Case('disk full (make patches)',
                                 ('patches', '--kdir', str(self.tree), '--out', str(full)),
                                 'disk full'))
        self.assertIn(str(full), msg)

    def test_permission_denied(self) -> None:
        locked = self.tmp / 'locked'
        locked.mkdir(mode=0o755)
        os.chmod(self.tmp, 0o755)
        msg = self.run_case(Case('no permission on OUT (make report, as nobody)',
                                 ('report', '--out', str(locked / 'out')), 'permission denied',
                                 user='65534'))
        self.assertIn(str(locked / 'out'), msg)

    def test_damaged_manifest(self) -> None:
        tree = self.tmp / 'damaged'
        shutil.copytree(self.tree, tree)
        install.install(tree, self.version, SERIES)
        (tree / install.STATE_DIR / install.MANIFEST).write_text('[]')
        for cmd in ('install', 'uninstall'):
            msg = self.run_case(Case(f'manifest is [] (make {cmd})', (cmd, '--kdir', str(tree)),
                                     'FORCE=1'))
            self.assertIn(str(tree / install.STATE_DIR / install.MANIFEST), msg)

    def test_not_a_kernel_tree(self) -> None:
        self.run_case(Case('KDIR is not a kernel tree', ('install', '--kdir', str(self.tmp)),
                           'set KDIR to the top of a kernel source tree'))

    def test_out_of_range_options_are_refused_before_anything(self) -> None:
        out = self.tmp / 'options-out'
        for name, args, expect in (
                ('SECONDS=0 (make review)', ('review', '--aa', '--seconds', '0'), 'SECONDS=0'),
                ('SECONDS=-1 (make compare)', ('compare', '--seconds', '-1'), 'SECONDS=-1'),
                ('SECONDS=abc (make guest)', ('guest', '--seconds', 'abc'),
                 'SECONDS=abc is not a number'),
                ('RUNS=0 (make review)', ('review', '--aa', '--runs', '0'), 'RUNS=0'),
                ('TIMEOUT=0 (make kunit)', ('kunit', '--timeout', '0'), 'TIMEOUT=0'),
                ('JOBS=0 (make mutants)', ('mutants', '--jobs', '0'), 'JOBS=0'),
                ('ALPHA=2 (make compare)', ('compare', '--alpha', '2'), 'ALPHA=2'),
                ('SECONDS=nan (make compare)', ('compare', '--seconds', 'nan'), 'SECONDS=nan'),
                ('RUNS=4 (make review): never significant',
                 ('review', '--aa', '--runs', '4'), 'RUNS=4 can never give a significant'),
                ('MDE=0 (make compare)', ('compare', '--mde', '0'), 'MDE=0')):
            with self.subTest(name=name):
                self.run_case(Case(name, args + ('--out', str(out)), expect))
                self.assertFalse(out.exists(), f'{name}: wrote {out} before refusing')
                self.assertFalse((self.tmp / 'cache').exists(),
                                 f'{name}: touched the cache before refusing')


if __name__ == '__main__':
    unittest.main()
