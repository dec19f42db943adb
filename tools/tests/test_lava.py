# SPDX-License-Identifier: GPL-2.0
"""make lava's LAVA jobs: written, checked, validated and run with Debian's lava-dispatcher.

Real throughout. The monitors' patterns are checked on real consoles (the
golden ones: passing, failing, crashing, not booting, and a kselftest boot)
against kunit.py's parser and the kselftest's JSON record. The jobs are
written from the built 6.12 KUnit and guest kernels (skipped where those
are not built); lava_common's schema checks each as lava-server does at
submission, the device is lava-server's own qemu.jinja2 rendered with each
job's context, lava-run --validate takes every job, and lava-run runs the
x86_64 KUnit job, whose statuses must be those of kunit.py's own QEMU
command booting the same kernel, and the kselftest job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path
from typing import Any
from unittest import mock

from kloc.bench import metrics
from kloc.guests import guest
from kloc.kunitpy import junit, ktap, runner
from kloc.kcidb import record as kcidb, schema as kcidb_schema
from kloc.lava import compare, device, export, jobs, local, monitors, results, session, yamlio
from kloc.lava import kcidb as lava_kcidb
from kloc.paths import QEMU_CONFIGS, cache_dir
from kloc.qemu import arches, topology
from kloc.trees.sources import Tree

from .helpers import DATA, debian_tree, stock_parser

TOOLS = Path(__file__).resolve().parents[1]
KSELFTEST_CONSOLE = 'lo_counters-6.12-x86_64_2n.console'
X86 = 'x86_64_2n'


def lava_results(console: str, monitor: monitors.Monitor) -> list[results.LavaResult]:
    """What LAVA's monitor makes of a console, as results.read_log returns it."""
    found, _ = monitors.scan(monitor, console)
    return [results.LavaResult(monitor.name, m.test_case_id.lower(), m.test_case_id, m.result,
                               float(m.measurement) if m.measurement else None,
                               m.units or '') for m in found]


