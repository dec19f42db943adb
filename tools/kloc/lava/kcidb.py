# SPDX-License-Identifier: GPL-2.0
"""LAVA's results as a KCIDB v5.3 submission, of the records kcidb/record.py shares
with review/kcidb.py: those it makes of a review's base side, from LAVA's
results instead of kunit.py's.

- one checkout (the tree; its git identity where it is a git tree);
- a KUnit build per architecture, a guest build per guest kernel;
- per KUnit job a boot test and every case under kunit.<suite>.<case>, the
  harness's checks under kloc.harness; a crashed case FAILs, one a crash cut
  off is MISS;
- per kselftest job lo_counters (PASS for a good run), its TAP cases and
  exit status, and each figure as a DONE test with its number and unit.
Every test's environment is the topology's, with the LAVA job that ran it.
"""

from __future__ import annotations

from pathlib import Path

from kloc.kcidb import record, schema
from kloc.kcidb.record import Record
from kloc.lava import results
from kloc.lava.session import Outcome
from kloc.qemu import topology
from kloc.trees.sources import Tree

RUNNER = 'lava-run (Debian lava-dispatcher), device type qemu'


def _kunit_tests(build: str, k: results.LavaKunit, job: Path) -> list[Record]:
    topo, doc = k.run.topology, k.run.doc
    env = record.environment(topo, runner=RUNNER, lava_job=str(job))
    if not doc.found:
        return [record.test_record(build, topo, record.BOOT, 'FAIL', env,
                                   comment=record.NO_KTAP_COMMENT,
                                   log_excerpt=record.excerpt(k.log.console[-40:]))]
    out = [record.test_record(build, topo, record.BOOT, 'PASS', env)]
    for suite in doc.suites:
        for path, leaf in suite.leaves():
            status = record.case_status(leaf.status.value, path)
            fields: Record = {'misc': {'kloc_status': leaf.status.value, 'case': path}}
            if leaf.reason:
                fields['comment'] = leaf.reason
            if leaf.log and status == 'FAIL':
                fields['log_excerpt'] = record.excerpt(leaf.log)
            out.append(record.test_record(build, topo, record.case_path(path), status, env)
                       | fields)
    return out


def _selftest_tests(build: str, s: results.LavaSelftest, job: Path) -> list[Record]:
    env = record.environment(s.topology, runner=RUNNER, lava_job=str(job))
    root = 'lo_counters'
    out = [record.test_record(build, s.topology, root, 'PASS' if s.ok else 'FAIL', env,
                              comment=s.why or 'one boot of the guest, run by LAVA')]
    for name, status in s.statuses.items():
        out.append(record.test_record(build, s.topology, record.test_path(root, name),
                                      record.status_of(status), env))
    for name, f in s.figures.items():
        out.append(record.test_record(build, s.topology, record.test_path(root, name), 'DONE',
                                      env, number=record.number(f.value, f.unit)))
    return out


def submission(tree: Tree, outcome: Outcome, run_id: str) -> Record:
    """The LAVA run as one KCIDB v5.3 submission, checked; run_id: record.new_run_id()."""
    checkout = record.checkout_id(run_id, 'lava')
    builds: dict[str, Record] = {}
    tests: list[Record] = []

    def build(kind: str, arch: str, config: str) -> str:
        b = record.build_record(checkout, tree, kind, arch, config, {'tree': str(tree.path)})
        builds.setdefault(str(b['id']), b)
        return str(b['id'])

    for k in outcome.kunit:
        arch = topology.get(k.run.topology).arch
        job = outcome.jobs[f'{k.run.kernel}.{k.run.topology}']
        tests += _kunit_tests(build('kunit', arch, record.KUNIT_CONFIG), k, job)
    for s in outcome.selftests:
        arch = topology.get(s.topology).arch
        job = outcome.jobs[f'{s.guest}.{s.topology}']
        tests += _selftest_tests(build(f'guest-{s.allocator}', arch,
                                       record.guest_config(s.allocator, arch)), s, job)
    doc = record.submission(
        [record.checkout_record(checkout, f'Linux {tree.version} ({tree.origin} tree), run by '
                                'LAVA', record.source_identity(tree),
                                {'tree': str(tree.path), 'version': str(tree.version)})],
        list(builds.values()), tests)
    schema.validate(doc)
    return doc
