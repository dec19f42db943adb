# SPDX-License-Identifier: GPL-2.0
"""tests/run.py: the parallel runner of the tool tests reports what unittest would.

A package of small test modules is written to a temporary directory and run
with the runner, as make test runs the real ones: each failure, error, skip
and fixture must come out as unittest's own runner reports it, and the exit
status must say whether anything failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

from kloc.pages.built import summary as built_summary

TOOLS = Path(__file__).resolve().parents[1]
PACKAGE = 'kloc_runner_probe'

MODULES = {
    'test_fixtures.py': '''
        import os
        import unittest

        def log(what):
            with open(os.environ['PROBE_LOG'], 'a') as f:
                f.write(what + '\\n')

        def setUpModule():
            log('module')

        class A(unittest.TestCase):
            def test_one(self):
                pass

            def test_two(self):
                pass

        class B(unittest.TestCase):
            def test_three(self):
                pass
    ''',
    'test_classes.py': '''
        import os
        import unittest

        class Shared(unittest.TestCase):
            @classmethod
            def setUpClass(cls):
                with open(os.environ['PROBE_LOG'], 'a') as f:
                    f.write('class\\n')

            def test_a(self):
                pass

            def test_b(self):
                pass
    ''',
    'test_outcomes.py': '''
        import unittest

        class Outcomes(unittest.TestCase):
            def test_fails(self):
                self.assertEqual(1, 2, 'the probe failure')

            def test_errors(self):
                raise RuntimeError('the probe error')

            def test_skips(self):
                self.skipTest('the probe skip')

            @unittest.expectedFailure
            def test_expected_failure(self):
                self.fail('expected')

            def test_subtests(self):
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertNotEqual(i, 1, 'the probe subtest')
    ''',
    'test_broken.py': '''
        import no_such_module_anywhere
    ''',
    'test_side_by_side.py': '''
        import os
        import time
        import unittest
        from pathlib import Path

        def meet(mine, theirs):
            # Each test waits for the other: they pass only when two workers
            # run them at the same time.
            d = Path(os.environ['PROBE_DIR'])
            (d / mine).touch()
            deadline = time.monotonic() + 60
            while not (d / theirs).exists():
                if time.monotonic() > deadline:
                    raise AssertionError(f'{theirs} never ran beside {mine}')
                time.sleep(0.05)

        class Left(unittest.TestCase):
            def test_left(self):
                meet('left', 'right')

        class Right(unittest.TestCase):
            def test_right(self):
                meet('right', 'left')
    ''',
}


class BuiltTest(unittest.TestCase):
    def test_variants_are_counted_under_their_dir(self) -> None:
        built = ('linux-6.12 build-arm64', 'linux-6.12.118 build-arm64',
                 'linux-6.12.118 build-arm64@leak-cmdq-on-error',
                 'linux-6.12.118 build-arm64@numa-unaware-cmdq',
                 'linux-6.12.118 guest-x86_64-slub@lossy-lstats')
        self.assertEqual(built_summary(built),
                         'rebuilt linux-6.12 build-arm64, linux-6.12.118 build-arm64 and 2 '
                         'mutant variants of it, 1 mutant variant of linux-6.12.118 '
                         'guest-x86_64-slub')
        self.assertEqual(built_summary(()), 'kernels reused')
        self.assertEqual(built_summary(None), '-')


class RunnerTest(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix='kloc-runner-')
        self.addCleanup(tmp.cleanup)
        self.root = Path(tmp.name)
        self.log = self.root / 'log'

    def write(self, names: list[str]) -> Path:
        pkg = self.root / PACKAGE
        pkg.mkdir()
        (pkg / '__init__.py').write_text('')
        for name in names:
            (pkg / name).write_text(textwrap.dedent(MODULES[name]))
        return pkg

    def runner(self, pkg: Path, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PYTHONPATH=str(TOOLS), PROBE_LOG=str(self.log),
                   PROBE_DIR=str(self.root))
        return subprocess.run([sys.executable, '-m', 'tests.run', '--start', str(pkg),
                               '--top', str(self.root), *args], cwd=TOOLS, env=env,
                              capture_output=True, text=True, timeout=300)

    def test_failures_errors_and_skips_are_reported_and_fail_the_run(self) -> None:
        r = self.runner(self.write(['test_outcomes.py', 'test_broken.py']), '--jobs', '2')
        self.assertEqual(r.returncode, 1, r.stderr)
        out = r.stderr
        self.assertIn(f'FAIL: test_fails ({PACKAGE}.test_outcomes.Outcomes.test_fails)', out)
        self.assertIn('AssertionError: 1 != 2 : the probe failure', out)
        self.assertIn('RuntimeError: the probe error', out)
        self.assertIn("No module named 'no_such_module_anywhere'", out)
        self.assertIn('the probe subtest', out)
        self.assertIn('(i=1)', out)
        self.assertIn('Ran 6 tests', out)
        self.assertIn('FAILED (failures=2, errors=2, skipped=1, expected_failures=1)', out)

    def test_fixtures_run_once_and_all_pass(self) -> None:
        r = self.runner(self.write(['test_fixtures.py', 'test_classes.py']), '--jobs', '2')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('Ran 5 tests', r.stderr)
        self.assertTrue(r.stderr.rstrip().endswith('\nOK'), r.stderr)
        self.assertEqual(sorted(self.log.read_text().split()), ['class', 'module'])

    def test_workers_run_side_by_side(self) -> None:
        r = self.runner(self.write(['test_side_by_side.py']), '--jobs', '2', '-v')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('[2/2] ', r.stderr)
        self.assertIn('Ran 2 tests', r.stderr)

    def test_no_workers_is_refused(self) -> None:
        r = self.runner(self.write(['test_classes.py']), '--jobs', '0')
        self.assertEqual(r.returncode, 2)
        self.assertIn('--jobs 0: give 1 or more worker processes', r.stderr)
        self.assertFalse(self.log.exists(), 'a test ran')


if __name__ == '__main__':
    unittest.main()
