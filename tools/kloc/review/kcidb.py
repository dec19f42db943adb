# SPDX-License-Identifier: GPL-2.0
"""A review as a KCIDB v5.3 submission (kcidb_io/schema/v05_03.py of kcidb-io), of the
records kcidb/record.py shares with lava/kcidb.py.

- Two checkouts: the base (patchset_hash "") and the base with the patch
  (the patchset's hash, by the schema's rule); an A/A review has one.
  Each has the base's git identity when the base is a git tree.
- Builds: a KUnit kernel per side and architecture, the loopback guest, and
  the arm64 guest of the ITS interrupt path.
- Tests: the MSI workload per ITS topology (its_msi: a boot test; its reads
  per interrupt, its_msi.<table>.local/remote, DONE; its_msi.remote.change
  on the patched side, FAIL where remote reads rose), and
  every KUnit case under kunit.<suite>.<case>, as its run's KTAP gave
  it; a crashed case FAILs with its log (the oops), a case the crash cut off
  is MISS. The harness's own checks (the topology check) are
  kloc.harness.<...>, not KUnit cases. Each run is a boot test: FAIL when
  the kernel printed no KTAP, and then every case the other side ran there
  is MISS. The loopback figures are DONE tests with test.number; their
  changes PASS, FAIL or are DONE by the verdict.
- Every id is "kloc:<run id>:...", the run id new for each report, so no
  two reviews, reruns or A/A repeats share one.
- A path component is a KUnit name as it is when that is a valid one, and
  otherwise encoded reversibly (path_component, component_name).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from kloc.bench.metrics import Difference, SideSummary, better_or_worse, verdict_words
from kloc.counting.plugin import PLUGIN_NAME, PLUGIN_VERSION
from kloc.errors import KlocError
from kloc.kcidb.record import BOOT, KUNIT_CONFIG, NO_KTAP_COMMENT, Record, build_id, \
    build_record, case_path, case_status, checkout_id, checkout_record, environment, excerpt, \
    guest_config, number, path_component, source_identity, submission as record_submission, \
    test_record
from kloc.its.figures import ABOUT, MSI_TABLES, Boots
from kloc.kunitpy import ktap, runner
from kloc.paths import QEMU_CONFIGS
from kloc.qemu import topology
from kloc.review import integrity
from kloc.review.patch_input import PatchInfo
from kloc.review.review import ALLOCATOR, NO_KTAP, ReviewOptions, ReviewOutcome, Statuses
from kloc.trees.sources import Tree

WORDS = ('improvement', 'regression')   # a better, a worse patched figure (as the report)
SIDES = ('base', 'patched')

_MAIL = re.compile(r'^From [0-9a-f]{40} ', re.MULTILINE)
_MESSAGE_ID = re.compile(r'^Message-ID:\s*<([^<>\s]+@[^<>\s]+)>', re.MULTILINE | re.IGNORECASE)


def split_mails(text: str) -> list[str]:
    """The patches of an mbox, each from its "From <sha>" line (the first from the top);
    a plain diff is one."""
    starts = [m.start() for m in _MAIL.finditer(text)]
    if not starts:
        return [text]
    starts[0] = 0
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


def patchset_hash(patch: PatchInfo) -> str:
    """The schema's rule: sha256 over each patch's sha256, newline-terminated, in order
    (sha256sum *.patch | cut -c-64 | sha256sum | cut -c-64)."""
    hashes = ''.join(hashlib.sha256(p.encode()).hexdigest() + '\n'
                     for p in split_mails(patch.text))
    return hashlib.sha256(hashes.encode()).hexdigest()


@dataclass
class KunitLogs:
    """What the run directory of one side's KUnit runs holds beyond the statuses."""
    consoles: dict[str, Path] = field(default_factory=dict)        # topology -> console
    cases: dict[tuple[str, str], ktap.Result] = field(default_factory=dict)
    tails: dict[str, list[str]] = field(default_factory=dict)      # runs with no KTAP


