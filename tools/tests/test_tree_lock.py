# SPDX-License-Identifier: GPL-2.0
"""One kloc command at a time writes a tree.

Two installs at once, and an install racing an uninstall, each leave the
tree installed or pristine, never half of each, and a plain uninstall then
restores it byte for byte. A second command waits, saying for what, or with
KLOC_WAIT=0 refuses at once. The lock file is never followed through a
symlink.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import IO

from kloc.series import changes, install, treelock
from kloc.series.state import STATE_DIR, is_installed

from .helpers import tree_snapshot
from .test_install_safety import TOOLS, cli, pristine_tree

SERIES = changes.load_series()
ROUNDS = 20
EMPTY = '600 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'   # mode, sha256

# A command-line worker: imports kloc once, then runs one command line per line
# of stdin (as python3 -m kloc would) and answers with its exit status; so the
# rounds start two commands within a millisecond of each other.
WORKER = '''
import shlex, sys
from kloc import cli
for line in sys.stdin:
    rc = cli.main(shlex.split(line))
    sys.stderr.flush()
    print(rc, flush=True)
'''


def differ(a: dict[str, str], b: dict[str, str]) -> str:
    """The paths whose snapshots differ, shortly."""
    paths = sorted(p for p in set(a) | set(b) if a.get(p) != b.get(p))
    return ', '.join(paths[:6]) + (f' and {len(paths) - 6} more' if len(paths) > 6 else '')


class Worker:
    def __init__(self, log: Path) -> None:
        self.log = open(log, 'w')
        self.proc = subprocess.Popen(
            [sys.executable, '-c', WORKER], cwd=TOOLS, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, text=True,
            env=dict(os.environ, PYTHONPATH=str(TOOLS)))

    @property
    def stdin(self) -> IO[str]:
        assert self.proc.stdin is not None
        return self.proc.stdin

    def send(self, line: str) -> None:
        self.stdin.write(line + '\n')
        self.stdin.flush()

    def result(self, timeout: float = 60) -> int:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise AssertionError('a kloc command did not finish (deadlock?)')
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait(timeout=30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self.log.close()


class Base(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix='kloc-lock-')
        self.addCleanup(tmp.cleanup)
        self.tmp = Path(tmp.name)
        self.root, self.version = pristine_tree(self.tmp / 'linux')
        self.pristine = tree_snapshot(self.root)


class RaceTest(Base):
    def setUp(self) -> None:
        super().setUp()
        ref = self.tmp / 'ref'
        pristine_tree(ref)
        install.install(ref, self.version, SERIES)
        self.installed = tree_snapshot(ref)
        self.logs = [self.tmp / 'a.log', self.tmp / 'b.log']
        self.workers = [Worker(log) for log in self.logs]
        for w in self.workers:
            self.addCleanup(w.close)

    def race(self, first: str, second: str) -> None:
        kdir = f'--kdir {self.root}'
        a, b = self.workers
        for n in range(ROUNDS):
            with self.subTest(round=n):
                a.send(f'{first} {kdir}')
                b.send(f'{second} {kdir}')
                rcs = a.result(), b.result()
                self.assertEqual(rcs, (0, 0), f'{first} and {second} at once: exit {rcs}; '
                                 + self.logs[0].read_text() + self.logs[1].read_text())
                snap = tree_snapshot(self.root)
                if snap not in (self.installed, self.pristine):
                    self.fail('a race left the tree neither installed nor pristine; as '
                              f'installed but for {differ(snap, self.installed)}')
                a.send(f'uninstall {kdir}')
                self.assertEqual(a.result(), 0, self.logs[0].read_text())
                snap = tree_snapshot(self.root)
                if snap != self.pristine:
                    self.fail('uninstall did not restore the tree byte for byte: '
                              f'{differ(snap, self.pristine)} differ')
        logs = self.logs[0].read_text() + self.logs[1].read_text()
        self.assertNotIn('Traceback', logs)
        waits = logs.count(f'waiting for another kloc command on {self.root}')
        self.assertGreater(waits, 0, 'the commands never met: the race was not tested')

    def test_two_installs(self) -> None:
        self.race('install', 'install')

    def test_install_and_uninstall(self) -> None:
        self.race('install', 'uninstall')


class WaitTest(Base):
    def test_a_second_command_waits_and_says_for_what(self) -> None:
        with treelock.held(self.root, 'test'):
            proc = subprocess.Popen([sys.executable, '-m', 'kloc', 'install', '--kdir',
                                     str(self.root)], cwd=TOOLS, stderr=subprocess.PIPE,
                                    text=True, env=dict(os.environ, PYTHONPATH=str(TOOLS)))
            assert proc.stderr is not None
            line = proc.stderr.readline()
            self.assertIn(f'waiting for another kloc command on {self.root} (install runs '
                          'when it has finished)', line)
            time.sleep(0.2)
            self.assertIsNone(proc.poll(), 'it did not wait')
            self.assertEqual(tree_snapshot(self.root),
                             dict(self.pristine, **{'.kloc/': 'dir', '.kloc/lock': EMPTY}))
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertTrue(is_installed(self.root))
        self.assertEqual(cli('uninstall', '--kdir', str(self.root)).returncode, 0)
        self.assertEqual(tree_snapshot(self.root), self.pristine)

    def test_no_wait_refuses_at_once(self) -> None:
        install.install(self.root, self.version, SERIES)
        installed = tree_snapshot(self.root)
        with treelock.held(self.root, 'install'):
            for cmd in ('install', 'uninstall'):
                r = cli(cmd, '--kdir', str(self.root), env={'KLOC_WAIT': '0'})
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertNotIn('Traceback', r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
                self.assertIn(f'{self.root}: another kloc command is writing this tree; '
                              f'{cmd} refused at once', r.stderr)
                self.assertIn('KLOC_WAIT=0', r.stderr)
        r = cli('install', '--kdir', str(self.root), env={'KLOC_WAIT': 'no'})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn('KLOC_WAIT=no', r.stderr)
        self.assertEqual(tree_snapshot(self.root), installed)

    def test_nested_in_one_process(self) -> None:
        with treelock.held(self.root, 'outer'):
            install.install(self.root, self.version, SERIES)
            install.uninstall(self.root, self.version, SERIES)
        self.assertEqual(tree_snapshot(self.root), self.pristine)


class LinkTest(Base):
    def test_a_planted_lock_link_is_not_followed(self) -> None:
        victim = self.tmp / 'victim'
        victim.write_text('precious\n')
        state = self.root / STATE_DIR
        state.mkdir()
        (state / treelock.LOCK).symlink_to(victim)
        r = cli('install', '--kdir', str(self.root))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn('symlink', r.stderr)
        self.assertIn(str(state / treelock.LOCK), r.stderr)
        self.assertEqual(victim.read_text(), 'precious\n')
        self.assertTrue((state / treelock.LOCK).is_symlink())


if __name__ == '__main__':
    unittest.main()