class MonitorsTest(unittest.TestCase):
    """The patterns, on real consoles, against what kloc reads from them directly."""

    def test_kunit_results_fit_the_parsers_tree(self) -> None:
        for name in ('its-6.12-its1-pass.console', 'mutant-numa-unaware-lvl2.console',
                     'its-6.12-crash.console', 'no-boot.console'):
            with self.subTest(console=name):
                text = (DATA / name).read_text()
                direct = ktap.parse(text, stock_parser())
                doc = ktap.parse(text, stock_parser())
                found = lava_results(text, monitors.KUNIT)
                self.assertEqual(results.place(doc, found), [])
                self.assertEqual(compare.leaf_statuses(doc), compare.leaf_statuses(direct))
                lines = sum(1 for s in direct.suites for _ in results._post_order(s))
                crashed = sum(1 for s in direct.suites for _, n in results._post_order(s)
                              if n.status == ktap.Status.CRASHED)
                self.assertEqual(len(found), lines - crashed)

    def test_a_disagreement_is_a_problem(self) -> None:
        text = (DATA / 'its-6.12-its1-pass.console').read_text()
        doc = ktap.parse(text, stock_parser())
        found = lava_results(text, monitors.KUNIT)
        found[0] = dataclasses.replace(found[0], result='fail')
        problems = results.place(doc, found[:-1])
        self.assertEqual(len(problems), 2, problems)
        self.assertIn(f'{found[0].name}: LAVA says FAIL, kunit.py\'s parser PASS', problems[0])
        self.assertIn('LAVA says CRASHED', problems[1])     # the last line, left out

    def test_spread(self) -> None:
        self.assertEqual(compare.spread([100, 110, 120]), (80, 140))
        self.assertEqual(compare.spread([100, 100, 100]), (90, 110))

    def test_a_timed_figure_outside_the_spread_is_a_note_not_a_failure(self) -> None:
        checks = [compare.Check('kselftest statuses', True, 'same'),
                  compare.Check('kselftest pps_single', False, 'LAVA 47000', gating=False)]
        text = compare.render(checks)
        self.assertIn('note kselftest pps_single', text)
        self.assertNotIn('FAIL', text)
        self.assertIn('FAIL kselftest statuses',
                      compare.render([compare.Check('kselftest statuses', False, 'differ')]))

    def test_a_failing_case_fails(self) -> None:
        text = (DATA / 'mutant-numa-unaware-lvl2.console').read_text()
        found = {r.name: r.result for r in lava_results(text, monitors.KUNIT)}
        self.assertEqual(found['its_kunit_probe_places_all_on_node'], 'fail')
        self.assertEqual(found['64K indirect on node 0'], 'fail')

    def test_a_known_upstream_failure_is_no_failed_job(self) -> None:
        """A KUnit job is judged as make kunit judges a run: stock 7.2's known
        failures (known.py, signatures checked) pass; a mutant's failure does not."""
        def job(name: str, kernel: str) -> results.LavaKunit:
            text = (DATA / name).read_text()
            log = results.JobLog(lava_results(text, monitors.KUNIT), text.splitlines())
            log.results += [results.LavaResult('lava', 'job', 'job', 'pass'),
                            results.LavaResult('lava', 'lava-test-monitor',
                                               'lava-test-monitor', 'pass',
                                               extra={'status': 'passed'})]
            return results.kunit(log, kernel, 'arm64_2n_its1', stock_parser())
        stock = job('its-7.2-stock-arm64_2n_its1.console', 'linux-7.2.13')
        self.assertEqual(stock.problems, [])
        self.assertFalse(stock.run.doc.ok)          # two cases fail, both known
        self.assertTrue(stock.ok)
        self.assertFalse(job('mutant-numa-unaware-lvl2.console', 'linux-6.12.118').ok)

    def test_skip_and_a_line_still_printing(self) -> None:
        text = ('KTAP version 1\n1..1\n    ok 1 runs\n    ok 2 skipped one # SKIP no ITS\n'
                '    not ok 3 broken\nok 1 suite\n    ok 4 half-print')
        found = [(m.test_case_id, m.result) for m in monitors.scan(monitors.KUNIT, text)[0]]
        self.assertEqual(found, [('runs', 'pass'), ('skipped one', 'skip'), ('broken', 'fail'),
                                 ('suite', 'pass')])

    def test_kselftest_statuses_and_figures(self) -> None:
        text = (DATA / KSELFTEST_CONSOLE).read_text()
        log = results.JobLog(lava_results(text, monitors.KSELFTEST)
                             + lava_results(text, monitors.KSELFTEST_EXIT), text.splitlines())
        log.results.append(results.LavaResult('lava', 'job', 'job', 'pass'))
        log.results.append(results.LavaResult('lava', 'lava-test-monitor', 'lava-test-monitor',
                                              'pass', extra={'status': 'passed'}))
        s = results.selftest(log, X86, 'guest')
        self.assertEqual(s.why, '')
        self.assertEqual(s.statuses, compare.tap_statuses(text))
        self.assertEqual(set(s.statuses.values()), {'PASS'})
        self.assertEqual(len(s.statuses), 4)
        record, _ = guest.parse_console(text)
        assert record is not None
        for name in ('pps_single', 'pps_total', 'pps_node0', 'pps_node1'):
            self.assertEqual(s.figures[name].value, metrics.extract(record)[name])
            self.assertEqual(s.figures[name].unit, 'packets/s')

    def test_lava_log_lines(self) -> None:
        """lava-run's log: YAML lines, the console with each " written as \\"."""
        log = results.read_log(
            '$ lava-run ...\n'
            '{"dt": "x", "lvl": "target", "msg": "{\\\\\\"pps\\\\\\": 1}"}\n'
            '{"dt": "x", "lvl": "results", "msg": {"case": "node_0", "definition": '
            '"lo_counters", "extra": {"test_case_id": "node 0"}, "level": "3.1", '
            '"measurement": !!null "null", "result": "pass", "units": "packets/s"}}\n'
            'Traceback (most recent call last):\n')
        self.assertEqual(log.console, ['{"pps": 1}'])
        self.assertEqual(log.results, [results.LavaResult('lo_counters', 'node_0', 'node 0',
                                                          'pass', None, 'packets/s')])