def kunit_logs(run_dir: Path, parser: Tree | None = None) -> KunitLogs:
    """The cases' logs and the consoles' tails of the runs in run_dir; a run that
    cannot be read again gives none (its console's path is still recorded). parser:
    the tree whose kunit.py parser reads them (runner.load_run)."""
    logs = KunitLogs()
    for meta in sorted(run_dir.glob('*.meta.json')):
        topo = meta.name.removesuffix('.meta.json')
        logs.consoles[topo] = meta.with_name(f'{topo}.console')
        try:
            r = runner.load_run(meta, parser)
        except (KlocError, OSError, ValueError, KeyError):
            continue
        if not r.doc.found:
            logs.tails[r.topology] = r.doc.trailing
        for suite in r.doc.suites:
            for path, leaf in suite.leaves():
                logs.cases[(r.topology, path)] = leaf
    return logs


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class _Ids:
    run_id: str
    aa: bool

    def checkout(self, side: str) -> str:
        return checkout_id(self.run_id, 'aa' if self.aa else side)

    def build(self, side: str, kind: str, arch: str) -> str:
        return build_id(self.checkout(side), kind, arch)

    def side(self, side: str) -> str:
        """The side in a test's id: an A/A review's sides share one build."""
        return side if self.aa else ''


# What the report, review.json and the KCIDB record say first of a review that ran
# with REVIEW_PACKAGE=1 on a patch that changes the package's tests (integrity.py).
PACKAGE_WARNING = 'REVIEW_PACKAGE=1: the patch changes the tests judging it'


def package_notice(o: ReviewOutcome) -> Record:
    """review.json's (and the patched checkout's) record of REVIEW_PACKAGE=1."""
    warning = f'{PACKAGE_WARNING}: the verdict is not the package\'s tests\' alone'
    return {'warning': warning, 'opted_in': integrity.OPT_IN,
            'changed': [{'file': t.path, 'what': t.what} for t in o.package]}


def _checkouts(o: ReviewOutcome, ids: _Ids) -> list[Record]:
    identity = source_identity(o.base)
    base_misc: Record = {'tree': str(o.base.path), 'tree_origin': o.base.origin,
                         'version': str(o.base.version), 'uncommitted_files': o.dirty,
                         'kloc_series': o.key.get('series', '')}
    if ids.aa or o.patch is None:
        return [checkout_record(ids.checkout('base'),
                                f'A/A: Linux {o.base.version} against itself', identity,
                                dict(base_misc, side='base and patched (A/A)'))]
    p = o.patch
    # REVIEW_PACKAGE=1: the first words of the comment, and the first of misc
    package: Record = {'review_package': package_notice(o)} if o.package else {}
    comment = f'{PACKAGE_WARNING}: {p.subject}' if o.package else p.subject
    patched = checkout_record(ids.checkout('patched'), comment, identity,
                              dict(package | base_misc, side='patched',
                                   tree=str(o.patched.path),
                                   reused_cached_tree=o.reused, patch_file=str(p.path),
                                   patch_sha256=p.sha256, patches=p.mails,
                                   patched_files=list(p.files)),
                              patchset_hash(p))
    m = _MESSAGE_ID.search(split_mails(p.text)[0].split('\n\n', 1)[0])
    if m:
        patched['message_id'] = m.group(1)
    return [checkout_record(ids.checkout('base'),
                            f'Linux {o.base.version} ({o.base.origin} tree)', identity,
                            dict(base_misc, side='base')),
            patched]


def _build(ids: _Ids, side: str, tree: Tree, kind: str, arch: str, config: str,
           **misc: object) -> Record:
    return build_record(ids.checkout(side), tree, kind, arch, config,
                        {'side': side, 'tree': str(tree.path)} | misc)


def _test(ids: _Ids, build: str, side: str, topo: str, path: str, status: str,
          env: Record, **fields: object) -> Record:
    return test_record(build, topo, path, status, env, ids.side(side), **fields)


def _kunit_tests(ids: _Ids, side: str, build: str, arch: str, mine: Statuses,
                 other: Statuses, logs: KunitLogs) -> list[Record]:
    out: list[Record] = []
    topos = sorted({t for t, _ in mine if topology.get(t).arch == arch})
    for topo in topos:
        console = logs.consoles.get(topo)
        env = environment(topo, runner='kunit.py exec',
                          qemu_config=str(QEMU_CONFIGS / f'{topo}.py'))
        where = {'console_log': str(console)} if console else {}
        if (topo, NO_KTAP) in mine:
            tail = logs.tails.get(topo, [])
            out.append(_test(ids, build, side, topo, BOOT, 'FAIL', env,
                             comment=NO_KTAP_COMMENT,
                             **({'log_excerpt': excerpt(tail)} if tail else {}),
                             misc={'kloc_status': mine[(topo, NO_KTAP)], **where}))
            for (t, case) in sorted(other):
                if t == topo and case != NO_KTAP:
                    out.append(_test(ids, build, side, topo, case_path(case), 'MISS',
                                     env, misc={'kloc_status': 'ABSENT', 'case': case,
                                                'why': 'the kernel did not boot'}))
            continue
        out.append(_test(ids, build, side, topo, BOOT, 'PASS', env, misc=where))
        for (t, case), status in sorted(mine.items()):
            if t != topo:
                continue
            misc: Record = {'kloc_status': status, 'case': case}
            fields: Record = {}
            leaf = logs.cases.get((topo, case))
            kstatus = case_status(status, case)
            if leaf is not None and leaf.reason:
                fields['comment'] = leaf.reason
            if leaf is not None and leaf.log and kstatus == 'FAIL':
                fields['log_excerpt'] = excerpt(leaf.log)
            out.append(_test(ids, build, side, topo, case_path(case), kstatus, env,
                             **fields, misc=dict(misc, **where)))
    return out


