# SPDX-License-Identifier: GPL-2.0
"""Options are read strictly, make passes them quoted, and make clean removes only kloc's.

Booleans are 1, or 0 or nothing; numbers are ASCII digits (with a decimal
point where the option takes a fraction), in range; TOPOLOGIES names
topologies. Anything else is one line naming the variable, the value and
what is accepted, exit 2 (kloc) or non-zero (make). The KUnit runner
keeps a kernel's earlier results until it has new ones. make clean
removes only what kloc wrote in OUT, and every make recipe passes user
values quoted, with a value holding a newline refused in one line.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from kloc import cli, defaults, paths
from kloc.kunitpy import runner
from kloc.qemu import topology
from kloc.trees.sources import Tree
from kloc.version import KernelVersion

TOOLS = Path(__file__).resolve().parents[1]
ROOT = TOOLS.parent
NO_TREE = '/nonexistent/kloc-strict-tree'


class Base(unittest.TestCase):
    def setUp(self) -> None:
        d = tempfile.TemporaryDirectory(prefix='kloc-strict-')
        self.addCleanup(d.cleanup)
        self.tmp = Path(d.name)

    def kloc(self, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
        e = {k: v for k, v in os.environ.items()
             if k not in ('FORCE', 'AA', 'RUN', 'KERNEL', 'KDIR')}
        e.update(PYTHONPATH=str(TOOLS), KLOC_CACHE=str(self.tmp / 'cache'),
                 PYTHONDONTWRITEBYTECODE='1', **(env or {}))
        return subprocess.run([sys.executable, '-m', 'kloc', *args], capture_output=True,
                              text=True, env=e, cwd=self.tmp, timeout=120)

    def make(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ('MAKEFLAGS', 'MFLAGS')}
        env.update(KLOC_CACHE=str(self.tmp / 'cache'), PYTHONDONTWRITEBYTECODE='1')
        return subprocess.run(['make', '-s', '-C', str(ROOT), *args], capture_output=True,
                              text=True, env=env, timeout=120)

    def one_line_error(self, r: subprocess.CompletedProcess[str], *expect: str,
                       rc: int | None = 2) -> str:
        """r failed with one line (progress lines aside) that says each of expect."""
        self.assertNotIn('Traceback', r.stderr)
        if rc is None:
            self.assertNotEqual(r.returncode, 0, r.stderr)
        else:
            self.assertEqual(r.returncode, rc, r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if not ln.startswith('[kloc ')]
        self.assertEqual(len(lines), 1, f'not one line: {r.stderr!r}')
        for e in expect:
            self.assertIn(e, lines[0])
        return lines[0]

    def make_kloc_args(self, target: str, *variables: str) -> list[str]:
        """The arguments make TARGET gives kloc (its last kloc command), from make -n."""
        r = self.make('-n', '-o', 'deps', target, *variables)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [ln for ln in r.stdout.replace('\\\n', ' ').splitlines() if ' -m kloc ' in ln]
        self.assertTrue(lines, r.stdout)
        words = shlex.split(lines[-1])
        return words[words.index('kloc') + 1:]

    def run_make_kloc(self, target: str, *variables: str) -> subprocess.CompletedProcess[str]:
        return self.kloc(*self.make_kloc_args(target, *variables))


class Booleans(Base):
    def test_only_1_0_and_nothing(self) -> None:
        parse = defaults.boolean('FORCE', 'overwrite files edited by hand')
        self.assertIs(parse('1'), True)
        self.assertIs(parse('0'), False)
        self.assertIs(parse(''), False)
        for bad in ('no', 'yes', 'true', 'off', '2', '00', ' 1', '1\n', '١'):
            with self.subTest(value=bad), self.assertRaises(argparse.ArgumentTypeError) as c:
                parse(bad)
            self.assertIn('FORCE=', str(c.exception))
            self.assertNotIn('\n', str(c.exception))

    def test_force_0_and_no_are_not_force(self) -> None:
        p = cli.parser()
        with mock.patch.dict(os.environ, {'FORCE': ''}):
            self.assertFalse(p.parse_args(['tree', '--force', '0']).force)
            self.assertFalse(p.parse_args(['tree']).force)
            self.assertTrue(p.parse_args(['tree', '--force']).force)
            self.assertTrue(p.parse_args(['tree', '--force', '1']).force)
        with mock.patch.dict(os.environ, {'FORCE': '0'}):
            self.assertFalse(cli.parser().parse_args(['tree']).force)
        r = self.kloc('tree', '--kdir', NO_TREE, '--force', 'no')
        self.one_line_error(r, 'kloc tree: error: FORCE=no', 'FORCE=1')
        r = self.kloc('tree', '--kdir', NO_TREE, env={'FORCE': 'no'})
        self.one_line_error(r, 'kloc tree: error: FORCE=no')

    def test_make_force_aa_run(self) -> None:
        for target, var in (('tree', 'FORCE'), ('mutants', 'FORCE'), ('review', 'AA'),
                            ('lava', 'RUN')):
            with self.subTest(target=target, var=var):
                dest = var.lower()
                args = cli.parser().parse_args(self.make_kloc_args(target, f'{var}=0'))
                self.assertIs(getattr(args, dest), False)
                args = cli.parser().parse_args(self.make_kloc_args(target, f'{var}=1'))
                self.assertIs(getattr(args, dest), True)
                r = self.run_make_kloc(target, f'{var}=no', f'KDIR={NO_TREE}',
                                       f'OUT={self.tmp}/out')
                self.one_line_error(r, f'kloc {target}: error: {var}=no', f'{var}=1')
                self.assertFalse((self.tmp / 'out').exists())

    def test_make_aa_0_is_no_aa(self) -> None:
        r = self.run_make_kloc('review', 'AA=0', f'KDIR={NO_TREE}', f'OUT={self.tmp}/out')
        self.one_line_error(r, 'give PATCH=')

    def test_make_v(self) -> None:
        r = self.make('-n', 'check-tools', 'V=no')
        self.one_line_error(r, 'V=no', 'V=1', rc=None)
        self.assertNotIn(' -v', self.make('-n', 'check-tools', 'V=0').stdout)
        self.assertIn(' -v', self.make('-n', 'check-tools', 'V=1').stdout)


class Numbers(Base):
    def test_the_parser(self) -> None:
        seconds = defaults.number('seconds', 'guest')
        self.assertEqual(seconds('2'), 2.0)
        self.assertEqual(seconds('0.5'), 0.5)
        self.assertEqual(seconds('.5'), 0.5)
        self.assertEqual(seconds('0.1'), 0.1)
        timeout = defaults.number('timeout', 'kunit')
        self.assertEqual(timeout('300'), 300)
        self.assertIsInstance(timeout('300'), int)
        for parse, bad in ((seconds, '1e-9'), (seconds, '1E2'), (seconds, 'inf'),
                           (seconds, 'nan'), (seconds, '+1'), (seconds, '-1'), (seconds, '1_0'),
                           (seconds, '٣'), (seconds, ' 1'), (seconds, '1 '), (seconds, '1\n'),
                           (seconds, ''), (seconds, '1.2.3'), (seconds, '0x10'),
                           (seconds, '0.05'), (seconds, '0'), (timeout, '5_0'),
                           (timeout, '3.0'), (timeout, '٣'), (timeout, '+3'), (timeout, '0'),
                           (timeout, '9' * 5000)):
            with self.subTest(value=bad[:20]), \
                    self.assertRaises(argparse.ArgumentTypeError) as c:
                parse(bad)
            msg = str(c.exception)
            self.assertTrue(msg.startswith('SECONDS=' if parse is seconds else 'TIMEOUT='), msg)
            self.assertNotIn('\n', msg)
            self.assertLess(len(msg), 400)

    def test_seconds_has_a_measurable_minimum(self) -> None:
        o = defaults.BY_DEST['seconds']
        self.assertEqual((o.low, o.low_open), (0.1, False))
        self.assertIn('0.1', o.about)

    def test_refused_on_the_command_line(self) -> None:
        for args, expect in (
                (('guest', '--seconds', '1e-9'), 'SECONDS=1e-9 is not a number'),
                (('kunit', '--timeout', '5_0'), 'TIMEOUT=5_0 is not a number'),
                (('compare', '--runs', '٣'), 'RUNS=٣ is not a number'),
                (('review', '--aa', '--seconds', '0.01'), 'SECONDS=0.01 is out of range'),
                (('lava', '--timeout', '5_0'), 'TIMEOUT=5_0 is not a number'),
                (('lava', '--seconds', '1e-9'), 'SECONDS=1e-9 is not a number'),
                (('mutants', '--jobs', '+4'), 'JOBS=+4 is not a number')):
            with self.subTest(args=args):
                out = self.tmp / 'out'
                r = self.kloc(*args, '--kdir', NO_TREE, '--out', str(out))
                accepted = 'digits' if 'not a number' in expect else 'it must be >= 0.1'
                self.one_line_error(r, f'kloc {args[0]}: error: {expect}', accepted)
                self.assertFalse(out.exists())

    def test_refused_through_make(self) -> None:
        for target, var in (('guest', 'SECONDS=1e-9'), ('kunit', 'TIMEOUT=5_0'),
                            ('compare', 'RUNS=٣'), ('review', 'ALPHA=5e-2')):
            with self.subTest(var=var):
                r = self.run_make_kloc(target, var, f'KDIR={NO_TREE}', 'AA=1')
                self.one_line_error(r, f'{var} is not a number')


class Topologies(Base):
    def test_refused(self) -> None:
        for value, expect in ((',,', 'names no topology'), (',', 'names no topology'),
                              ('arm64_1n,,x86_64_2n', 'an empty name'),
                              ('arm64_1n,arm64_1n', 'arm64_1n twice'),
                              ('bogus', 'bogus')):
            for command in ('kunit', 'review', 'lava'):
                with self.subTest(value=value, command=command):
                    aa = ('--aa',) if command == 'review' else ()
                    r = self.kloc(command, '--kdir', NO_TREE, '--topologies', value, *aa)
                    self.one_line_error(r, f'kloc {command}: error: TOPOLOGIES={value} ',
                                        expect, 'arm64_1n')

    def test_accepted(self) -> None:
        """Parsed once, into names, by every command that takes them; empty: all."""
        p = cli.parser()
        for command in ('kunit', 'review', 'lava'):
            self.assertEqual(p.parse_args([command, '--topologies', 'arm64_1n,x86_64_2n'])
                             .topologies, ('arm64_1n', 'x86_64_2n'))
            self.assertEqual(p.parse_args([command]).topologies, tuple(topology.TOPOLOGIES))

    def test_through_make(self) -> None:
        r = self.run_make_kloc('kunit', 'TOPOLOGIES=,,', f'KDIR={NO_TREE}')
        self.one_line_error(r, 'TOPOLOGIES=,, names no topology')


class MakeTestKernels(Base):
    def test_an_unknown_kernel_is_refused_before_anything_runs(self) -> None:
        """make test KERNELS= names kernels kloc knows; another is refused in one
        line that names it and the choices, and the earlier results stay."""
        out = self.tmp / 'out'
        (out / 'test').mkdir(parents=True)
        (out / 'test' / 'earlier').write_text('kept\n')
        r = self.make('-o', 'deps', 'test', f'OUT={out}', 'KERNELS=6.12 6.2')
        self.assertNotEqual(r.returncode, 0)
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith('make test:')]
        self.assertIn("KERNELS has '6.2', not a kernel kloc knows (7.2 6.12 6.1)", lines[0])
        self.assertEqual((out / 'test' / 'earlier').read_text(), 'kept\n')
        self.assertNotIn('=== make test', r.stdout)


class RunnerKeepsResults(Base):
    """runner.run replaces a kernel's results only once it has new ones."""

    def job(self, topologies: tuple[str, ...] = ('arm64_1n', 'x86_64_2n')) -> runner.Job:
        tree = Tree(self.tmp / 'linux', KernelVersion.parse('6.12.1'), 'kdir')
        return runner.Job(tree, self.tmp / 'out' / 'kunit' / tree.label, topologies, 1, 10,
                          self.tmp / 'cache')

    def earlier(self, job: runner.Job) -> None:
        job.out_dir.mkdir(parents=True)
        (job.out_dir / 'arm64_1n.meta.json').write_text('earlier\n')

    def test_a_failed_build_keeps_the_earlier_results(self) -> None:
        job = self.job()
        self.earlier(job)

        def build(j: runner.Job, arch: str) -> None:
            (j.out_dir / f'build-{arch}.log').write_text('error\n')
            raise runner.KunitError(f'did not build; see {j.out_dir}/build-{arch}.log')

        with mock.patch.object(runner, 'build', build), \
                self.assertRaises(runner.KunitError) as c:
            runner.run(job)
        self.assertEqual((job.out_dir / 'arm64_1n.meta.json').read_text(), 'earlier\n')
        log = Path(str(c.exception).split('see ')[1])
        self.assertEqual(log.read_text(), 'error\n')
        self.assertEqual(list(job.out_dir.parent.glob('*/*.meta.json')),
                         [job.out_dir / 'arm64_1n.meta.json'])

    def test_no_topology_keeps_the_earlier_results(self) -> None:
        job = self.job(())
        self.earlier(job)
        with self.assertRaises(runner.KunitError):
            runner.run(job)
        self.assertEqual((job.out_dir / 'arm64_1n.meta.json').read_text(), 'earlier\n')

    def test_new_results_replace_the_earlier_ones(self) -> None:
        job = self.job(('x86_64_2n',))
        self.earlier(job)
        ran: list[Path] = []

        def run_topology(j: runner.Job, name: str, fixes: tuple[str, ...] = ()) -> mock.Mock:
            (j.out_dir / f'{name}.meta.json').write_text('new\n')
            ran.append(j.out_dir)
            return mock.Mock()

        with mock.patch.object(runner, 'build'), mock.patch.object(runner, 'probe_kvm'), \
                mock.patch.object(runner, 'run_topology', run_topology):
            runs = runner.run(job)
        self.assertEqual(len(runs), 1)
        self.assertEqual(sorted(p.name for p in job.out_dir.iterdir()),
                         ['x86_64_2n.meta.json'])
        self.assertEqual(sorted(p.name for p in job.out_dir.parent.iterdir()),
                         [job.out_dir.name])