class SplitTest(unittest.TestCase):
    """A direct run's QEMU command, as a job's images and context."""

    def test_kunit_x86(self) -> None:
        cmd = jobs.kunit_command(X86, Path('/k/bzImage'))
        s = jobs.split(cmd, 'x86_64')
        self.assertEqual(s.files, {'kernel': Path('/k/bzImage')})
        self.assertEqual(s.append, 'kunit.enable=1 console=ttyS0 panic=-1 kunit_shutdown=reboot')
        self.assertEqual(s.context['memory'], 1024)
        extra = s.context['extra_options']
        assert isinstance(extra, list)
        self.assertIn('-numa node,nodeid=1,cpus=2-3,memdev=m1', extra)
        self.assertIn('-smp 4', extra)
        self.assertNotIn('-nographic', extra)
        kvm = topology.accel_args('x86_64')[1] == 'kvm'
        self.assertEqual(s.context['no_kvm'], not kvm)
        if not kvm:         # this machine: no KVM that boots a guest
            self.assertIn('-accel tcg,thread=multi', extra)

    def test_kunit_arm64_has_its_dtb(self) -> None:
        cmd = jobs.kunit_command('arm64_2n_its1', Path('/k/Image.gz'))
        s = jobs.split(cmd, 'arm64')
        self.assertEqual(s.context['machine'], 'virt,gic-version=3,its=on')
        self.assertEqual(s.context['cpu'], 'cortex-a57')
        self.assertEqual(s.files['dtb'], topology.dtb(topology.get('arm64_2n_its1')))
        self.assertTrue(s.files['dtb'].is_file())

    def test_kvm(self) -> None:
        cmd = ['qemu-system-x86_64', '-machine', 'pc', '-cpu', 'max', '-smp', '4',
               '-accel', 'kvm', '-cpu', 'host', '-m', '1024', '-kernel', 'k', '-append', 'x']
        s = jobs.split(cmd, 'x86_64')
        self.assertIs(s.context['no_kvm'], False)
        self.assertEqual(s.context['extra_options'], ['-machine pc', '-smp 4'])

    def test_refused(self) -> None:
        with self.assertRaises(jobs.JobError):
            jobs.split(['qemu-system-aarch64', '-m', '1024'], 'x86_64')
        with self.assertRaises(jobs.JobError):
            jobs.split(['qemu-system-x86_64', '-append', 'a="b"'], 'x86_64')

    def test_lava_run_missing_says_how_to_install_it(self) -> None:
        with tempfile.TemporaryDirectory() as d, mock.patch.dict(os.environ, {'PATH': d}):
            with self.assertRaises(local.LavaRunError) as e:
                local.lava_run()
        self.assertIn('make deps', str(e.exception))
        self.assertIn('lava-dispatcher', str(e.exception))


def _lava_common_validate(definition: dict[str, Any]) -> None:
    """lava-server's check of a submitted job (lava_common.schemas.validate)."""
    schemas = importlib.import_module('lava_common.schemas')
    schemas.validate(definition, strict=True)


def kunit_py_run(tree_path: Path, name: str, kernel: Path,
                 timeout: int = 300) -> tuple[list[str], str]:
    """kunit.py's own QEMU command (kunit_kernel.py) booting kernel: the command and console.

    kunit.py exec would write test.log into the build dir: the kernel boots from a
    copy in a temporary one instead."""
    where = str(ktap.kunit_dir(tree_path))
    sys.path.insert(0, where)
    try:
        kunit_kernel = importlib.import_module('kunit_kernel')
        arch, ops = kunit_kernel._get_qemu_ops(str(QEMU_CONFIGS / f'{name}.py'), None, None)
    finally:
        sys.path.remove(where)
    with tempfile.TemporaryDirectory(prefix='kloc-kunit-direct-') as build:
        dest = Path(build) / arches.get(arch).kunit_image
        dest.parent.mkdir(parents=True)
        shutil.copyfile(kernel, dest)
        with contextlib.redirect_stdout(io.StringIO()):      # its "Running tests with:"
            proc = ops.start(['kunit.enable=1'], build)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        return [str(a) for a in proc.args], str(out)


