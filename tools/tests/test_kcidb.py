# SPDX-License-Identifier: GPL-2.0
"""The review's KCIDB v5.3 submission, and the validator written from the schema.

The KUnit halves of the reviews are real runs: the golden consoles of a
passing, a failing (mutant), a crashing and a non-booting kernel, laid out
as review.run leaves them and read back by kunit.py's own parser. The
loopback figures are made-up records (no real results file is kept), put
through the real comparison.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from kloc.bench import metrics
from kloc.guests import guest
from kloc.kunitpy import ktap, runner
from kloc.qemu import topology
from kloc.kcidb import record, schema as kcidb_schema
from kloc.kcidb.schema import PATH_RE, SchemaError
from kloc.review import kcidb, patch_input, review
from kloc.trees.sources import Tree
from kloc.paths import PACKAGE_ROOT
from kloc.version import KernelVersion

from .helpers import DATA, debian_tree, stock_parser

NOOP = PACKAGE_ROOT / 'selftests/lo_counters/review/noop.patch'
SLOW = PACKAGE_ROOT / 'selftests/lo_counters/review/slow-xmit.patch'
TOPO = 'arm64_2n_its1'
BENCH = 'x86_64_2n'
RUN = '20250101T000000Z-0000test'
PASSING, FAILING = 'its-6.12-its1-pass.console', 'mutant-numa-unaware-lvl2.console'
CRASHING, NOT_BOOTING = 'its-6.12-crash.console', 'no-boot.console'
VERSION = KernelVersion(6, 12, 117)

# Hypothesis caches a Unicode table under its home: out of the source tree.
HYPOTHESIS_HOME = Path(tempfile.gettempdir()) / 'kloc-hypothesis'
set_hypothesis_home_dir(str(HYPOTHESIS_HOME))  # type: ignore[no-untyped-call]
SETTINGS = settings(max_examples=200, deadline=None, database=None)


def submission(o: review.ReviewOutcome, opts: review.ReviewOptions,
               run_id: str) -> dict[str, Any]:
    doc: dict[str, Any] = kcidb.submission(o, opts, run_id)
    return doc


def loopback_diffs(slowdown: float) -> list[metrics.Difference]:
    rng = random.Random(3)

    def rec(scale: float) -> dict[str, object]:
        p1, pn = 8e4 * scale * rng.gauss(1, 0.01), 1.4e5 * scale * rng.gauss(1, 0.01)
        return {'pps_single': p1, 'pps_total': pn, 'scaling_efficiency': pn / (4 * p1),
                'per_cpu': [{'cpu': c, 'node': c // 2, 'pps': pn / 4} for c in range(4)]}
    return metrics.compare([rec(1) for _ in range(10)],
                           [rec(1 - slowdown) for _ in range(10)], 0.05)


def options(out: Path, kunit: bool = True, aa: bool = False) -> review.ReviewOptions:
    return review.ReviewOptions((TOPO,), BENCH, 10, 1.0, 0.05, 60, 1, out, kunit=kunit, aa=aa)


def loopback_outcome(base: Tree, patch: Path | None = SLOW,
                     failed: dict[str, int] | None = None) -> review.ReviewOutcome:
    g = guest.Guest(base, 'x86_64', review.ALLOCATOR)
    return review.ReviewOutcome(
        base, base, patch_input.load(patch) if patch else None, diffs=loopback_diffs(0.05),
        failed_runs=failed or {'base': 0, 'patched': 0},
        qemu_command=guest.qemu_command(g, Path('/x/initramfs.gz'), topology.get(BENCH)))


def tests_of(doc: dict[str, Any], side: str) -> list[dict[str, Any]]:
    """The tests of one checkout (side), via their builds."""
    builds = {b['id'] for b in doc['builds'] if b['checkout_id'].endswith(f':{side}')}
    return [t for t in doc['tests'] if t['build_id'] in builds]


def by_path(tests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {t['path']: t for t in tests}
    assert len(out) == len(tests), 'a path twice under one checkout and topology'
    return out


class Paths(unittest.TestCase):
    def test_kunit_names_kept_others_encoded(self) -> None:
        self.assertEqual(record.case_path('irq_gic_v3_its_placement.its_kunit_boot_its_on_node'),
                         'kunit.irq_gic_v3_its_placement.its_kunit_boot_its_on_node')
        self.assertNotEqual(record.path_component('node 0'), record.path_component('node_0'))
        self.assertEqual(record.path_component('node_0'), 'node_0')
        self.assertEqual(record.path_component('node 0'), '-node-0')
        self.assertEqual(record.path_component('PAGES_MAX on node-1'),
                         '-PAGES__MAX-on-node_2d1')
        self.assertEqual(record.path_component('-1'), '-_2d1')
        self.assertEqual(record.case_path('kloc_topology.online_nodes'),
                         'kloc.harness.kloc_topology.online_nodes')

    @SETTINGS
    @given(st.text())
    def test_a_component_is_valid_and_reversible(self, name: str) -> None:
        c = record.path_component(name)
        self.assertRegex(c, r'^[A-Za-z0-9_-]+$')
        self.assertEqual(record.component_name(c), name)

    @SETTINGS
    @given(st.lists(st.text(), min_size=1), st.lists(st.text(), min_size=1))
    def test_paths_are_valid_and_collide_only_when_equal(self, a: list[str],
                                                         b: list[str]) -> None:
        pa, pb = record.test_path(*a), record.test_path(*b)
        self.assertTrue(PATH_RE.fullmatch(pa), pa)
        self.assertEqual(pa == pb, a == b)


class PatchsetHash(unittest.TestCase):
    def sha256sum(self, *files: Path) -> str:
        """The schema's own recipe: sha256sum *.patch | cut -c-64 | sha256sum | cut -c-64"""
        r = subprocess.run(['sh', '-c', 'sha256sum "$@" | cut -c-64 | sha256sum | cut -c-64',
                            'sh', *map(str, files)], check=True, capture_output=True, text=True)
        return r.stdout.strip()

    def test_one_patch_and_an_mbox_series(self) -> None:
        self.assertEqual(kcidb.patchset_hash(patch_input.load(SLOW)), self.sha256sum(SLOW))
        with tempfile.TemporaryDirectory() as d:
            mbox = Path(d) / 'series.mbox'
            mbox.write_bytes(NOOP.read_bytes() + SLOW.read_bytes())
            p = patch_input.load(mbox)
            self.assertEqual(p.mails, 2)
            self.assertEqual(kcidb.split_mails(p.text), [NOOP.read_text(), SLOW.read_text()])
            self.assertEqual(kcidb.patchset_hash(p), self.sha256sum(NOOP, SLOW))