def _side_summary(s: SideSummary) -> Record:
    out: Record = {'statistic': 'median', 'ci_lo': _finite(s.ci.lo),
                   'ci_hi': _finite(s.ci.hi), 'ci_level': s.ci.level, 'runs': len(s.values),
                   'cv': _finite(s.cv)}
    return out


def _loopback_tests(o: ReviewOutcome, opts: ReviewOptions, ids: _Ids, side: str,
                    build: str) -> list[Record]:
    topo = opts.bench_topology
    env = environment(topo, qemu_command=o.qemu_command)
    out: list[Record] = []
    store_side = 'a' if side == 'base' else 'b'
    groups: list[tuple[str, list[Difference], int, str]] = [
        ('lo_counters', o.diffs, o.failed_runs.get(side, 0), str(opts.out / 'runs.jsonl'))]
    if o.counted:
        groups.append(('lo_counters.counted', o.counted.diffs,
                       len(o.counted.store.failed_runs(store_side)), str(o.counted.store.path)))
    for root, diffs, failed, results in groups:
        if not diffs and not failed:
            continue
        genv = env if root == 'lo_counters' else environment(
            topo, qemu_plugin=f'{PLUGIN_NAME} {PLUGIN_VERSION}',
            accel='tcg')
        good = len((diffs[0].a if side == 'base' else diffs[0].b).values) if diffs else 0
        out.append(_test(ids, build, side, topo, root, 'FAIL' if failed else 'PASS', genv,
                         comment=f'{good} good runs, {failed} failed (a panic, a hang, '
                                 'or no result); each run boots a fresh guest',
                         misc={'side': side, 'good_runs': good, 'failed_runs': failed,
                               'results_file': results}))
        for d in diffs:
            s = d.a if side == 'base' else d.b
            path = f'{root}.{path_component(d.figure.name)}'
            out.append(_test(ids, build, side, topo, path, 'DONE', genv,
                             comment=d.figure.title, number=number(s.median, d.figure.unit),
                             misc=_side_summary(s) | {'side': side, 'kind': d.figure.kind,
                                                      'unit': d.figure.unit}))
            if side == 'patched':
                out.append(_change_test(ids, build, side, topo, path, d, genv, opts))
    return out


def _change_test(ids: _Ids, build: str, side: str, topo: str, path: str, d: Difference,
                 env: Record, opts: ReviewOptions) -> Record:
    # No significant difference passes only with the power to see the change of
    # interest; without it (and for details, not tested) the test is DONE.
    status = 'FAIL' if better_or_worse(d) == 'worse' else \
        {'detail': 'DONE', 'inconclusive': 'DONE'}.get(d.verdict, 'PASS')
    fields: Record = {}
    if d.absolute is not None:     # a count near zero: its change, in its unit
        fields['number'] = number(d.absolute.change, d.figure.unit)
    elif math.isfinite(d.change_pct):
        fields['number'] = number(d.change_pct, '%')
    return _test(ids, build, side, topo, f'{path}.change', status, env,
                 comment=f'{d.figure.title}: patched against base', **fields,
                 misc={'kind': d.figure.kind, 'change_pct': _finite(d.change_pct),
                       'change_ci_lo': _finite(d.change_ci.lo),
                       'change_ci_hi': _finite(d.change_ci.hi), 'test': d.test.name,
                       'p': d.test.p, 'p_holm': d.p_adjusted, 'alpha': opts.alpha,
                       'detectable_change_pct': _finite(d.detectable_pct),
                       'change_of_interest_pct': d.interest_pct, 'verdict': d.verdict,
                       'verdict_words': verdict_words(d, 'patched', WORDS)})


