# SPDX-License-Identifier: GPL-2.0
"""The timed runs of make compare / make review, as jobs of a LAVA lab (LAVA_URL=).

The same boots interleave.run() makes here, each a kselftest job (jobs.py)
of its side's guest kernel and the comparison's initramfs, submitted to the
server's REST API (remote.py) A B A B ... and polled; each finished job's
log is read back (results.selftest) into the same results file, runs.jsonl,
as a run of its side. A lab runs as many at once as it has devices.

Nothing is counted twice, and a rerun resumes:
- every submission goes to lava-jobs.jsonl (job id, side) the moment the
  server gives its id; a rerun polls the jobs there that have no run yet,
  instead of submitting them again;
- each run in runs.jsonl names its job (BenchRun.job), and a job with a
  run is never read again;
- only the runs a side still lacks (wanted, less good runs, less jobs
  pending) are submitted; a failed job is recorded with why, and replaced.
A job submitted but killed before its id was written down runs unread.

The results file's key says the runs came from the lab (runner), so lab
runs and this machine's runs are never mixed in one file. Counted boots
(COUNTED=) stay on this machine: they need the QEMU plugin, and 3 a side.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from kloc import progress
from kloc.digest import sha256_file
from kloc.atomicfile import write_text
from kloc.bench import interleave
from kloc.bench.store import BenchRun, Store, open_store
from kloc.errors import KlocError
from kloc.lava import jobs, remote, results, yamlio

LEDGER = 'lava-jobs.jsonl'
ARTIFACTS = 'lava-artifacts'


class LabError(KlocError):
    """The runs could not be made in the lab."""


@dataclass(frozen=True)
class Lab:
    server: remote.Server
    artifacts_url: str = ''     # where OUT/.../lava-artifacts is published; '' for file://
    poll_s: float = 5.0


@dataclass(frozen=True)
class Submitted:
    job: int
    side: str


def key_digest(k: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(k, sort_keys=True).encode()).hexdigest()[:16]


def read_ledger(path: Path, digest: str) -> list[Submitted]:
    """The jobs submitted so far for the comparison of that key digest (a ledger
    left by another comparison counts for nothing); a line cut short is not one."""
    out = []
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    for line in text.splitlines():
        try:
            d = json.loads(line)
            if d['key'] == digest and d['side'] in ('a', 'b'):
                out.append(Submitted(int(d['job']), str(d['side'])))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def _append(path: Path, s: Submitted, digest: str) -> None:
    line = json.dumps({'job': s.job, 'side': s.side, 'key': digest}) + '\n'
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _publish(im: jobs.Image, dest: Path) -> tuple[str, str]:
    """Copy an image into dest under a name of its content; (that name, its sha256).

    A job deploys the file of its URL and checks its checksum when it runs,
    maybe long after it was submitted: a rerun that rebuilt the initramfs
    must not change a file that jobs still queued will fetch.
    """
    dest.mkdir(parents=True, exist_ok=True)
    tmp = dest / f'.{im.name}.{os.getpid()}'
    shutil.copyfile(im.source, tmp)
    sha = sha256_file(tmp)
    name = f'{sha[:16]}-{im.name}'
    tmp.replace(dest / name)
    return name, sha


def _definitions(plan: interleave.AbPlan, lab: Lab) -> dict[str, str]:
    """Each side's job definition, its images published beside the results."""
    sides = {'a': plan.a, 'b': plan.b}
    base = lab.artifacts_url.rstrip('/')
    dest = plan.out / ARTIFACTS
    out = {}
    for s, side in sides.items():
        job = jobs.kselftest_job(side.guest, side.initrd, plan.topology, plan.timeout)
        published = {im.label: _publish(im, dest) for im in job.images}

        def url(im: jobs.Image) -> str:
            name = published[im.label][0]
            return f'{base}/{name}' if base else (dest / name).resolve().as_uri()

        d = jobs.definition(job, url, lambda im: published[im.label][1])
        d['job_name'] = f'kloc {side.label} ({job.guest}) for {plan.out.name}'
        meta = d['metadata']
        assert isinstance(meta, dict)
        meta.update({'kloc.side': s, 'kloc.label': side.label,
                     'kloc.comparison': str(plan.out)})
        out[s] = yamlio.dump(d)
        write_text(plan.out / f'lava-job-{s}.yaml', out[s])
    return out


def key(plan: interleave.AbPlan, lab: Lab) -> dict[str, str]:
    return dict(plan.key, runner=f'LAVA {lab.server.shown}')


