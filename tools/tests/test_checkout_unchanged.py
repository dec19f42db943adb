# SPDX-License-Identifier: GPL-2.0
"""tools/checkout-unchanged.sh, make test's last phase: on real git checkouts made
here, a file written, changed or removed outside OUT since the record is found and
named; what OUT holds, and what git ignores, is not. (Found by make test itself: the
KDIR proof's output went to tools/out/ while OUT was relative.)"""

from __future__ import annotations

import subprocess
import tempfile
import unittest
from pathlib import Path

from .helpers import TOOLS
from .test_bisect_git import commit
from .test_workcopy import git

SCRIPT = TOOLS / 'checkout-unchanged.sh'


class CheckoutUnchanged(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.repo = Path(self._tmp.name) / 'kloc'
        self.repo.mkdir()
        git(self.repo, 'init', '-q')
        (self.repo / '.gitignore').write_text('/out/\n__pycache__/\n')
        (self.repo / 'tools').mkdir()
        (self.repo / 'tools' / 'a.py').write_text('a = 1\n')
        (self.repo / 'README.md').write_text('kloc\n')
        commit(self.repo, 'a')
        self.record = Path(self._tmp.name) / 'record'

    def script(self, mode: str, out: str,
               cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SCRIPT), mode, str(self.record), out], cwd=cwd or self.repo,
                              capture_output=True, text=True, check=False)

    def test_only_out_and_ignored_files_pass(self) -> None:
        for out in ('out/test', 'results'):
            with self.subTest(out=out):
                self.assertEqual(self.script('record', out).returncode, 0)
                (self.repo / out / 'kdir-proof').mkdir(parents=True)
                (self.repo / out / 'kdir-proof' / 'report.txt').write_text('r\n')
                (self.repo / 'tools' / '__pycache__').mkdir(exist_ok=True)
                (self.repo / 'tools' / '__pycache__' / 'a.pyc').write_bytes(b'\0')
                r = self.script('check', out)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn('nothing new, changed or removed outside OUT', r.stdout)

    def test_out_given_absolute_or_from_elsewhere(self) -> None:
        out = self.repo / 'out' / 'test'
        self.assertEqual(self.script('record', str(out), cwd=self.repo / 'tools').returncode, 0)
        out.mkdir(parents=True)
        (out / 'x').write_text('x\n')
        self.assertEqual(self.script('check', str(out), cwd=self.repo / 'tools').returncode, 0)

    def test_a_relative_out_resolved_in_tools_is_found(self) -> None:
        """The bug it was written for: OUT=out/test given to a test run in tools/."""
        self.assertEqual(self.script('record', 'out/test').returncode, 0)
        stray = self.repo / 'tools' / 'out' / 'test' / 'kdir-proof'
        stray.mkdir(parents=True)
        (stray / 'mutated.log').write_text('log\n')
        r = self.script('check', 'out/test')
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn('now:    ?? tools/out/test/kdir-proof/mutated.log', r.stdout)
        self.assertIn('changed outside OUT', r.stdout)

    def test_changed_and_removed_tracked_files_are_found(self) -> None:
        self.assertEqual(self.script('record', 'out').returncode, 0)
        (self.repo / 'README.md').write_text('kloc, edited\n')
        (self.repo / 'tools' / 'a.py').unlink()
        r = self.script('check', 'out')
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(' M README.md', r.stdout)
        self.assertIn(' D tools/a.py', r.stdout)

    def test_an_edit_made_before_the_record_is_not_the_command_s(self) -> None:
        (self.repo / 'README.md').write_text('kloc, the user\'s edit\n')
        self.assertEqual(self.script('record', 'out').returncode, 0)
        r = self.script('check', 'out')
        self.assertEqual(r.returncode, 0, r.stdout)
        (self.repo / 'README.md').write_text('kloc\n')
        r = self.script('check', 'out')
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn('before:  M README.md', r.stdout)

    def test_bad_use_is_refused(self) -> None:
        r = self.script('check', 'out')
        self.assertEqual(r.returncode, 2)
        self.assertIn('no record at', r.stderr)
        r = self.script('record', '.')
        self.assertEqual(r.returncode, 2)
        self.assertIn('is the checkout itself', r.stderr)
        r = subprocess.run([str(SCRIPT), 'check'], cwd=self.repo, capture_output=True,
                           text=True, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn('usage:', r.stderr)
        for cwd in (self.repo, Path(self._tmp.name)):
            r = subprocess.run([str(SCRIPT), 'chek', str(self.record), 'out'], cwd=cwd,
                               capture_output=True, text=True, check=False)
            self.assertEqual(r.returncode, 2, cwd)
            self.assertIn('usage:', r.stderr)

    def test_not_a_git_checkout(self) -> None:
        plain = Path(self._tmp.name) / 'tarball'
        plain.mkdir()
        self.assertEqual(self.script('record', 'out', cwd=plain).returncode, 0)
        r = self.script('check', 'out', cwd=plain)
        self.assertEqual(r.returncode, 0)
        self.assertIn('not a git checkout', r.stdout)


if __name__ == '__main__':
    unittest.main()
