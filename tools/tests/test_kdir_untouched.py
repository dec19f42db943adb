# SPDX-License-Identifier: GPL-2.0
"""make test's proof that no command writes KDIR (issue 38), on a real 6.12 git tree.

The tree: Debian's 6.12 as a git repository (one commit), with a NUMA-unaware
GITS_BASER allocation (kunit/its/mutants/6.12/numa-unaware-table.patch) left
uncommitted, given as KDIR to `kloc kunit`. Killed during the copy, killed during
the series' writes (KLOC_FAULT_AFTER: the command kills itself after its first
write) and killed mid-build, then run to the end: it must fail on the cases that
guard the tables' node, and every file of the tree, .git/ included (name, size,
mtime, mode, sha256), and `git status` must be as before each time. Reverted
(git checkout, as a developer would), the tree passes, and is again untouched.

Run by make test's own phase (tools/make-test.sh: KLOC_KDIR_PROOF_OUT names its
output folder); skipped elsewhere: it builds an arm64 KUnit kernel.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest
from collections.abc import Callable
from pathlib import Path

from kloc.paths import PACKAGE_ROOT, cache_dir, cache_subdir
from kloc.trees import sources

from .helpers import TOOLS, debian_tree
from .test_workcopy import git, snapshot

OUT_ENV = 'KLOC_KDIR_PROOF_OUT'
TOPOLOGY = 'arm64_2n_its1'
DRIVER = 'drivers/irqchip/irq-gic-v3-its.c'
MUTANT = PACKAGE_ROOT / 'kunit/its/mutants/6.12/numa-unaware-table.patch'
CMDQ = PACKAGE_ROOT / 'kunit/its/mutants/6.12/numa-unaware-cmdq.patch'
GUARD = 'its_kunit_boot_its_on_node'       # a case that fails on the mutant


def statuses(doc: object) -> dict[str, str]:
    """Every case's status in kunit.py's JSON, by name (parameters under their case)."""
    out: dict[str, str] = {}

    def walk(group: dict[str, object], prefix: str) -> None:
        for case in group.get('test_cases', []) or []:      # type: ignore[attr-defined]
            out[prefix + case['name']] = case['status']
        for sub in group.get('sub_groups', []) or []:        # type: ignore[attr-defined]
            walk(sub, prefix + sub['name'] + '.')
    assert isinstance(doc, dict)
    walk(doc, '')
    return out


@unittest.skipUnless(os.environ.get(OUT_ENV), f'make test runs it ({OUT_ENV})')
class MakeTestKdirProof(unittest.TestCase):
    tree: Path
    out: Path

    @classmethod
    def setUpClass(cls) -> None:
        cls.out = Path(os.environ[OUT_ENV]).resolve()
        cls.out.mkdir(parents=True, exist_ok=True)
        stock = debian_tree('6.12').source
        assert stock is not None
        root = cache_subdir(cache_dir(), 'kdir-proof')
        cls.tree = root / 'linux'
        for old in root.iterdir():      # the last run's (a git gc may still run there)
            aside = root / f'.old-{os.getpid()}-{old.name}'
            old.rename(aside)
            shutil.rmtree(aside, ignore_errors=True)
        start = time.monotonic()
        # hard links to the extracted tree: whatever wrote through one would show
        subprocess.run(['cp', '-al', str(stock), str(cls.tree)], check=True)
        (cls.tree / sources.STAMP).unlink()
        git(cls.tree, 'init', '-q')
        # no background gc after this test's own commit: it would write .git/ under
        # the snapshots (kloc's git commands, ls-files and status, start none)
        git(cls.tree, 'config', 'gc.auto', '0')
        git(cls.tree, 'config', 'maintenance.auto', 'false')
        # -f: Debian's tarball has a top-level .gitignore of its packaging that ignores
        # everything at the top ("/*", "!/debian/"): a git tree made of it has to force
        git(cls.tree, 'add', '-A', '-f')
        git(cls.tree, '-c', 'user.name=kloc', '-c', 'user.email=kloc@localhost', 'commit',
            '-q', '-m', 'Linux 6.12, as Debian ships it')
        mutated = subprocess.run(['patch', '-s', '-p1', '-o', '-', str(cls.tree / DRIVER),
                                  str(MUTANT)], check=True, capture_output=True).stdout
        new = cls.tree / (DRIVER + '.new')
        new.write_bytes(mutated)
        new.replace(cls.tree / DRIVER)     # a new inode, as editors save
        print(f'\n{cls.__name__}: the git tree made in {time.monotonic() - start:.0f} s',
              file=sys.stderr)

    def kunit(self, name: str, kill: Callable[[], bool] | None = None,
              env: dict[str, str] | None = None) -> int:
        """kloc kunit on the tree, into OUT/name; killed (the whole process group) as soon
        as kill() says so. Its exit status (-9: killed)."""
        out = self.out / name
        log = self.out / f'{name}.log'
        with open(log, 'w') as f:
            proc = subprocess.Popen(
                [sys.executable, '-m', 'kloc', 'kunit', '--kdir', str(self.tree),
                 '--topologies', TOPOLOGY, '--out', str(out)],
                cwd=TOOLS, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                env=dict(os.environ, PYTHONPATH=str(TOOLS), **(env or {})))
            while proc.poll() is None:
                if kill is not None and kill():
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    return -9
                time.sleep(0.3)
        return proc.returncode

    def assert_untouched(self, before: dict[str, tuple[int, int, int, str]], status: str,
                         after: str) -> None:
        now = snapshot(self.tree)
        changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
        self.assertEqual(changed, [], f'{after}: the tree was written')
        self.assertEqual(git(self.tree, '--no-optional-locks', 'status', '--porcelain'),
                         status, after)

    def test_kunit_never_writes_kdir_killed_or_not(self) -> None:
        version = sources.check_tree(self.tree)
        copy = sources.kdir_copy(self.tree, version, cache_dir())
        build = copy.parent / 'build-arm64'
        status = git(self.tree, '--no-optional-locks', 'status', '--porcelain')
        self.assertEqual(status, f' M {DRIVER}\n')
        before = snapshot(self.tree)
        # a copy from nothing, killed half-way (files are linked in sorted order)
        for d in (copy, build):
            if d.exists():
                shutil.rmtree(d)
        rc = self.kunit('killed-in-copy', lambda: (copy / 'Makefile').exists())
        self.assertEqual(rc, -9)
        self.assertFalse((copy / 'virt').exists(), 'killed after the copy, not during it')
        self.assert_untouched(before, status, 'killed during the copy')
        # the series' writes: the command kills itself after the first
        rc = self.kunit('killed-in-series', env={'KLOC_FAULT_AFTER': '1',
                                                 'KLOC_FAULT_MODE': 'kill'})
        self.assertEqual(rc, -9)
        self.assert_untouched(before, status, 'killed during the series\' writes')

        def compiled() -> bool:
            n = 0
            for _, _, files in os.walk(build):      # kbuild's temporary folders come and go
                n += sum(f.endswith('.o') for f in files)
            return n >= 100
        rc = self.kunit('killed-mid-build', compiled)
        self.assertEqual(rc, -9)
        self.assert_untouched(before, status, 'killed mid-build')
        # to the end: the guard fails, the tree is as it was
        rc = self.kunit('mutated')
        self.assertNotEqual(rc, 0, 'the NUMA-unaware tables were not caught')
        got = statuses(json.loads((self.out / 'mutated' / 'kunit' / f'linux-{version}' /
                                   f'{TOPOLOGY}.json').read_text()))
        self.assertEqual(got.get(f'irq_gic_v3_its_placement.{GUARD}'), 'FAIL', got)
        self.assert_untouched(before, status, 'a whole run')
        # reverted: passes, untouched
        git(self.tree, 'checkout', '-q', '--', DRIVER)
        status = git(self.tree, '--no-optional-locks', 'status', '--porcelain')
        self.assertEqual(status, '')
        before = snapshot(self.tree)
        rc = self.kunit('reverted')
        self.assertEqual(rc, 0, (self.out / 'reverted.log').read_text()[-3000:])
        got = statuses(json.loads((self.out / 'reverted' / 'kunit' / f'linux-{version}' /
                                   f'{TOPOLOGY}.json').read_text()))
        self.assertEqual(got.get(f'irq_gic_v3_its_placement.{GUARD}'), 'PASS', got)
        self.assert_untouched(before, status, 'the reverted tree\'s run')
        self.bisect_a_small_series()

    def bisect_a_small_series(self) -> None:
        """make bisect on three commits of the tree (a comment, a NUMA-unaware command
        queue, a documentation line), KUnit only (BENCH=0): each case the queue breaks
        is named at the second commit, in at most ceil(log2 3) = 2 steps, and the
        tree, .git/ included, is exactly as before. (The series make bisect's proof
        uses, docs/measurements.md, is another, kept out of the tests.)"""
        good = git(self.tree, 'rev-parse', 'HEAD').strip()
        subjects = ('lib/cmdline: a comment', 'irqchip/gic-v3-its: the command queue '
                    'without a node', 'Documentation: a line')
        for k, subject in enumerate(subjects):
            if k == 0:
                path = self.tree / 'lib/cmdline.c'
                text = path.read_text().replace(' * Helper functions', ' * Helper functions '
                                                '(bisected)', 1)
            elif k == 1:
                path = self.tree / DRIVER
                text = subprocess.run(['patch', '-s', '-p1', '-o', '-', str(path),
                                       str(CMDQ)], check=True, capture_output=True,
                                      text=True).stdout
            else:
                path = self.tree / 'Documentation/admin-guide/README.rst'
                text = path.read_text() + '\nA line for make test\'s bisect.\n'
            new = path.with_name(path.name + '.new')
            new.write_text(text)
            new.replace(path)       # a new inode: the cache's tree shares the old one
            git(self.tree, '-c', 'user.name=kloc', '-c', 'user.email=kloc@localhost',
                'commit', '-q', '-a', '-m', subject)
        shas = git(self.tree, 'rev-list', '--reverse', f'{good}..HEAD').split()
        status = git(self.tree, '--no-optional-locks', 'status', '--porcelain')
        before = snapshot(self.tree)
        out = self.out / 'bisect'
        start = time.monotonic()
        r = subprocess.run([sys.executable, '-m', 'kloc', 'bisect', '--kdir', str(self.tree),
                            '--good', good, '--bad', 'HEAD', '--topologies', TOPOLOGY,
                            '--bench', '0', '--out', str(out)], cwd=TOOLS,
                           capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(TOOLS)))
        print(f'\nmake bisect of 3 commits: {time.monotonic() - start:.0f} s\n{r.stdout}',
              file=sys.stderr)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        doc = json.loads((out / 'bisect' / f'{good[:12]}..{shas[-1][:12]}' /
                          'bisect.json').read_text())
        signals = doc['signals']
        self.assertTrue(signals, 'the NUMA-unaware command queue moved no case')
        for sig in signals:
            self.assertEqual((sig['kind'], sig['result'], sig['first_bad']['sha']),
                             ('kunit', 'found', shas[1]), sig)
            self.assertLessEqual(len(sig['steps']), 2, sig)
        self.assertIn('irq_gic_v3_its_placement.its_kunit_probe_places_all_on_node',
                      ' '.join(x['name'] for x in signals))
        self.assert_untouched(before, status, 'make bisect')


if __name__ == '__main__':
    unittest.main()
