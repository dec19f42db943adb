# SPDX-License-Identifier: GPL-2.0
"""The counted half of an A/B comparison: boots under the QEMU plugin.

Both make compare and make review run it after their timed runs, when
COUNTED= asks for counted boots: the same two guests and initramfs,
JOBS boots at once, started A B A B ... by seed, into counted.jsonl
(resumable), then the counted figures, read by seed, with Welch's test,
and the most contended cache lines of the last seed's boot of each side,
named from the guest's System.map.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from kloc import progress
from kloc.bench import interleave, metrics, tables
from kloc.bench.store import Store
from kloc.counting.counts import PHASE_ALL, read_counts
from kloc.counting.errors import CountingError
from kloc.counting.plugin import Plugin, build_plugin, check_plugin_matches_qemu
from kloc.counting.report import line_table
from kloc.counting.symbols import load_system_map
from kloc.guests import guest


@dataclass(frozen=True)
class CountedResult:
    runs: int
    diffs: list[metrics.Difference]
    store: Store
    attribution: dict[str, str]      # side label -> contended-lines table
    lost: tuple[str, ...] = ()       # figures some boots lack: not compared (metrics.lost)

    def reused(self) -> int:
        """How many of the boots compared were handed on from the store (countstore)."""
        return sum(1 for s in ('a', 'b') for r in self.store.seeded(s, self.runs)
                   if r.get('stored'))


def setup(binary: Path, out: Path, arch: str) -> tuple[Plugin, Path]:
    """What counted boots need: the plugin, built (or found) for the installed
    QEMU, and an initramfs whose selftest sends a fixed count per window."""
    plugin = build_plugin()
    check_plugin_matches_qemu(plugin)
    initrd = guest.initramfs(binary, interleave.counted_args(), out / 'initramfs-counted.gz',
                             arch)
    return plugin, initrd


def with_plugin(plan: interleave.AbPlan, counted: int, jobs: int = 1) -> interleave.AbPlan:
    """The plan, with counted boots, jobs of them at once."""
    if counted <= 0:
        return plan
    assert plan.binary is not None
    plugin, initrd = setup(plan.binary, plan.out, plan.topology.arch)
    return dataclasses.replace(plan, counted=counted, plugin=plugin, counted_initrd=initrd,
                               jobs=jobs)


def attribution(records: list[dict[str, object]], g: guest.Guest, top: int = 5) -> str:
    """The contended lines of the all-CPU phase of a side's last counted boot: of its
    records by seed (Store.seeded), the last seed's, whichever ended last."""
    record = records[-1] if records else None
    path = (record or {}).get('counts_file')
    if not isinstance(path, str):
        return '(no counted boot)'
    try:
        counts = read_counts(Path(path))
        syms = load_system_map(g.build_dir() / 'System.map')
    except CountingError as e:
        return f'(no table: {e})'
    if counts.attribution:
        return f'(no table: {counts.attribution})'
    return line_table(counts.phase(PHASE_ALL), syms, g.arch, top=top)


def run(plan: interleave.AbPlan, alpha: float, mde_pct: float) -> CountedResult:
    progress.say(f'counted boots: {plan.counted} a side under the QEMU plugin, interleaved')
    store = interleave.run_counted(plan)
    a, b = store.seeded('a', plan.counted), store.seeded('b', plan.counted)
    diffs = metrics.compare(a, b, alpha, mde_pct / 100, kind='counted')
    lines = {s.label: attribution(records, s.guest) for records, s in ((a, plan.a), (b, plan.b))}
    return CountedResult(plan.counted, diffs, store, lines, tuple(metrics.lost(a, b, 'counted')))


def report(result: CountedResult, a: str, b: str, alpha: float,
           attribution: bool = True) -> str:
    """The counted figures' table and (attribution) the contended lines, for a text
    report."""
    reused = result.reused()
    lines = [f'Counted figures: {result.runs} boots a side under the QEMU plugin']
    if reused:
        lines.append(f'  {reused} of the {2 * result.runs} were counted before, with the '
                     'same bytes loaded: reused')
    lines += ['', tables.render(result.diffs, a, b, alpha).rstrip('\n')]
    if not attribution:
        return '\n'.join(lines) + '\n'
    lines += ['', 'Most contended cache lines, one thread per CPU, last counted boot', '']
    for label, table in result.attribution.items():
        lines += [f'{label}:', table, '']
    return '\n'.join(lines)
