# SPDX-License-Identifier: GPL-2.0
"""Run the jobs make lava wrote on this machine, with lava-run (Debian's lava-dispatcher).

lava-run is LAVA's dispatcher without a server: it takes a job definition
and a device configuration, which here is the device dictionary rendered
with lava-server's qemu.jinja2 and the job's context, as a server renders
it for each job (device.py). Every job is validated (lava-run --validate),
then run, one at a time. Each job's files go to results/<job>/: the
rendered device, lava-run's log (one YAML line per entry) and its output
directory.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kloc import progress
from kloc.atomicfile import write_text
from kloc.errors import KlocError
from kloc.lava import device, results, yamlio
from kloc.lava.export import DEVICE, JOBS
from kloc.procs import run_logged, tail

# Where lava-run keeps each job's downloads (lava_common.constants.DISPATCHER_DOWNLOAD_DIR);
# a run removes its own, a validation leaves it.
DOWNLOAD_DIR = Path('/var/lib/lava/dispatcher/tmp')
RESULTS = 'results'
INSTALL_HINT = ('lava-run is not installed: the LAVA jobs run with Debian\'s lava-dispatcher; '
                'install it with make deps (as root: apt-get install lava-dispatcher)')


class LavaRunError(KlocError):
    """lava-run is missing, or refused a job."""


@dataclass(frozen=True)
class JobFile:
    path: Path
    definition: dict[str, Any]

    @property
    def name(self) -> str:
        return self.path.stem

    def meta(self, key: str) -> str:
        return str(self.definition.get('metadata', {}).get(f'kloc.{key}', ''))

    @property
    def context(self) -> dict[str, object]:
        ctx = self.definition.get('context', {})
        return dict(ctx) if isinstance(ctx, dict) else {}


def lava_run() -> str:
    exe = shutil.which('lava-run')
    if not exe:
        raise LavaRunError(INSTALL_HINT)
    return exe


def load_jobs(lava_dir: Path) -> list[JobFile]:
    paths = sorted((lava_dir / JOBS).glob('*.yaml'))
    if not paths:
        raise LavaRunError(f'no jobs in {lava_dir / JOBS}: make lava writes them')
    out = []
    for p in paths:
        d = yamlio.load(p.read_text())
        if not isinstance(d, dict):
            raise LavaRunError(f'{p} is not a job definition')
        out.append(JobFile(p, d))
    return out


def _job_id(job: JobFile, what: str) -> str:
    """Unique to this process: two runs at once keep apart in DOWNLOAD_DIR."""
    return f'kloc-{os.getpid()}-{what}-{job.name}'


@dataclass
class Dispatch:
    job: JobFile
    rc: int
    log: results.JobLog
    log_file: Path
    seconds: float


def dispatch(job: JobFile, lava_dir: Path, types: Path, validate: bool) -> Dispatch:
    """lava-run on one job, with the device rendered for its context."""
    exe = lava_run()
    out = lava_dir / RESULTS / job.name
    what = 'validate' if validate else 'run'
    dev = out / 'device.yaml'
    write_text(dev, device.render(lava_dir / DEVICE / f'{device.HOSTNAME}.jinja2', types,
                                  job.context))
    job_id = _job_id(job, what)
    cmd = [exe, '--job-id', job_id, '--output-dir', str(out / what), '--device', str(dev)]
    cmd += ['--validate'] if validate else []
    log = out / f'{what}.log'
    start = time.monotonic()
    try:
        rc = run_logged(cmd + [str(job.path)], log, f'lava-run {what} {job.name}')
    finally:
        if validate:
            shutil.rmtree(DOWNLOAD_DIR / job_id, ignore_errors=True)
    parsed = results.read_log(log.read_text(errors='replace'))
    if not validate:
        write_text(out / 'console.log', parsed.text)
    return Dispatch(job, rc, parsed, log, time.monotonic() - start)


def validate_all(jobs: list[JobFile], lava_dir: Path, types: Path) -> None:
    """lava-run --validate on every job; LavaRunError naming each it refused."""
    bad = []
    for job in jobs:
        d = dispatch(job, lava_dir, types, validate=True)
        if d.rc != 0 or not d.log.complete:
            bad.append(f'{job.name}: lava-run --validate exited {d.rc}; '
                       f'{"; ".join(d.log.errors) or tail(d.log_file, 5)}')
    if bad:
        raise LavaRunError('lava-run refused jobs:\n  ' + '\n  '.join(bad))
    progress.say(f'lava-run --validate: all {len(jobs)} jobs valid')


def run(job: JobFile, lava_dir: Path, types: Path) -> Dispatch:
    progress.say(f'lava-run {job.name} ({job.meta("kind")} on {job.meta("topology")})')
    d = dispatch(job, lava_dir, types, validate=False)
    progress.say(f'lava-run {job.name}: {"complete" if d.log.complete else "INCOMPLETE"}, '
                 f'{len([r for r in d.log.results if r.definition != "lava"])} results in '
                 f'{d.seconds:.1f} s (log: {d.log_file})')
    return d