class Clean(Base):
    def test_a_symlink_out_is_refused(self) -> None:
        mine = self.tmp / 'mine'
        mine.mkdir()
        (mine / 'notes.txt').write_text('mine\n')
        self.kloc('out', '--out', str(mine))
        link = self.tmp / 'link'
        link.symlink_to(mine)
        r = self.make('clean', f'OUT={link}/')
        self.one_line_error(r, f'OUT={link}', 'symlink', rc=None)
        self.assertEqual((mine / 'notes.txt').read_text(), 'mine\n')

    def test_a_folder_kloc_did_not_write_is_refused(self) -> None:
        mine = self.tmp / 'mine'
        (mine / 'kunit').mkdir(parents=True)
        r = self.make('clean', f'OUT={mine}')
        self.one_line_error(r, f'OUT={mine}', paths.OUT_MARKER, rc=None)
        self.assertTrue((mine / 'kunit').is_dir())

    def test_an_out_kloc_made_is_removed(self) -> None:
        out = self.tmp / 'new' / 'out'
        self.assertEqual(self.kloc('report', '--out', str(out)).returncode, 1)
        self.assertTrue((out / paths.OUT_MARKER).is_file())
        r = self.make('clean', f'OUT={out}')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.lexists(out))
        self.assertTrue((self.tmp / 'new').is_dir())

    def test_in_a_folder_of_yours_only_what_kloc_wrote_goes(self) -> None:
        mine = self.tmp / 'mine'
        (mine / 'kunit-notes').mkdir(parents=True)
        (mine / 'notes.txt').write_text('mine\n')
        self.assertEqual(self.kloc('report', '--out', str(mine)).returncode, 1)
        self.assertTrue((mine / 'kunit' / 'junit.xml').is_file())
        r = self.make('clean', f'OUT={mine}')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(p.name for p in mine.iterdir()), ['kunit-notes', 'notes.txt'])

    def test_a_refused_command_leaves_no_marker(self) -> None:
        out = self.tmp / 'out'
        out.mkdir()
        r = self.kloc('review', '--kdir', NO_TREE, '--out', str(out))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(list(out.iterdir()), [])

    def test_make_out_marks_for_the_scripts(self) -> None:
        out = self.tmp / 'out'
        r = self.kloc('out', '--out', str(out))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), str(out))
        self.assertTrue((out / paths.OUT_MARKER).is_file())
        (out / 'lint').mkdir()
        r = self.make('clean', f'OUT={out}')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.lexists(out))

    def test_nothing_to_clean(self) -> None:
        r = self.make('clean', f'OUT={self.tmp}/none')
        self.assertEqual(r.returncode, 0, r.stderr)


