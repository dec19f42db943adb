# SPDX-License-Identifier: GPL-2.0
"""make guest: one guest built, the loopback kselftest run in it once, timed, then
(arm64) the MSI workload once with the ITS traced,
then COUNTED boots under the counting plugin, JOBS at once (bench/boots.py), each
figure printed as it comes."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kloc import progress
from kloc.atomicfile import write_text
from kloc.bench import countstore, boots, counted as counted_runs
from kloc.guests import guest, its_boot, msi
from kloc.its import model
from kloc.its.figures import Boots, lines as its_lines
from kloc.qemu import topology
from kloc.trees.sources import Tree
from kloc.paths import require_absolute_out


@dataclass(frozen=True)
class Request:
    tree: Tree
    arch: str
    alloc: str
    topology: str
    seconds: float          # each kselftest phase's measuring time
    timeout: int            # of the timed boot; a counted one gets more
    counted: int            # counted boots after the timed one
    jobs: int               # counted boots at once (JOBS); the timed one runs alone
    out: Path               # OUT: the guest's files go to OUT/guest/<name>
    its_remote_ns: float = model.PENALTY_NS     # the ITS latency model's penalty

    def __post_init__(self) -> None:
        require_absolute_out(self.out)


def check(req: Request) -> tuple[guest.Guest, topology.Topology]:
    """Refuse what cannot run (SLAB on 6.8+, a topology of another arch, counted boots
    this QEMU cannot run) before anything is built or written."""
    g = guest.Guest(req.tree, req.arch, req.alloc)
    guest.check(g)
    topo = topology.get(req.topology)
    if topo.arch != req.arch:
        raise topology.TopologyError(f'topology {topo.name} is {topo.arch}, not {req.arch}')
    if req.counted:
        guest.check_counted(g, topo)
    return g, topo


def run(req: Request, g: guest.Guest, topo: topology.Topology,
        emit: Callable[[str], None] = print) -> bool:
    """Build g, boot it on topo once timed, then counted; emit each result. False: a
    boot failed. g and topo: what check(req) returned."""
    out = req.out / 'guest' / g.name
    out.mkdir(parents=True, exist_ok=True)
    guest.build(g, out)
    binary = guest.static_selftest(req.arch, req.tree.path / 'tools/testing/selftests', out)
    initrd = guest.initramfs(binary, ['-d', str(req.seconds), '-w', '0.5'],
                             out / 'initramfs.gz', req.arch)
    progress.say(f'{g.name}: booting on {topo.name} ({topo.about})')
    r = guest.run(g, initrd, topo, req.timeout, out / 'console.log')
    if not r.ok:
        emit(f'{g.name}: FAILED RUN: {r.why}\n--- console tail ---\n{r.console_tail}')
        return False
    emit(f'{g.name} on {topo.name}: {r.seconds:.1f} s; ' + json.dumps(r.record))
    if req.arch in msi.ARCHES and not _its(req, g, topo, out, emit):
        return False
    if not req.counted:
        return True
    plugin, initrd = counted_runs.setup(binary, out, req.arch)
    progress.say(f'{g.name}: {req.counted} counted boots under the QEMU plugin, up to '
                 f'{min(req.jobs, req.counted)} at once (JOBS)')
    todo = deque(boots.Boot(g.name, k - 1, g, initrd, topo, req.timeout,
                            out / f'counted-{k}.log', plugin)
                 for k in range(1, req.counted + 1))
    failed: list[str] = []

    def done(b: boots.Boot, c: guest.RunResult) -> bool:
        k = b.seed + 1
        if not c.ok or c.record is None:
            failed.append(f'{g.name}: FAILED COUNTED BOOT {k}: {c.why}\n--- console tail '
                          f'---\n{c.console_tail}')
            return False
        emit(f'{g.name} counted boot {k}: {c.seconds:.1f} s ({c.seconds / r.seconds:.1f}x '
             f'the timed boot); ' + json.dumps(c.record['counted'])
             + f'; counts in {c.record["counts_file"]}')
        return True

    boots.run(todo, req.jobs, done, countstore.for_command())
    for text in failed:
        emit(text)
    return not failed


def _its(req: Request, g: guest.Guest, topo: topology.Topology, out: Path,
         emit: Callable[[str], None]) -> bool:
    """The MSI workload on topo, its_boot.BOOTS times: the ITS's reads per interrupt
    (the first boot's, and whether the others agree), and the model."""
    initrd = msi.initramfs(req.arch, out)
    try:
        boots = Boots(tuple(its_boot.run(g, initrd, topo, req.timeout, out / f'its-boot-{k}')
                            for k in range(its_boot.BOOTS)))
    except guest.GuestError as e:
        emit(f'{g.name}: FAILED ITS BOOT: {e}')
        return False
    agree = f'{len(boots.boots)} boots agree' if boots.agree else \
        f'the boots differ: remote reads per interrupt {boots.remotes()}'
    text = its_lines(boots.first) + [f'  ({agree}; the table is the first boot\'s)'] + \
        model.Implied(boots.remote, req.its_remote_ns).lines(
            'this kernel against all-local tables')
    emit('\n'.join(text))
    write_text(out / f'its-{topo.name}.json', json.dumps(boots.to_json(), indent=1) + '\n')
    return True
