# SPDX-License-Identifier: GPL-2.0
"""LAVA's results as a KCIDB v5.3 submission, with review/kcidb.py's own functions.

lava/ and review/ are siblings (layer 7) and may not import each other:
this module (layer 8) puts them together. The records are those kcidb.py
makes of a review's base side, from LAVA's results instead of kunit.py's:

- one checkout (the tree; its git identity where it is a git tree);
- a KUnit build per architecture, a guest build per guest kernel;
- per KUnit job a boot test and every case under kunit.<suite>.<case>
  (kcidb.case_path), the harness's checks under kloc.harness; a crashed
  case FAILs, one a crash cut off is MISS;
- per kselftest job lo_counters (PASS for a good run), its TAP cases and
  exit status, and each figure as a DONE test with its number and unit.
Every test's environment is the topology's (kcidb.environment), with the
LAVA job that ran it.
"""

from __future__ import annotations

from pathlib import Path

from kloc.guests import guest
from kloc.kunit import ktap
from kloc.lava import results
from kloc.lava.session import Outcome
from kloc.qemu import topology
from kloc.review import kcidb, kcidb_schema
from kloc.trees.sources import Tree

Record = dict[str, object]
_STATUS = {'PASS': 'PASS', 'FAIL': 'FAIL', 'SKIP': 'SKIP', 'CRASHED': 'FAIL'}
RUNNER = 'lava-run (Debian lava-dispatcher), device type qemu'


def _test(build: str, topo: str, path: str, status: str, env: Record,
          **fields: object) -> Record:
    return {'id': f'{build}:{topo}:{path}', 'build_id': build, 'origin': kcidb.ORIGIN,
            'path': path, 'status': status, 'environment': env, **fields}


def _kunit_tests(build: str, k: results.LavaKunit, job: Path) -> list[Record]:
    topo, doc = k.run.topology, k.run.doc
    env = kcidb.environment(topo, runner=RUNNER, lava_job=str(job))
    if not doc.found:
        return [_test(build, topo, 'boot', 'FAIL', env,
                      comment='the kernel printed no KTAP: it did not boot, or hung before '
                              'KUnit', log_excerpt=kcidb.excerpt(k.log.console[-40:]))]
    out = [_test(build, topo, 'boot', 'PASS', env)]
    for suite in doc.suites:
        for path, leaf in suite.leaves():
            status = _STATUS[leaf.status.value]
            if leaf.status == ktap.Status.CRASHED and \
                    kcidb.NEVER_RAN.fullmatch(path.rsplit('.', 1)[-1]):
                status = 'MISS'
            fields: Record = {'misc': {'kloc_status': leaf.status.value, 'case': path}}
            if leaf.reason:
                fields['comment'] = leaf.reason
            if leaf.log and status == 'FAIL':
                fields['log_excerpt'] = kcidb.excerpt(leaf.log)
            out.append(_test(build, topo, kcidb.case_path(path), status, env, **fields))
    return out


def _number(f: results.Figure) -> Record:
    n: Record = {'value': f.value}
    if f.unit:
        n.update(unit=f.unit, prefix='metric')
    return n


def _selftest_tests(build: str, s: results.LavaSelftest, job: Path) -> list[Record]:
    env = kcidb.environment(s.topology, runner=RUNNER, lava_job=str(job))
    root = 'lo_counters'
    out = [_test(build, s.topology, root, 'PASS' if s.ok else 'FAIL', env,
                 comment=s.why or 'one boot of the guest, run by LAVA')]
    for name, status in s.statuses.items():
        out.append(_test(build, s.topology, kcidb.test_path(root, name),
                         _STATUS.get(status, 'ERROR'), env))
    for name, f in s.figures.items():
        out.append(_test(build, s.topology, kcidb.test_path(root, name), 'DONE', env,
                         number=_number(f)))
    return out


def submission(tree: Tree, outcome: Outcome, run_id: str) -> Record:
    """The LAVA run as one KCIDB v5.3 submission; run_id: kcidb.new_run_id()."""
    checkout = f'{kcidb.ORIGIN}:{run_id}:lava'
    builds: dict[str, Record] = {}
    tests: list[Record] = []

    def build(kind: str, arch: str, config: str) -> str:
        bid = f'{checkout}:{kind}-{arch}'
        builds.setdefault(bid, {'id': bid, 'checkout_id': checkout, 'origin': kcidb.ORIGIN,
                                'architecture': arch, 'config_name': config, 'status': 'PASS',
                                'comment': f'Linux {tree.version} {kind} kernel, {arch}',
                                'misc': {'tree': str(tree.path)}})
        return bid

    for k in outcome.kunit:
        arch = topology.get(k.run.topology).arch
        job = outcome.jobs[f'{k.run.kernel}.{k.run.topology}']
        tests += _kunit_tests(build('kunit', arch, 'kunit'), k, job)
    for s in outcome.selftests:
        arch = topology.get(s.topology).arch
        config = 'tinyconfig+' + '+'.join(p.stem for p in guest.fragments(s.allocator))
        job = outcome.jobs[f'{s.guest}.{s.topology}']
        tests += _selftest_tests(build(f'guest-{s.allocator}', arch, config), s, job)
    doc: Record = {
        'version': {'major': kcidb_schema.MAJOR, 'minor': kcidb_schema.MINOR},
        'checkouts': [{'id': checkout, 'origin': kcidb.ORIGIN, 'patchset_hash': '',
                       'comment': f'Linux {tree.version} ({tree.origin} tree), run by LAVA',
                       'valid': True, **kcidb.source_identity(tree),
                       'misc': {'tree': str(tree.path), 'version': str(tree.version)}}],
        'builds': list(builds.values()),
        'tests': tests,
    }
    kcidb_schema.validate(doc)
    return doc
