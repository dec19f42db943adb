# SPDX-License-Identifier: GPL-2.0
"""Bad input gets a clear error and a non-zero exit, and writes nothing."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from kloc import cli, defaults
from kloc.review import fixcheck
from kloc.review.fixcheck import FixCheckError
from kloc.trees import kernels
from kloc.trees.sources import Tree
from kloc.version import KernelVersion

TOOLS = Path(__file__).resolve().parents[1]


def kloc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ, PYTHONPATH=str(TOOLS), **(env or {}))
    return subprocess.run([sys.executable, '-m', 'kloc'] + list(args), capture_output=True,
                          text=True, env=e)


class CliErrors(unittest.TestCase):
    def test_kdir_not_a_kernel_tree(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            r = kloc('tree', '--kdir', d)
            self.assertEqual(r.returncode, 2)
            self.assertIn('is not a kernel tree', r.stderr)
            self.assertIn('set KDIR to the top of a kernel source tree', r.stderr)
            self.assertEqual(os.listdir(d), [])

    def test_kdir_missing(self) -> None:
        r = kloc('tree', '--kdir', '/nonexistent/linux')
        self.assertEqual(r.returncode, 2)
        self.assertIn('is not a directory', r.stderr)

    def test_old_kernel(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / 'Makefile').write_text('VERSION = 5\nPATCHLEVEL = 15\nSUBLEVEL = 0\n')
            for f in ('Kconfig', 'tools/testing/kunit/kunit.py', 'scripts/checkpatch.pl',
                      'drivers/irqchip/irq-gic-v3-its.c'):
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                (root / f).write_text('')
            r = kloc('tree', '--kdir', d)
            self.assertEqual(r.returncode, 2)
            self.assertIn('supports 6.1 and later', r.stderr)

    def test_unsupported_kernel(self) -> None:
        r = kloc('tree', '--kernel', '5.10', env={'KLOC_CACHE': '/nonexistent-cache'})
        self.assertEqual(r.returncode, 2)
        self.assertIn('KERNEL=5.10 is not supported', r.stderr)

    def test_known_failures_of_a_kernel_with_none(self) -> None:
        # every kernel here has one now (the LPI pending tables): a version before all
        # of them, as a tree of that version would give it
        tree = Tree(Path('/nonexistent'), KernelVersion.parse('4.14'), 'debian')
        with self.assertRaisesRegex(FixCheckError, r'Linux 4\.14(\.0)? has no known upstream '
                                    r'failures .*they are in 4\.19 to before 6\.13, 6\.13 on'):
            fixcheck.entries_of(tree)
        self.assertTrue(fixcheck.entries_of(dataclasses.replace(
            tree, version=KernelVersion.parse('6.12'))))

    def test_unknown_topology(self) -> None:
        """An unknown name is refused by name, before the tree is looked at; a known
        one gets past that check to the tree's (an empty KDIR here)."""
        with tempfile.TemporaryDirectory() as d:
            r = kloc('kunit', '--kdir', d, '--topologies', 'x86_64_2n,bogus')
            self.assertEqual(r.returncode, 2)
            self.assertIn('TOPOLOGIES=x86_64_2n,bogus names bogus, which is not a topology',
                          r.stderr)
            self.assertIn('arm64_2n_its1, arm64_2n_its0', r.stderr)
            r = kloc('kunit', '--kdir', d, '--topologies', 'x86_64_2n')
            self.assertEqual(r.returncode, 2)
            self.assertNotIn('not a topology', r.stderr)
            self.assertIn(f'{d}', r.stderr)

    def test_compare_slab_on_a_kernel_without_it(self) -> None:
        if not Path('/usr/src/linux-source-6.12.tar.xz').exists():
            self.skipTest('linux-source-6.12 is not installed (make deps)')
        with tempfile.TemporaryDirectory() as d:
            r = kloc('compare', '--kernel', '6.12', '--out', d)
            self.assertEqual(r.returncode, 2)
            self.assertIn('SLAB is not available on Linux 6.12', r.stderr)
            self.assertIn('removed in 6.8; use KERNEL=6.1', r.stderr)
            self.assertEqual(os.listdir(d), [])

    def test_compare_bad_numbers(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            r = kloc('compare', '--kdir', d, '--alpha', '0.7')
            self.assertEqual(r.returncode, 2)
            self.assertIn('ALPHA=0.7 is out of range: it must be > 0 and <= 0.5', r.stderr)
            r = kloc('compare', '--kdir', d, '--runs', '1')
            self.assertEqual(r.returncode, 2)
            self.assertIn('RUNS=1 is out of range: it must be >= 2', r.stderr)

    def test_report_with_nothing_run_fails(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            r = kloc('report', '--out', d)
            self.assertEqual(r.returncode, 1)
            self.assertIn('0 passed, 0 failed', r.stdout)


class DefaultsTest(unittest.TestCase):
    """The README, make help and the CLI show the defaults of tools/kloc/defaults.py."""

    def test_readme_table_matches(self) -> None:
        readme = (Path(__file__).resolve().parents[2] / 'README.md').read_text()
        self.assertIn(defaults.readme_rows(), readme,
                      'README.md: the numeric options table differs from '
                      'tools/kloc/defaults.py; paste defaults.readme_rows() there')

    def test_cli_defaults_come_from_the_table(self) -> None:
        """Each command parses to the table's default for each option it has."""
        p = cli.parser()
        seen = 0
        for command in ('kunit', 'mutants', 'guest', 'compare', 'review', 'known-failures'):
            args = vars(p.parse_args([command]))
            for o in defaults.OPTIONS:
                if o.dest in args:
                    want = float(defaults.value(o.dest, command))
                    self.assertEqual(float(args[o.dest]), want, f'{command} --{o.dest}')
                    seen += 1
        self.assertGreater(seen, 15)

    def test_review_defaults_to_the_newest_kernel(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != 'KERNEL'}
        with mock.patch.dict(os.environ, env, clear=True):
            p = cli.parser()
            self.assertEqual(p.parse_args(['review', '--aa']).kernel, kernels.NEWEST)
            self.assertEqual(p.parse_args(['kunit']).kernel, kernels.DEFAULT)
        with mock.patch.dict(os.environ, dict(env, KERNEL='6.1'), clear=True):
            self.assertEqual(cli.parser().parse_args(['review', '--aa']).kernel, '6.1')
        self.assertIn(f'(default {kernels.NEWEST})', ' '.join(
            kloc('review', '--help', env={'KERNEL': ''}).stdout.split()))

    def test_make_help_prints_the_table(self) -> None:
        r = subprocess.run(['make', '-s', '-C', str(Path(__file__).resolve().parents[2]),
                            'help'], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(defaults.table(), r.stdout)


class MakefileTest(unittest.TestCase):
    """What the Makefile passes on: quoted values, and TIMEOUT to every command that boots."""

    root = Path(__file__).resolve().parents[2]

    def make(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(['make', '-s', '-C', str(self.root), *args],
                              capture_output=True, text=True, timeout=120)

    def test_timeout_reaches_every_command_that_boots(self) -> None:
        for target in ('kunit', 'guest', 'compare', 'review', 'mutants', 'run',
                       'known-failures'):
            with self.subTest(target=target):
                r = self.make('-n', target, 'TIMEOUT=7', 'PATCH=x.patch')
                self.assertEqual(r.returncode, 0, r.stderr)
                text = r.stdout.replace('\\\n', ' ')
                lines = [ln for ln in text.splitlines() if '-m kloc ' in ln
                         and any(f'kloc {c}' in ln for c in
                                 ('kunit', 'guest', 'compare', 'review', 'mutants',
                                  'known-failures', 'run'))]
                self.assertTrue(lines, r.stdout)
                for ln in lines:
                    self.assertIn("--timeout '7'", ln)

    def test_a_patch_path_with_spaces(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / 'my fix' / "it's a.patch"
            p.parent.mkdir()
            p.write_text('')
            r = self.make('review', f'PATCH={p}', f'OUT={d}/out')
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(f'PATCH={p} is empty', r.stderr)


class DroppedEditsTest(unittest.TestCase):
    def test_two_commands_in_one_second_keep_apart(self) -> None:
        # Two FORCE=1 commands started in the same second wrote their saved copies
        # (and a damaged state) into one folder: one lost the other's, or failed.
        code = 'from kloc import paths; print(paths.dropped_edits_dir())'
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        for _ in range(3):          # retried only for a second boundary in between
            a, b = (subprocess.run([sys.executable, '-c', code], env=env, check=True,
                                   capture_output=True, text=True).stdout.strip()
                    for _ in range(2))
            if Path(a).name[:15] == Path(b).name[:15]:     # the same second
                break
        self.assertEqual(Path(a).parent, Path(b).parent)
        self.assertNotEqual(a, b)


class RequestsTest(unittest.TestCase):
    """A command's request carries OUT absolute: make -C and rsync run the stock
    kselftest install in the tree's folders, where a relative OUT (make's default,
    out) names nothing (make test's guest and LAVA phases failed so)."""

    def test_out_is_absolute_in_every_request(self) -> None:
        from kloc.bench import single
        from kloc.cli import handlers
        from kloc.lava import workflow as lava_workflow
        from kloc.review import workflow as review_workflow
        from kloc.trees.sources import Tree
        from kloc.version import KernelVersion
        for command in ('guest', 'lava', 'review'):
            out = handlers._out_dir(cli.parser().parse_args([command, '--out', 'rel/out']))
            self.assertTrue(out.is_absolute(), command)
            self.assertEqual(out, Path('rel/out').resolve())
        tree = Tree(Path('/t/linux'), KernelVersion(6, 12), 'debian')
        with self.assertRaisesRegex(ValueError, 'OUT must be absolute'):
            single.Request(tree=tree, arch='x86_64', alloc='slub', topology='x86_64_2n',
                           seconds=1.0, timeout=60, counted=0, jobs=1, out=Path('out'))
        with self.assertRaisesRegex(ValueError, 'OUT must be absolute'):
            lava_workflow.Request(tree=tree, cache=Path('/c'), out=Path('out'),
                                  topologies=(), timeout=None, seconds=1.0,
                                  artifacts_url='', run=False)
        with self.assertRaisesRegex(ValueError, 'OUT must be absolute'):
            review_workflow.Request(tree=tree, cache=Path('/c'), out=Path('out'), patch=None,
                                    aa=True, tag='0', topologies=(), bench_topology='x',
                                    runs=2, seconds=1.0, alpha=0.05, timeout=1, jobs=1,
                                    mde=3.6, counted=0, kunit=True, bench=True, force=False,
                                    review_package=False)