FAKE_PYTHON = '''#!{python}
import json, os, sys
keys = {keys!r}
with open(os.environ['FAKE_LOG'], 'a') as f:
    f.write(json.dumps({{'argv': sys.argv[1:],
                        'env': {{k: os.environ[k] for k in keys if k in os.environ}}}}) + '\\n')
print('x')
'''

# The targets' scripts, as shell functions that record what they were given.
SCRIPTS = ('tools/deps.sh', 'tools/make-test.sh', 'tools/lint.sh', 'tools/kselftest-host.sh',
           'tools/bench-aa.sh')

VALUES = ('KERNEL', 'KDIR', 'OUT', 'TOPOLOGIES', 'JOBS', 'TIMEOUT', 'RUNS', 'ALPHA', 'SECONDS',
          'MDE', 'COUNTED', 'FORCE', 'ARCH', 'ALLOC', 'TOPOLOGY', 'PATCH', 'AA', 'RUN',
          'LAVA_URL', 'LAVA_TOKEN_FILE', 'LAVA_ARTIFACTS_URL', 'REPEATS', 'AA_RUNS',
          'AA_SECONDS', 'KLOC_CACHE')


class MakeQuoting(Base):
    def test_help_runs_nothing_of_a_value(self) -> None:
        canary = self.tmp / 'canary'
        for var in ('OUT', 'KDIR', 'KLOC_CACHE', 'KERNEL', 'TOPOLOGIES'):
            for value in (f'`touch {canary}`', f'$$(touch {canary})', "it's \"x\""):
                with self.subTest(var=var, value=value):
                    r = self.make('help', f'{var}={value}')
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertFalse(canary.exists())
                    self.assertIn(f'{var}={value.replace("$$", "$")}', r.stdout)

    def test_a_newline_is_one_line_from_make(self) -> None:
        for var in ('OUT', 'KDIR', 'KERNEL', 'TOPOLOGIES', 'PATCH', 'KLOC_CACHE', 'TIMEOUT'):
            for target in (('help',), ('clean',), ('-n', '-o', 'deps', 'kunit')):
                with self.subTest(var=var, target=target):
                    r = self.make(*target, f'{var}=a\nb')
                    self.one_line_error(r, '***', f'{var}=a\\nb', 'newline', rc=None)

    def test_every_recipe_passes_values_quoted(self) -> None:
        """Each target's commands, run with every variable holding shell syntax: kloc and
        the scripts get each value as it was given, and nothing of it runs."""
        canary = self.tmp / 'canary'
        fake = self.tmp / "fake py'thon"
        fake.write_text(FAKE_PYTHON.format(python=sys.executable, keys=VALUES + ('PYTHON',)))
        fake.chmod(0o755)
        (self.tmp / 'tools').mkdir()
        log = self.tmp / 'log.jsonl'
        given = {v: f"ev{v} a'b\"c`touch {canary}`;d|e&f*\\g $$(touch {canary})x"
                 for v in VALUES}
        given.update(FORCE='1', AA='1', RUN='1')
        want = {v: s.replace('$$', '$') for v, s in given.items()}
        functions = ''.join(f'{s}() {{ "$FAKE" {s} "$@"; }}\n' for s in SCRIPTS)
        targets = ('help', 'tree', 'patches', 'kunit', 'kselftest',
                   'guest', 'compare', 'review', 'bench-aa', 'mutants', 'lava',
                   'known-failures', 'report', 'run', 'test', 'check-tools', 'lint', 'clean')
        env = {k: v for k, v in os.environ.items() if k not in VALUES + ('PYTHON',)}
        env.update(FAKE=str(fake), FAKE_LOG=str(log))
        seen: set[str] = set()
        for target in targets:
            with self.subTest(target=target):
                r = self.make('-n', '-o', 'deps', target, f'PYTHON={fake}',
                              *(f'{v}={s}' for v, s in given.items()))
                self.assertEqual(r.returncode, 0, r.stderr)
                log.unlink(missing_ok=True)
                sh = subprocess.run(['bash', '-c', functions + r.stdout], cwd=self.tmp,
                                    capture_output=True, text=True, timeout=60,
                                    env=env)
                self.assertFalse(canary.exists(), f'{target}: {r.stdout}')
                self.assertNotIn('syntax error', sh.stderr)
                self.assertTrue(log.exists(), f'{target}: nothing ran: {sh.stderr}')
                for line in log.read_text().splitlines():
                    record = json.loads(line)
                    for word in record['argv'] + list(record['env'].values()):
                        for v in VALUES:
                            if f'ev{v} ' in word:
                                self.assertEqual(word, want[v], f'{target}: {v}')
                                seen.add(v)
                    if 'PYTHON' in record['env']:
                        self.assertEqual(record['env']['PYTHON'], str(fake), target)
        self.assertEqual(seen, set(VALUES) - {'FORCE', 'AA', 'RUN', 'KLOC_CACHE'})


if __name__ == '__main__':
    unittest.main()