def _fold(plan: interleave.AbPlan, lab: Lab, store: Store, sub: Submitted,
          state: remote.JobState) -> BenchRun:
    """A finished job as a run of its side, in the store."""
    side = plan.a if sub.side == 'a' else plan.b
    consoles = plan.out / 'consoles'
    consoles.mkdir(parents=True, exist_ok=True)
    console = consoles / f'lava-{sub.job}-{side.label}.log'
    try:
        log = results.read_log(remote.log(lab.server, sub.job))
    except remote.RemoteError as e:
        log = results.JobLog(errors=[f'no log: {e}'])
    write_text(console, log.text)
    s = results.selftest(log, plan.topology.name, side.guest.name, side.guest.allocator)
    why = s.why
    if state.health != remote.COMPLETE:
        why = f'LAVA job {sub.job} {state.health.lower()}' + (f': {why}' if why else '')
    run = BenchRun(sub.side, not why, round(log.seconds(), 2), s.record, why,
                   '' if not why else '\n'.join(log.console[-25:] + log.errors[-3:]),
                   str(console), lab.server.job_url(sub.job))
    store.append(run)
    return run


def run(plan: interleave.AbPlan, lab: Lab) -> Store:
    """The timed runs in the lab; resumes from runs.jsonl and lava-jobs.jsonl."""
    if plan.runs < 2:
        raise LabError(f'{plan.runs} runs a side: a comparison needs at least 2')
    store = open_store(plan.out / 'runs.jsonl', key(plan, lab))
    ledger, digest = plan.out / LEDGER, key_digest(store.key)
    progress.say(f'LAVA lab {lab.server.shown} (LAVA {remote.version(lab.server)}): '
                 f'{plan.runs} runs a side as jobs')
    definitions = _definitions(plan, lab)
    labels = {'a': plan.a.label, 'b': plan.b.label}
    read = {r.job for r in store.runs if r.job}
    if store.runs:
        progress.say(f'resuming {store.path}: {len(store.ok_runs("a"))} {labels["a"]} and '
                     f'{len(store.ok_runs("b"))} {labels["b"]} good runs already there')
    states: dict[int, str] = {}
    while True:
        pending = [s for s in read_ledger(ledger, digest)
                   if lab.server.job_url(s.job) not in read]
        have = {s: len(store.ok_runs(s)) for s in 'ab'}
        if min(have.values()) >= plan.runs:
            return store
        for s in 'ab':
            if len(store.failed_runs(s)) > plan.max_failures:
                raise LabError(f'{labels[s]}: {len(store.failed_runs(s))} failed LAVA jobs '
                               f'(last: {store.failed_runs(s)[-1].why}); the {len(store.runs)} '
                               f'runs so far are kept in {store.path}, and a rerun resumes')
        pending += _top_up(plan, lab, definitions, have, pending, (ledger, digest))
        for sub in pending:
            state = remote.job(lab.server, sub.job)
            if states.get(sub.job) != state.state:
                states[sub.job] = state.state
                progress.say(f'LAVA job {sub.job} ({labels[sub.side]}): {state.state}'
                             + (f' on {state.device}' if state.device else ''))
            if not state.finished:
                continue
            r = _fold(plan, lab, store, sub, state)
            read.add(r.job)
            done = sum(len(store.ok_runs(s)) for s in 'ab')
            progress.say(f'LAVA job {sub.job} {labels[sub.side]}: ' + (
                f'run {done}/{2 * plan.runs}, {r.seconds:.1f} s' if r.ok
                else f'FAILED ({r.why})'))
        time.sleep(lab.poll_s)


def _top_up(plan: interleave.AbPlan, lab: Lab, definitions: dict[str, str],
            have: dict[str, int], pending: list[Submitted],
            ledger: tuple[Path, str]) -> list[Submitted]:
    """Submit the jobs each side still lacks, A B A B ..."""
    need = {s: plan.runs - have[s] - sum(1 for p in pending if p.side == s) for s in 'ab'}
    new: list[Submitted] = []
    while max(need.values()) > 0:
        for s in 'ab':
            if need[s] > 0:
                sub = Submitted(remote.submit(lab.server, definitions[s]), s)
                _append(ledger[0], sub, ledger[1])
                new.append(sub)
                need[s] -= 1
    if new:
        progress.say(f'submitted {len(new)} LAVA jobs: '
                     + ', '.join(f'{p.job} ({p.side})' for p in new))
    return new


def runner(url: str, token: str, token_file: str, artifacts_url: str) -> interleave.Runner:
    """Where the timed runs of compare and review boot: here (no URL), or as jobs of
    the LAVA lab at url, checked reachable before anything is built."""
    if not url:
        return interleave.run
    server = remote.server(url, token, token_file)
    remote.version(server)
    return functools.partial(run, lab=Lab(server, artifacts_url))
