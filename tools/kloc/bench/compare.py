# SPDX-License-Identifier: GPL-2.0
"""make compare: SLUB against SLAB guests, interleaved, with statistics.

Builds the two guests of one tree (6.1 by default: SLAB is gone from 6.8),
one initramfs for both, runs them A B A B ... into a resumable results
file, and writes the table (compare.txt), compare.json and compare.svg.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kloc import progress
from kloc.bench import counted as counted_runs, interleave, metrics, plot, tables
from kloc.guests import guest
from kloc.qemu import topology
from kloc.atomicfile import write_text
from kloc.trees.sources import Tree


@dataclass(frozen=True, kw_only=True)
class CompareOptions:
    arch: str
    topology: str
    a: str                 # allocator of side A
    b: str
    runs: int
    seconds: float
    alpha: float
    timeout: int
    out: Path
    mde: float = 3.6       # the change of interest, percent
    counted: int = 0       # counted boots a side (QEMU plugin); 0: none
    jobs: int = 1          # counted boots at once (JOBS)
    runner: interleave.Runner = interleave.run    # the timed runs: here, or a LAVA lab


def default_topology(arch: str) -> str:
    return 'x86_64_2n' if arch == 'x86_64' else 'arm64_2n_its1'


def check(tree: Tree, opts: CompareOptions) -> None:
    """Refuse what cannot run before anything is built or written: SLAB on 6.8+, a
    topology of another arch, counted boots this QEMU cannot run, COUNTED=1."""
    metrics.check_counted(opts.counted)
    topo = topology.get(opts.topology)
    for allocator in (opts.a, opts.b):
        g = guest.Guest(tree, opts.arch, allocator)
        guest.check(g)
        if opts.counted:
            guest.check_counted(g, topo)


def prepare(tree: Tree, opts: CompareOptions) -> interleave.AbPlan:
    topo = topology.get(opts.topology)
    if topo.arch != opts.arch:
        raise topology.TopologyError(f'topology {topo.name} is {topo.arch}; pick an '
                                     f'{opts.arch} one with TOPOLOGY=')
    ga, gb = guest.Guest(tree, opts.arch, opts.a), guest.Guest(tree, opts.arch, opts.b)
    guest.check(ga)   # before any build: e.g. SLAB on 6.8+
    guest.check(gb)
    key = {'tree': f'{tree.label} {tree.version}', 'arch': opts.arch, 'a': opts.a, 'b': opts.b}
    return interleave.prepare((opts.a, ga), (opts.b, gb), topo, opts.seconds, opts.runs,
                              opts.timeout, opts.out, key, ('config_a', 'config_b'))


def run(tree: Tree, opts: CompareOptions) -> str:
    """Run (or resume) the comparison; write its files; return the table."""
    plan = counted_runs.with_plugin(prepare(tree, opts), opts.counted, opts.jobs)
    progress.say(f'{opts.runs} runs a side, {opts.a} and {opts.b} interleaved, on '
                 f'{plan.topology.name} ({plan.topology.about})')
    store = opts.runner(plan)
    diffs = metrics.compare(store.records('a', opts.runs), store.records('b', opts.runs),
                            opts.alpha, opts.mde / 100)
    qemu = guest.qemu_command(plan.a.guest, plan.a.initrd, plan.topology)
    head = [f'SLUB/SLAB comparison: Linux {tree.version} ({tree.label}), {opts.arch}',
            f'{opts.a} (A) vs {opts.b} (B), {opts.runs} runs a side, interleaved;',
            f'failed runs: {len(store.failed_runs("a"))} {opts.a}, '
            f'{len(store.failed_runs("b"))} {opts.b} (not counted)',
            f'topology {plan.topology.name}: {plan.topology.about}',
            f'timed runs: {store.key.get("runner", "this machine")}',
            f'selftest: lo_counters {" ".join(interleave.selftest_args(opts.seconds))}', '']
    text = '\n'.join(head) + '\n' + tables.render(diffs, opts.a, opts.b, opts.alpha)
    counted = counted_runs.run(plan, opts.alpha, opts.mde) if plan.counted else None
    if counted:
        text += '\n' + counted_runs.report(counted, opts.a, opts.b, opts.alpha)
    every = diffs + (counted.diffs if counted else [])
    verdict = tables.verdict(every, counted.lost if counted else ())
    text += f'\nVerdict ({opts.b} against {opts.a}): {verdict}.\n'
    write_text(opts.out / 'compare.txt', text)
    doc = {'key': store.key, 'runs_per_side': opts.runs, 'alpha': opts.alpha,
           'failed_runs': {opts.a: len(store.failed_runs('a')),
                           opts.b: len(store.failed_runs('b'))},
           'qemu_command': qemu, 'qemu': interleave.qemu_used(plan.topology),
           'results_file': str(store.path),
           'verdict': verdict,
           'figures': tables.to_json(diffs, opts.a, opts.b, opts.alpha),
           'counted': None if not counted else {
               'runs_per_side': counted.runs, 'results_file': str(counted.store.path),
               'figures': tables.to_json(counted.diffs, opts.a, opts.b, opts.alpha),
               'contended_lines': counted.attribution}}
    write_text(opts.out / 'compare.json', json.dumps(doc, indent=1) + '\n')
    title = (f'{opts.a} vs {opts.b}, Linux {tree.version} {opts.arch}, '
             f'{plan.topology.name}, {opts.runs} timed'
             + (f' and {counted.runs} counted' if counted else '') + ' runs a side')
    write_text(opts.out / 'compare.svg', plot.render(every, opts.a, opts.b, title))
    return text