class TemplatesTest(unittest.TestCase):
    def test_two_commands_at_once_download_lava_server_once(self) -> None:
        # The second used to download it again and remove the first one's
        # templates (rmtree, rename) while the first was reading them.
        if not shutil.which('lava-run'):
            self.skipTest(local.INSTALL_HINT)
        real = subprocess.run
        downloads = []

        def counting(cmd: Any, *args: Any, **kwargs: Any) -> Any:
            if list(cmd[:2]) == ['apt-get', 'download']:
                downloads.append(cmd)
            return real(cmd, *args, **kwargs)
        got: list[Path | BaseException] = []

        def fetch(cache: Path) -> None:
            try:
                got.append(device.templates(cache))
            except BaseException as e:      # reported below
                got.append(e)
        with tempfile.TemporaryDirectory() as d, \
                mock.patch.object(subprocess, 'run', counting):
            threads = [threading.Thread(target=fetch, args=(Path(d),)) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(len(got), 2)
            self.assertEqual(got[0], got[1])
            assert isinstance(got[0], Path)
            self.assertTrue((got[0] / device.DEVICE_TYPE_TEMPLATE).is_file())
        self.assertEqual(len(downloads), 1, downloads)


class CliTest(unittest.TestCase):
    def test_unknown_topology_writes_nothing(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, '-m', 'kloc', 'lava', '--kdir', d,
                                '--topologies', 'bogus', '--out', d], capture_output=True,
                               text=True, env=dict(os.environ, PYTHONPATH=str(TOOLS)))
            self.assertEqual(r.returncode, 2)
            self.assertEqual(os.listdir(d), [])


