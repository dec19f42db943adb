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

from kloc import paths
from kloc.series import changes, planning
from kloc.series.state import MANIFEST, STATE_DIR
from kloc.version import KernelVersion

from .helpers import TOOLS, cli, pristine_tree, require_root

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
        require_root(self, f'mounts {" ".join(args)}')
        point = Path(tempfile.mkdtemp(dir=self.tmp))
        if not _mount(*args, str(point)):
            self.skipTest(f'cannot mount {" ".join(args)} here')
        self.mounts.append(point)
        return point

    def run_case(self, c: Case) -> str:
        cmd = [sys.executable, '-m', 'kloc', *c.args]
        if c.user:
            require_root(self, f'runs the command as user {c.user}')
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
        """A read-only KDIR is no problem: kloc only reads it (trees/workcopy.py)."""
        ro = self.mounted('--bind', '-o', 'ro', str(self.tree))
        if os.access(ro, os.W_OK) and not _mount('-o', 'remount,ro,bind', str(ro)):
            self.skipTest('cannot make a read-only bind mount')
        r = cli('tree', '--kdir', str(ro), env={'KLOC_CACHE': str(self.tmp / 'cache')})
        self.assertEqual(r.returncode, 0, r.stderr)
        copy = Path(r.stdout.strip())
        self.assertTrue(copy.is_relative_to(self.tmp / 'cache'), copy)
        self.assertTrue((copy / STATE_DIR / MANIFEST).is_file())

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

    def test_not_a_kernel_tree(self) -> None:
        self.run_case(Case('KDIR is not a kernel tree', ('tree', '--kdir', str(self.tmp)),
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
                cache = sorted((self.tmp / 'cache').rglob('*'))   # other cases' copies
                self.run_case(Case(name, args + ('--out', str(out)), expect))
                self.assertFalse(out.exists(), f'{name}: wrote {out} before refusing')
                self.assertEqual(sorted((self.tmp / 'cache').rglob('*')), cache,
                                 f'{name}: touched the cache before refusing')

    def test_options_that_would_mean_something_else_are_refused(self) -> None:
        out = self.tmp / 'strict-out'
        for name, args, expect in (
                ('FORCE=no (make tree)', ('tree', '--kdir', str(self.tree), '--force',
                                          'no'), 'FORCE=no is not 0 or 1'),
                ('AA=yes (make review)', ('review', '--aa', 'yes'), 'AA=yes is not 0 or 1'),
                ('RUN=true (make lava)', ('lava', '--run', 'true'), 'RUN=true is not 0 or 1'),
                ('TOPOLOGIES=,, (make kunit)', ('kunit', '--topologies', ',,'),
                 'TOPOLOGIES=,, names no topology'),
                ('TOPOLOGIES=,, (make lava)', ('lava', '--topologies', ',,'),
                 'TOPOLOGIES=,, names no topology'),
                ('TIMEOUT=5_0 (make kunit)', ('kunit', '--timeout', '5_0'),
                 'TIMEOUT=5_0 is not a number'),
                ('RUNS=\u0663 (make compare)', ('compare', '--runs', '\u0663'),
                 'RUNS=\u0663 is not a number'),
                ('SECONDS=1e-9 (make guest)', ('guest', '--seconds', '1e-9'),
                 'SECONDS=1e-9 is not a number'),
                ('SECONDS=0.01 (make review)', ('review', '--aa', '--seconds', '0.01'),
                 'SECONDS=0.01 is out of range: it must be >= 0.1'),
                ('KDIR with a newline (make tree)', ('tree', '--kdir', 'a\nb'),
                 'KDIR=a\\nb holds a newline')):
            with self.subTest(name=name):
                self.run_case(Case(name, args + (('--out', str(out)) if args[0] != 'tree'
                                                 else ()), expect))
                self.assertFalse(out.exists(), f'{name}: wrote {out} before refusing')
        self.assertEqual(planning.managed_files(self.tree), set())
        r = self.run_case(Case('OUT with a newline (make report)', ('report', '--out', 'a\nb'),
                               'OUT=a\\nb holds a newline'))
        self.assertNotIn('\n', r)

    def test_clean_removes_nothing_kloc_did_not_make(self) -> None:
        mine = self.tmp / 'clean-mine'
        (mine / 'kunit').mkdir(parents=True)
        link = self.tmp / 'clean-link'
        link.symlink_to(mine)
        for name, args, expect in (
                ('OUT kloc did not mark (make clean)', ('clean', '--out', str(mine)),
                 f'has no {paths.OUT_MARKER}'),
                ('OUT is a symlink (make clean)', ('clean', '--out', f'{link}/'),
                 'is a symlink'),
                ('OUT is a symlink (make clean, the check)',
                 ('clean', '--check', '--out', str(link)), 'is a symlink')):
            with self.subTest(name=name):
                self.run_case(Case(name, args, expect))
                self.assertTrue((mine / 'kunit').is_dir())
        (mine / paths.OUT_MARKER).write_text('garbage')
        self.run_case(Case('OUT marker damaged (make clean)', ('clean', '--out', str(mine)),
                           'is damaged'))
        self.assertTrue((mine / 'kunit').is_dir())

    def test_damaged_run_results(self) -> None:
        """make report on a meta.json that is not one make kunit wrote: one line naming it;
        nothing from it is run (tests/test_result_trust.py)."""
        import json
        for name, data in (('garbage', 'garbage\n'),
                           ('seconds a string', json.dumps(
                               {'kernel': 'linux-6.12.1', 'topology': 'arm64_1n',
                                'seconds': 'x', 'kunit_dir': str(self.tmp)})),
                           ('kunit_dir a planted folder', json.dumps(
                               {'kernel': 'linux-6.12.1', 'topology': 'arm64_1n',
                                'seconds': 1, 'kunit_dir': str(self.tmp / 'tools' / 'testing'
                                                               / 'kunit')})),
                           ('fixes of an unknown failure', json.dumps(
                               {'kernel': 'linux-6.12.1', 'topology': 'arm64_1n',
                                'seconds': 1, 'fixes': ['made-up']}))):
            out = self.tmp / f'results-{name.replace(" ", "-")}'
            meta = out / 'kunit' / 'linux-6.12.1' / 'arm64_1n.meta.json'
            meta.parent.mkdir(parents=True)
            meta.write_text(data)
            msg = self.run_case(Case(f'meta.json: {name} (make report)',
                                     ('report', '--out', str(out)), 'run make kunit again'))
            self.assertIn(str(meta), msg)

    def test_a_patch_to_the_packages_tests(self) -> None:
        """make review PATCH= that changes the package's suite: refused before anything,
        naming the file and REVIEW_PACKAGE=1 (tests/test_review_integrity.py)."""
        import difflib
        rel = 'mm/tests/percpu_locality_kunit.c'
        final = planning.plan(self.tree, self.version, SERIES).final[rel]
        assert final is not None
        old = final.decode()
        patch = self.tmp / 'void-the-suite.patch'
        patch.write_text(''.join(difflib.unified_diff(
            old.splitlines(keepends=True),
            old.replace('KUNIT_EXPECT_', '(void)').splitlines(keepends=True),
            f'a/{rel}', f'b/{rel}')))
        out = self.tmp / 'review-out'
        msg = self.run_case(Case('PATCH= changes the package\'s suite (make review)',
                                 ('review', '--patch', str(patch), '--kdir', str(self.tree),
                                  '--out', str(out)), 'REVIEW_PACKAGE=1'))
        self.assertIn(rel, msg)
        self.assertFalse(out.exists())
        self.assertFalse((self.tree / STATE_DIR).exists(), 'KDIR was written')


if __name__ == '__main__':
    unittest.main()
