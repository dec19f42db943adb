# SPDX-License-Identifier: GPL-2.0
"""What counting costs: boots of one guest, side by side, with no plugin, with
kloc-count and with QEMU's contrib/plugins/cache.c (kloc-count's geometry, a
core per vCPU), all three under icount with one host thread, as counted boots
run; and a timed boot (MTTCG, no icount) as make compare times it, for the
counted/timed ratio. Interleaved, boot k of each with seed k; each boot's wall
time and its QEMU's peak resident memory (wait4's ru_maxrss), and each boot
must reach the kselftest's result, or the benchmark fails.

A benchmark, not a test: it prints its figures and judges nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kloc import progress
from kloc.atomicfile import write_text
from kloc.bench import interleave
from kloc.counting import crosscheck
from kloc.counting.plugin import Plugin, build_plugin, check_plugin_matches_qemu
from kloc.errors import KlocError
from kloc.guests import guest
from kloc.qemu import topology
from kloc.qemu.topology import Topology

TOPOLOGY = 'x86_64_2n'
KINDS = ('timed', 'icount', 'kloc-count', 'cache.c')
ABOUT = {'timed': 'a timed boot: MTTCG, no icount, no plugin (make compare\'s timed boots)',
         'icount': 'icount, one host thread, no plugin',
         'kloc-count': 'icount, one host thread, kloc-count (make compare\'s counted boots)',
         'cache.c': 'icount, one host thread, QEMU\'s cache.c: L1 dcache 1 MiB 16-way 64-byte '
                    'lines (kloc-count\'s geometry), LRU, a core per vCPU'}


class CostError(KlocError):
    """A boot of the benchmark did not reach the kselftest's result."""


@dataclass(frozen=True)
class Boot:
    kind: str
    seed: int
    seconds: float
    peak_rss_mib: float


@dataclass(frozen=True)
class Setup:
    g: guest.Guest
    topo: Topology
    timed_initrd: Path
    counted_initrd: Path
    out: Path
    plugin: Plugin          # kloc-count, built and checked against the QEMU that runs
    cache_c: Path           # QEMU's contrib/plugins/cache.c, built


def prepare(g: guest.Guest, out: Path) -> Setup:
    topo = topology.get(TOPOLOGY)
    guest.check_counted(g, topo)
    logs = out / 'logs'
    logs.mkdir(parents=True, exist_ok=True)
    guest.build(g, logs)
    binary = guest.static_selftest(topo.arch, g.tree.path / 'tools/testing/selftests', out)
    timed = guest.initramfs(binary, interleave.selftest_args(2), out / 'initramfs.gz',
                            topo.arch)
    counted = guest.initramfs(binary, interleave.counted_args(),
                              out / 'initramfs-counted.gz', topo.arch)
    plugin = build_plugin()
    check_plugin_matches_qemu(plugin)
    return Setup(g, topo, timed, counted, out, plugin, crosscheck.build_cache_plugin())


def cache_c_args(vcpus: int) -> list[str]:
    """cache.c as kloc-count models: its L1 dcache in kloc-count's default geometry."""
    return ['dcachesize=1048576', 'dassoc=16', 'dblksize=64', 'evict=lru', f'cores={vcpus}']


def command(s: Setup, kind: str, seed: int) -> list[str]:
    work = s.out / 'boots'
    if kind == 'timed':
        return guest.qemu_command(s.g, s.timed_initrd, s.topo)
    if kind == 'kloc-count':
        return guest.counted_command(s.g, s.counted_initrd, s.topo, s.plugin,
                                     work / f'{kind}-{seed}.counts.json', seed)
    cmd = guest.qemu_command(s.g, s.counted_initrd, s.topo, counted=True)
    cmd += ['-accel', 'tcg,thread=single', *guest.ICOUNT, *guest.seed_args(seed)]
    if kind == 'cache.c':
        cmd += ['-plugin', ','.join([str(s.cache_c), *cache_c_args(s.topo.cpus)]),
                '-d', 'plugin', '-D', str(work / f'{kind}-{seed}.log')]
    return cmd


def boot(s: Setup, kind: str, seed: int, timeout: float) -> Boot:
    """One boot, its wall time and its QEMU's peak RSS; CostError if it did not reach
    the kselftest's result."""
    work = s.out / 'boots'
    work.mkdir(parents=True, exist_ok=True)
    console = work / f'{kind}-{seed}.console'
    cmd = command(s, kind, seed)
    start = time.monotonic()
    with open(console, 'w') as f:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                p.wait()
                raise CostError(f'{kind} boot {seed} ran past {timeout:.0f} s: {console}')
            time.sleep(0.05)
    secs = time.monotonic() - start
    rc = os.waitstatus_to_exitcode(status)
    record, why = guest.parse_console(console.read_text(errors='replace'))
    if rc or record is None or why:
        raise CostError(f'{kind} boot {seed} (exit {rc}) did not reach the '
                        f'kselftest\'s result ({why or "no record"}): {console}')
    return Boot(kind, seed, round(secs, 2), round(usage.ru_maxrss / 1024, 1))


def run(s: Setup, runs: int, timeout: float) -> list[Boot]:
    boots = []
    for seed in range(1, runs + 1):
        for kind in KINDS:
            b = boot(s, kind, seed, timeout)
            boots.append(b)
            progress.say(f'round {seed}/{runs} {kind}: {b.seconds:.1f} s, peak RSS '
                         f'{b.peak_rss_mib:,.0f} MiB')
    return boots


def table(boots: list[Boot]) -> str:
    """Per kind: mean and SD of the wall time, its ratio to the icount boot without a
    plugin and to the timed boot, the peak RSS."""
    by = {k: [b for b in boots if b.kind == k] for k in KINDS}
    mean = {k: statistics.fmean(b.seconds for b in v) for k, v in by.items() if v}
    lines = [f'{"boot":<11} {"n":>2} {"wall s (mean, SD)":>18} {"/ icount":>9} '
             f'{"/ timed":>8} {"peak RSS MiB (max)":>19}']
    for k, v in by.items():
        if not v:
            continue
        sd = statistics.stdev(b.seconds for b in v) if len(v) > 1 else 0.0
        lines.append(f'{k:<11} {len(v):>2} {mean[k]:>11.1f} {sd:>6.1f} '
                     f'{mean[k] / mean["icount"]:>8.2f}x {mean[k] / mean["timed"]:>7.2f}x '
                     f'{max(b.peak_rss_mib for b in v):>19,.0f}')
    lines.append(f'kloc-count / cache.c: {mean["kloc-count"] / mean["cache.c"]:.2f}x the wall '
                 'time')
    lines += [f'  {k}: {ABOUT[k]}' for k in KINDS]
    return '\n'.join(lines) + '\n'


def write(boots: list[Boot], s: Setup) -> Path:
    path = s.out / 'plugin-cost.json'
    doc = {'guest': s.g.name, 'topology': s.topo.name,
           'qemu': interleave.qemu_used(s.topo), 'about': ABOUT,
           'boots': [asdict(b) for b in boots]}
    write_text(path, json.dumps(doc, indent=1) + '\n')
    return path