class SourceIdentity(unittest.TestCase):
    def test_a_git_tree_and_one_that_is_not(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / 'Makefile').write_text('VERSION = 6\nPATCHLEVEL = 12\n')

            def git(*args: str) -> str:
                return subprocess.run(['git', '-C', d, '-c', 'user.name=t', '-c',
                                       'user.email=t@example.org', *args], check=True,
                                      capture_output=True, text=True).stdout.strip()
            git('init', '-q', '-b', 'main')
            git('add', 'Makefile')
            git('commit', '-q', '-m', 'base')
            git('remote', 'add', 'origin', 'https://user:secret@git.kernel.org/pub/scm/linux/'
                'kernel/git/netdev/net-next.git')
            tree = Tree(root, VERSION, 'kdir')
            ident = record.source_identity(tree)
            self.assertEqual(ident['git_commit_hash'], git('rev-parse', 'HEAD'))
            self.assertEqual(ident['tree_name'], 'net-next')
            self.assertEqual(ident['git_repository_branch'], 'main')
            self.assertEqual(ident['git_repository_url'], 'https://git.kernel.org/pub/scm/'
                             'linux/kernel/git/netdev/net-next.git')
            doc = submission(loopback_outcome(tree), options(root / 'out', False), RUN)
            kcidb_schema.validate(doc)
            for c in doc['checkouts']:   # the patched one is the same commit, plus the patch
                self.assertEqual(c['git_commit_hash'], ident['git_commit_hash'])
            self.assertNotIn('secret', json.dumps(doc))
            shutil.rmtree(root / '.git')
            self.assertEqual(record.source_identity(tree), {})
        self.assertEqual(record.tree_name('https://git.kernel.org/pub/scm/linux/kernel/git/'
                                          'torvalds/linux.git'), 'mainline')