def submission(o: ReviewOutcome, opts: ReviewOptions, run_id: str) -> Record:
    """The review as one KCIDB v5.3 submission; run_id: new_run_id(), made once per
    report (tests give their own)."""
    aa = opts.aa or o.patch is None
    ids = _Ids(run_id, aa)
    trees = {'base': o.base, 'patched': o.base if aa else o.patched}
    builds: list[Record] = []
    tests: list[Record] = []
    if opts.kunit and not aa:
        for side in SIDES:
            other = SIDES[1 - SIDES.index(side)]
            run_dir = opts.out / 'kunit' / side      # as review.run lays the runs out
            logs = kunit_logs(run_dir, o.base)     # both sides: the base's parser
            mine = o.kunit_statuses.get(side, {})
            for arch in sorted({topology.get(t).arch for t in opts.topologies}):
                b = _build(ids, side, trees[side], 'kunit', arch, KUNIT_CONFIG,
                           build_log=str(run_dir / f'build-{arch}.log'))
                builds.append(b)
                tests += _kunit_tests(ids, side, str(b['id']), arch, mine,
                                      o.kunit_statuses.get(other, {}), logs)
    arch = topology.get(opts.bench_topology).arch
    config = guest_config(ALLOCATOR, arch)
    for side in SIDES if opts.bench else ():
        if side == 'base' or not aa:
            builds.append(_build(ids, side, trees[side], 'guest', arch, config))
        tests += _loopback_tests(o, opts, ids, side, ids.build(side, 'guest', arch))
    for side in SIDES if o.its else ():
        its_build = ids.build(side, 'guest', 'arm64')
        if its_build not in {x['id'] for x in builds}:
            builds.append(_build(ids, side, trees[side], 'guest', 'arm64',
                                 guest_config(ALLOCATOR, 'arm64')))
        tests += _its_tests(o, ids, side, its_build)
    return record_submission(_checkouts(o, ids), builds, tests)


ITS_UNIT = 'reads/interrupt'


def _its_tests(o: ReviewOutcome, ids: _Ids, side: str, build: str) -> list[Record]:
    """The MSI workload's boot per ITS topology (FAIL: no figures), its reads per
    interrupt per table, local and remote (DONE, exact counts), and on the patched
    side the change in remote reads (FAIL where they rose)."""
    out: list[Record] = []
    for topo, sides in sorted(o.its.items()):
        boots, base = sides.get(side), sides.get('base')
        env = environment(topo, accel='tcg', device='virtio-rng-pci')
        if not isinstance(boots, Boots):
            out.append(_test(ids, build, side, topo, 'its_msi', 'FAIL', env,
                             comment='the MSI workload gave no figures',
                             log_excerpt=excerpt(str(boots).splitlines())))
            continue
        f = boots.first
        out.append(_test(ids, build, side, topo, 'its_msi', 'PASS', env,
                         comment=f'{len(boots.boots)} boots of {f.requests} requests: exact '
                                 'counts of QEMU\'s ITS (no cache); the numbers are the '
                                 'first boot\'s' + ('' if boots.agree else
                                                    ', and the boots differ'),
                         misc=boots.to_json()))
        for table in MSI_TABLES:
            for where, value in zip(('local', 'remote'), f.per_interrupt(table)):
                out.append(_test(ids, build, side, topo, f'its_msi.{table}.{where}', 'DONE',
                                 env, comment=f'{ABOUT[table]}: {where} reads per interrupt',
                                 number=number(value, ITS_UNIT)))
        out.append(_test(ids, build, side, topo, 'its_msi.cmd.remote', 'DONE', env,
                         comment=f'{ABOUT["cmd"]}: commands read remotely in the window',
                         number=number(f.cmd.remote, 'commands')))
        if side == 'patched' and isinstance(base, Boots):
            cmd_rose = max(x.cmd.remote for x in boots.boots) > \
                max(x.cmd.remote for x in base.boots)
            out.append(_test(ids, build, side, topo, 'its_msi.cmd.remote.change',
                             'FAIL' if cmd_rose else 'PASS', env,
                             comment='commands the ITS read remotely in the window, patched '
                                     'against base (FAIL where a patched boot read more)',
                             number=number(f.cmd.remote - base.first.cmd.remote,
                                           'commands')))
            rose = max(x.remote for x in boots.boots) > max(x.remote for x in base.boots)
            out.append(_test(ids, build, side, topo, 'its_msi.remote.change',
                             'FAIL' if rose else 'PASS', env,
                             comment='remote ITS table reads per interrupt, patched against '
                                     'base, the means over the boots (FAIL where a patched '
                                     'boot read more remotely than every base boot)',
                             number=number(boots.remote - base.remote, ITS_UNIT)))
    return out