class LavaTest(unittest.TestCase):
    """The jobs of the built 6.12 kernels, through LAVA's own code."""

    tree: Tree
    tmp: Path
    lava_dir: Path
    jobs: list[local.JobFile]
    types: Path
    kunit: results.LavaKunit
    selftest: results.LavaSelftest
    selftest_job: str

    @classmethod
    def setUpClass(cls) -> None:
        if not shutil.which('lava-run'):
            raise unittest.SkipTest(local.INSTALL_HINT)
        tree = debian_tree('6.12')
        cache = cache_dir()
        missing = [str(p) for p in [jobs.kunit_image(tree, cache, a) for a in arches.ARCHES]
                   if not p.is_file()]
        if missing or not export.guests(tree):
            raise unittest.SkipTest(f'the 6.12 KUnit kernels and a guest are not all built '
                                    f'(make kunit, make guest): {", ".join(missing)}')
        cls.tree = tree
        cls.tmp = Path(tempfile.mkdtemp(prefix='kloc-test-lava-'))
        cls.lava_dir = cls.tmp / 'lava' / tree.label
        export.write(export.Request(tree, cache, cls.lava_dir, tuple(topology.TOPOLOGIES),
                                    300, 180, 1.0))
        cls.jobs = local.load_jobs(cls.lava_dir)
        cls.types = device.templates(cache)
        # One KUnit job and the kselftest job, run once for the tests that read them.
        k = local.run(cls.job(f'kunit-{X86}'), cls.lava_dir, cls.types)
        cls.kunit = results.kunit(k.log, tree.label, X86, ktap.kunit_dir(tree.path))
        # the x86_64 guest where there is one (the JUnit test names its topology)
        g = sorted(export.guests(tree), key=lambda x: x.arch != 'x86_64')[0]
        cls.selftest_job = f'kselftest-{g.arch}-{g.allocator}'
        t = local.run(cls.job(cls.selftest_job), cls.lava_dir, cls.types)
        cls.selftest = results.selftest(t.log, cls.job(cls.selftest_job).meta('topology'),
                                        g.name, g.allocator)

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def job(cls, name: str) -> local.JobFile:
        return next(j for j in cls.jobs if j.name == name)

    def test_a_job_per_topology_and_guest(self) -> None:
        names = {j.name for j in self.jobs}
        self.assertEqual(names, {f'kunit-{t}' for t in topology.TOPOLOGIES}
                         | {f'kselftest-{g.arch}-{g.allocator}' for g in export.guests(self.tree)})
        for j in self.jobs:
            images = j.definition['actions'][0]['deploy']['images']
            want = {'kernel', 'dtb'} if j.meta('kind') == 'kunit' and \
                topology.get(j.meta('topology')).arch == 'arm64' else \
                {'kernel', 'initrd'} if j.meta('kind') == 'kselftest' else {'kernel'}
            self.assertEqual(set(images), want, j.name)
            for im in images.values():
                f = session.image_file(j, 'kernel')
                self.assertTrue(f.is_file())
                self.assertRegex(im['sha256sum'], '^[0-9a-f]{64}$')

    def test_lava_servers_schema(self) -> None:
        for j in self.jobs:
            with self.subTest(job=j.name):
                _lava_common_validate(j.definition)

    def test_the_device_carries_the_topology(self) -> None:
        j = self.job(f'kunit-{X86}')
        dev = yamlio.load(device.render(self.lava_dir / export.DEVICE
                                        / f'{device.HOSTNAME}.jinja2', self.types, j.context))
        qemu = dev['actions']['boot']['methods']['qemu']['parameters']
        self.assertEqual(qemu['command'], 'qemu-system-x86_64')
        self.assertIn('-m 1024', qemu['options'])
        self.assertEqual(qemu['extra'], j.context['extra_options'])
        self.assertIn('-numa node,nodeid=0,cpus=0-1,memdev=m0', qemu['extra'])
        if j.context['no_kvm']:
            self.assertNotIn('-enable-kvm', qemu['options'])

    def test_lava_run_validates_every_job(self) -> None:
        local.validate_all(self.jobs, self.lava_dir, self.types)

    def test_kunit_job_matches_kunit_py(self) -> None:
        """The same kernel: LAVA's statuses are those of kunit.py's QEMU command."""
        j, lava = self.job(f'kunit-{X86}'), self.kunit
        self.assertEqual(lava.problems, [])
        kernel = session.image_file(j, 'kernel')
        cmd, console = kunit_py_run(self.tree.path, X86, kernel)
        self.assertEqual(cmd, jobs.kunit_command(X86, Path(cmd[5])),
                         'kunit.py builds its QEMU command differently from kunit_command()')
        direct = ktap.parse(console, ktap.kunit_dir(self.tree.path))
        direct.suites.append(runner.check_topology(direct, topology.get(X86)))
        self.assertTrue(direct.ok)
        self.assertEqual(compare.leaf_statuses(lava.run.doc), compare.leaf_statuses(direct))
        self.assertEqual(lava.log.linux_version(), results.linux_version(console))
        extra = j.context['extra_options']
        assert isinstance(extra, list)
        for opt in extra:
            self.assertIn(str(opt), lava.log.boot_command)

    def test_kselftest_job(self) -> None:
        s = self.selftest
        self.assertEqual(s.why, '')
        self.assertEqual(set(s.statuses.values()), {'PASS'})
        self.assertEqual(s.figures['pps_single'].unit, 'packets/s')
        assert s.record is not None
        self.assertEqual(s.figures['pps_total'].value, s.record['pps_total'])

    def test_junit_and_kcidb(self) -> None:
        """The package's own JUnit writer and a KCIDB v5.3 submission of the two runs."""
        o = session.Outcome([self.kunit], [self.selftest],
                            jobs={f'{self.kunit.run.kernel}.{X86}': self.job(f'kunit-{X86}').path,
                                  f'{self.selftest.guest}.{self.selftest.topology}':
                                  self.job(self.selftest_job).path})
        xml = junit.to_xml(o.junit_runs())
        self.assertIn(f'testsuite name="{self.tree.label}.{X86}"', xml)
        self.assertIn(f'name="single thread sends [{self.selftest.topology}]"', xml)
        doc: dict[str, Any] = lava_kcidb.submission(self.tree, o, kcidb.new_run_id())
        kcidb_schema.validate(doc)
        tests = {t['path']: t for t in doc['tests']}
        self.assertEqual(tests['kunit.percpu_locality.pcpu_kunit_counters_are_exact']['status'],
                         'PASS')
        self.assertEqual(tests['kloc.harness.kloc_topology.online_nodes']['status'], 'PASS')
        self.assertEqual(tests['lo_counters.pps_single']['number']['unit'], 'packets/s')
        self.assertEqual(tests['lo_counters.-exit-status']['status'], 'PASS')
        self.assertIn(f'LAVA {self.selftest.guest} on {X86}: a good run', session.render(o))