class Reviews(unittest.TestCase):
    """Submissions of reviews whose KUnit runs are real ones."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.out = Path(self.tmp.name) / 'out'
        self.base = debian_tree('6.12')
        self.parser = stock_parser()

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def submission(self, base_console: str, patched_console: str,
                   failed: dict[str, int] | None = None) -> dict[str, Any]:
        for side, console in (('base', base_console), ('patched', patched_console)):
            run = self.out / 'kunit' / side
            run.mkdir(parents=True)
            shutil.copy(DATA / console, run / f'{TOPO}.console')
            (run / f'{TOPO}.meta.json').write_text(json.dumps(
                {'kernel': 'linux-6.12', 'topology': TOPO, 'seconds': 1.0,
                 'kunit_py_exit': 0, 'kunit_dir': str(self.parser)}))
        o = loopback_outcome(self.base, failed=failed)
        o.patched = Tree(Path(self.tmp.name) / 'patched', self.base.version, 'review')
        o.kunit_statuses = {s: review.statuses(self.out / 'kunit' / s)
                            for s in ('base', 'patched')}
        o.kunit_changes, o.kunit_totals = review.compare_statuses(
            o.kunit_statuses['base'], o.kunit_statuses['patched'])
        doc = submission(o, options(self.out), RUN)
        kcidb_schema.validate(doc)
        json.dumps(doc, allow_nan=False)
        return doc

    def kunit(self, doc: dict[str, Any], side: str) -> dict[str, dict[str, Any]]:
        return by_path([t for t in tests_of(doc, side) if ':kunit-' in t['build_id']])

    def test_passing(self) -> None:
        doc = self.submission(PASSING, PASSING)
        base, patched = doc['checkouts']
        self.assertEqual((base['patchset_hash'], patched['patchset_hash']),
                         ('', kcidb.patchset_hash(patch_input.load(SLOW))))
        self.assertNotIn('git_commit_hash', base)          # a Debian tree is no git tree
        self.assertEqual(doc['version'], {'major': 5, 'minor': 3})
        for side in ('base', 'patched'):
            k = self.kunit(doc, side)
            self.assertEqual({t['status'] for t in k.values()}, {'PASS'})
            self.assertIn('kunit.irq_gic_v3_its_placement.its_kunit_probe_places_all_on_node.'
                          '-64K-flat-on-node-0', k)
            self.assertIn('boot', k)
            harness = [p for p in k if p.startswith('kloc.harness.')]
            self.assertEqual(harness, ['kloc.harness.kloc_topology.its_numa_node_from_dtb',
                                       'kloc.harness.kloc_topology.online_nodes'])
            self.assertFalse([p for p in k if 'kloc_topology' in p and
                              p.startswith('kunit.')])
            for t in k.values():
                self.assertEqual(t['environment']['misc']['topology'], TOPO)
                self.assertEqual(t['environment']['misc']['qemu'], 'qemu-system-aarch64')
                self.assertEqual(t['environment']['compatible'], ['linux,dummy-virt'])
            lo = by_path([t for t in tests_of(doc, side) if ':guest-' in t['build_id']])
            single = lo['lo_counters.pps_single']
            self.assertEqual(single['status'], 'DONE')
            self.assertEqual(set(single['number']), {'value', 'unit', 'prefix'})
            self.assertEqual((single['number']['unit'], single['number']['prefix']),
                             ('packets/s', 'metric'))
            self.assertNotIn('unit', lo['lo_counters.scaling_efficiency']['number'])
            self.assertEqual(lo['lo_counters']['status'], 'PASS')
            self.assertIn('-numa', single['environment']['misc']['qemu_command'])
        change = by_path(tests_of(doc, 'patched'))['lo_counters.pps_single.change']
        self.assertEqual((change['status'], change['number']['unit']), ('FAIL', '%'))

    def test_failing(self) -> None:
        doc = self.submission(PASSING, FAILING, failed={'base': 0, 'patched': 2})
        base, patched = self.kunit(doc, 'base'), self.kunit(doc, 'patched')
        failed = [p for p, t in patched.items() if t['status'] == 'FAIL']
        self.assertTrue(failed)
        self.assertTrue(any('its_kunit_probe_places_all_on_node' in p for p in failed))
        for p in failed:      # one checkout each: the case passed on the base
            self.assertEqual(base[p]['status'], 'PASS')
            self.assertIn('log_excerpt', patched[p])
        lo = by_path([t for t in tests_of(doc, 'patched') if t['path'] == 'lo_counters'])
        self.assertEqual(lo['lo_counters']['status'], 'FAIL')
        self.assertEqual(lo['lo_counters']['misc']['failed_runs'], 2)

    def test_crashing(self) -> None:
        doc = self.submission(PASSING, CRASHING)
        k = self.kunit(doc, 'patched')
        crashed = k['kunit.irq_gic_v3_its_alloc_failure.its_kunit_probe_fails_cleanly']
        self.assertEqual(crashed['status'], 'FAIL')
        self.assertEqual(crashed['misc']['kloc_status'], 'CRASHED')
        self.assertIn('Unable to handle kernel NULL pointer dereference', crashed['log_excerpt'])
        self.assertIn('Call trace:', crashed['log_excerpt'])
        self.assertEqual(k['kunit.irq_gic_v3_its_alloc_failure.its_kunit_probe_fails_cleanly.'
                           '-64K-flat']['status'], 'PASS')
        never = [t for t in k.values() if 'never ran' in t['misc'].get('case', '')]
        self.assertEqual(len(never), 3)
        self.assertEqual({t['status'] for t in never}, {'MISS'})
        self.assertNotIn('ERROR', {t['status'] for t in doc['tests']})
        self.assertEqual(k['boot']['status'], 'PASS')

    def test_not_booting(self) -> None:
        doc = self.submission(PASSING, NOT_BOOTING)
        builds = [b for b in doc['builds'] if b['checkout_id'].endswith(':patched')]
        self.assertEqual({b['status'] for b in builds}, {'PASS'})     # it built
        self.assertTrue(any(b['id'].endswith(':kunit-arm64') for b in builds))
        base, patched = self.kunit(doc, 'base'), self.kunit(doc, 'patched')
        self.assertEqual(patched['boot']['status'], 'FAIL')
        self.assertIn('Unable to mount root fs', patched['boot']['log_excerpt'])
        self.assertEqual(base['boot']['status'], 'PASS')
        self.assertEqual(set(patched), set(base))
        self.assertEqual({t['status'] for p, t in patched.items() if p != 'boot'}, {'MISS'})

    def test_ids_are_new_for_each_run(self) -> None:
        doc = self.submission(PASSING, CRASHING)
        o = loopback_outcome(self.base)
        again = submission(o, options(self.out, False), record.new_run_id())
        ids = {o['id'] for kind in ('checkouts', 'builds', 'tests') for o in doc[kind]}
        ids2 = {o['id'] for kind in ('checkouts', 'builds', 'tests') for o in again[kind]}
        self.assertFalse(ids & ids2)
        self.assertTrue(all(i.startswith(f'kloc:{RUN}:') for i in ids))
        aa = [submission(loopback_outcome(self.base, None), options(self.out, False, True),
                         record.new_run_id()) for _ in range(2)]
        for doc in aa:
            kcidb_schema.validate(doc)
            self.assertEqual(len(doc['checkouts']), 1)
            self.assertEqual(doc['checkouts'][0]['patchset_hash'], '')
        self.assertNotEqual(aa[0]['checkouts'][0]['id'], aa[1]['checkouts'][0]['id'])

    def test_the_harness_suite_is_the_runners(self) -> None:
        doc = ktap.parse((DATA / PASSING).read_text(), self.parser)
        self.assertIn(runner.check_topology(doc, topology.get(TOPO)).name,
                      record.HARNESS_SUITES)


class Validator(unittest.TestCase):
    """What the validator refuses, on a valid submission (loopback only) spoilt once."""

    good: dict[str, Any]

    @classmethod
    def setUpClass(cls) -> None:
        base = Tree(Path('/nonexistent/linux-6.12'), VERSION, 'debian')
        cls.good = submission(loopback_outcome(base), options(Path('/nonexistent'), False),
                              RUN)

    def spoilt(self, change: Any, *wanted: str, complete: bool = True) -> None:
        doc = copy.deepcopy(self.good)
        change(doc)
        found = kcidb_schema.problems(doc, complete)
        self.assertTrue(found, 'accepted')
        for w in wanted:
            self.assertTrue(any(w in p for p in found), f'{w!r} not in {found}')
        with self.assertRaises(SchemaError):
            kcidb_schema.validate(doc, complete)

    def test_the_good_one_passes(self) -> None:
        self.assertEqual(kcidb_schema.problems(self.good), [])

    def test_a_missing_required_field(self) -> None:
        self.spoilt(lambda d: d['tests'][0].pop('build_id'), "tests[0]: 'build_id' is required")
        self.spoilt(lambda d: d['checkouts'][0].pop('origin'), "'origin' is required")
        self.spoilt(lambda d: d.pop('version'), "'version' is required")

    def test_a_bad_status(self) -> None:
        self.spoilt(lambda d: d['tests'][0].update(status='CRASHED'), 'tests[0].status')
        self.spoilt(lambda d: d['builds'][0].update(status='pass'), 'builds[0].status')

    def test_a_colliding_id(self) -> None:
        def twice(d: dict[str, Any]) -> None:
            d['tests'].append(dict(d['tests'][0], status='FAIL'))
        self.spoilt(twice, 'is used by another of the tests')
        self.spoilt(lambda d: d['builds'].append(dict(d['builds'][0])),
                    'is used by another of the builds')

    def test_a_bad_path(self) -> None:
        for path in ('kunit.node 0', 'kunit..case', 'kunit.', '.kunit', 'kunit.a/b'):
            self.spoilt(lambda d: d['tests'][0].update(path=path), 'tests[0].path')

    def test_bad_ids_and_references(self) -> None:
        self.spoilt(lambda d: d['tests'][0].update(id='no-origin'), 'tests[0].id')
        self.spoilt(lambda d: d['tests'][0].update(id='other:x'), 'does not start with its '
                    'origin')
        self.spoilt(lambda d: d['tests'][0].update(build_id='kloc:nosuch'), 'none of the builds')
        self.spoilt(lambda d: d['builds'][0].update(checkout_id='kloc:nosuch'),
                    'none of the checkouts')
        doc = copy.deepcopy(self.good)
        doc['tests'][0]['build_id'] = 'kloc:sent-elsewhere'
        self.assertEqual(kcidb_schema.problems(doc, complete=False), [])

    def test_bad_numbers_and_versions(self) -> None:
        t = next(i for i, t in enumerate(self.good['tests']) if 'number' in t)
        self.spoilt(lambda d: d['tests'][t]['number'].update(value='3'), 'number.value')
        self.spoilt(lambda d: d['tests'][t]['number'].update(value=float('nan')),
                    'number.value')
        self.spoilt(lambda d: d['tests'][t]['number'].update(prefix='si'), 'number.prefix')
        self.spoilt(lambda d: d['tests'][t]['number'].pop('value'), "'value' is required")
        self.spoilt(lambda d: d['tests'][t]['number'].update(scale=1), "'scale' is not")
        self.spoilt(lambda d: d['version'].update(major=4), 'version.major')
        self.spoilt(lambda d: d['version'].update(minor=4), 'version.minor')

    def test_other_rules(self) -> None:
        self.spoilt(lambda d: d['builds'][0].update(valid=True), "'valid' is not a property")
        self.spoilt(lambda d: d['checkouts'][0].update(patchset_hash='abc'), 'patchset_hash')
        self.spoilt(lambda d: d['checkouts'][0].update(git_commit_hash='A' * 40),
                    'git_commit_hash')
        self.spoilt(lambda d: d['tests'][0].update(log_excerpt='x' * 16385), 'log_excerpt')
        self.spoilt(lambda d: d['tests'][0].update(comment='a\0b'), 'NUL')
        self.spoilt(lambda d: d['tests'][0].update(start_time='yesterday'), 'date-time')
        self.spoilt(lambda d: d['tests'][0]['environment'].update(compatible=['a b']),
                    'compatible[0]')
        self.spoilt(lambda d: d['builds'][0].update(architecture='x86-64'), 'architecture')
        doc = copy.deepcopy(self.good)
        doc['tests'][0].update(start_time='2025-01-01T00:00:00.5+00:00',
                               misc={'nul': 'a\0b'})
        self.assertEqual(kcidb_schema.problems(doc), [])


if __name__ == '__main__':
    unittest.main()
