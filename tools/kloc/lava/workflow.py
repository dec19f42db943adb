# SPDX-License-Identifier: GPL-2.0
"""make lava: write the LAVA jobs of a tree; with RUN=1, run them here with lava-run
and write what came back as JUnit, KCIDB and a summary."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kloc import defaults
from kloc.atomicfile import write_text
from kloc.kcidb import record
from kloc.kunitpy import junit
from kloc.lava import export, kcidb, local, session
from kloc.trees.sources import Tree
from kloc.paths import require_absolute_out


@dataclass(frozen=True)
class Request:
    tree: Tree
    cache: Path
    out: Path                   # OUT; the jobs go to OUT/lava/<kernel>
    topologies: tuple[str, ...]
    timeout: int | None         # a job's test; None: each kind's default
    seconds: float              # each kselftest phase
    artifacts_url: str          # where artifacts/ is published; '' for file:// URLs
    run: bool                   # run the jobs here with lava-run
    compare: bool = False       # with run: against make kunit's runs and direct boots
    direct_boots: int = 3
    only: tuple[str, ...] = ()  # job names; () for every job

    def __post_init__(self) -> None:
        require_absolute_out(self.out)


@dataclass(frozen=True)
class Result:
    text: str
    ok: bool


def check(req: Request) -> None:
    """Refuse a run without lava-run before anything is written."""
    if req.run:
        local.lava_run()


def run(req: Request) -> Result:
    lava_dir = req.out / 'lava' / req.tree.label
    guest_timeout = req.timeout or int(defaults.value('timeout', 'guest'))
    export.write(export.Request(
        tree=req.tree, cache=req.cache, out=lava_dir, topologies=req.topologies,
        kunit_timeout=req.timeout or int(defaults.value('timeout', 'kunit')),
        guest_timeout=guest_timeout, seconds=req.seconds, artifacts_url=req.artifacts_url))
    if not req.run:
        return Result(f'LAVA jobs: {lava_dir}/jobs/*.yaml; images: {lava_dir}/artifacts; '
                      f'device dictionary: {lava_dir}/device (docs/lava.md); make lava RUN=1 '
                      'runs them here\n', True)
    opts = session.Options(
        lava_dir=lava_dir, cache=req.cache,
        direct_kunit=req.out / 'kunit' / req.tree.label if req.compare else None,
        direct_boots=req.direct_boots if req.compare else 0, guest_timeout=guest_timeout,
        only=req.only)
    o = session.run(req.tree, opts)
    write_text(lava_dir / 'junit.xml', junit.to_xml(o.junit_runs()))
    write_text(lava_dir / 'kcidb.json', json.dumps(
        kcidb.submission(req.tree, o, record.new_run_id()), indent=1) + '\n')
    text = session.render(o)
    write_text(lava_dir / 'summary.txt', text)
    return Result(text + f'{"PASS" if o.ok else "FAIL"}: {len(o.kunit)} KUnit and '
                  f'{len(o.selftests)} kselftest LAVA jobs; JUnit: {lava_dir}/junit.xml, '
                  f'KCIDB: {lava_dir}/kcidb.json, logs: {lava_dir}/results/\n', o.ok)
