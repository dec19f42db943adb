# SPDX-License-Identifier: GPL-2.0
"""Run two guest kernels interleaved, A B A B ..., into a results file.

Each run boots a fresh guest that runs the loopback kselftest once. The
side with fewer good runs goes next, so the sides alternate and a resumed
job carries on with the side that is behind. A failed run (panic, hang, no
result, a failing selftest) is recorded with its console tail and never
counted as a result; too many failures on one side stop the job, keeping
everything already written.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kloc import progress
from kloc.bench import boots, countstore
from kloc.digest import sha256_file
from kloc.counting.plugin import PLUGIN_NAME, PLUGIN_VERSION, Plugin
from kloc.guests import guest
from kloc.bench.metrics import extract
from kloc.bench.store import BenchRun, Store, open_store
from kloc.qemu.topology import Topology
from kloc.trees import buildstamp
from kloc.errors import KlocError


class AbError(KlocError):
    """The A/B runs could not be completed."""


@dataclass(frozen=True)
class AbSide:
    label: str
    guest: guest.Guest
    initrd: Path


@dataclass(frozen=True)
class AbPlan:
    a: AbSide
    b: AbSide
    topology: Topology
    runs: int                 # good runs wanted per side
    timeout: int              # seconds one boot may take
    out: Path                 # runs.jsonl and consoles/ go here
    key: dict[str, str]       # what the runs are of; see results.open_store
    max_failures: int = 3     # failed runs one side may have
    counted: int = 0          # counted boots wanted per side (QEMU plugin)
    plugin: Plugin | None = None
    binary: Path | None = None          # the static selftest both initramfs hold
    counted_initrd: Path | None = None  # its counted run: a fixed count per window
    jobs: int = 1             # counted boots at once (JOBS); timed runs: one at a time

    def counted_key(self) -> dict[str, str]:
        """The counted runs' store key: what the boots load, by content (each image,
        the initramfs, the plugin, QEMU), and how they are run; not where a tree is
        nor its version, which the images' bytes name (a KDIR edited since builds
        another image, and is not resumed). Each boot is also stored by the bytes of
        all it loads (countstore.py), across comparisons."""
        assert self.plugin is not None
        key = {k: v for k, v in self.key.items() if k not in WHERE}
        return dict(key, counted=f'{PLUGIN_NAME} {PLUGIN_VERSION}',
                    plugin=self.plugin.path.parent.name,
                    selftest_args=' '.join(counted_args()), clock='icount',
                    randomness=f'QEMU -seed k for pair k, {" ".join(guest.RTC_FIXED)}, '
                    'build stamp fixed')


# The parts of a timed key that name where the kernels came from rather than what
# they are: the counted key leaves them to the images' sha256s.
WHERE = ('base', 'patch', 'series', 'tree', 'kernel', 'kdir')


def selftest_args(seconds: float) -> list[str]:
    return ['-d', f'{seconds:g}', '-w', '0.5']


# Datagrams each thread sends in a counted boot's window: the counts then
# measure a fixed amount of work, not however much fitted in the time.
COUNTED_DATAGRAMS = 5000
# Warm-up before each window, in the guest's seconds: under icount one
# second is 10^9 instructions, and every instruction of the warm-up still
# calls the plugin, so it is short: 0.1 s is about 15,000 datagrams.
COUNTED_WARMUP = 0.1


def counted_args() -> list[str]:
    """The selftest's options in a counted boot: -d only caps the window."""
    return ['-n', str(COUNTED_DATAGRAMS), '-d', '120', '-w', str(COUNTED_WARMUP)]


def qemu_version(topo: Topology) -> str:
    r = subprocess.run([topo.qemu_binary, '--version'], capture_output=True,
                       text=True)
    return r.stdout.splitlines()[0] if r.stdout else 'unknown'


def qemu_used(topo: Topology) -> dict[str, str]:
    """The QEMU a run's command line names, as PATH resolved it when it ran (kloc's
    private 10.0 comes first on PATH): its path and version, for the results files."""
    return {'binary': shutil.which(topo.qemu_binary) or topo.qemu_binary,
            'version': qemu_version(topo)}


def prepare(a: tuple[str, guest.Guest], b: tuple[str, guest.Guest], topo: Topology,
            seconds: float, runs: int, timeout: int, out: Path, key: dict[str, str],
            config_keys: tuple[str, str]) -> AbPlan:
    """Build both guests (once if they are one), the static selftest, and one
    initramfs for both sides. The key gets what every comparison depends on:
    the topology, the selftest and its options, QEMU, each side's .config
    digest under its name in config_keys, and the sha256 of each side's image
    and of the initramfs.
    """
    (label_a, ga), (label_b, gb) = a, b
    logs = out / 'logs'
    logs.mkdir(parents=True, exist_ok=True)
    digests: dict[Path, str] = {}       # one walk of each tree (both sides: one tree)
    for g in dict.fromkeys((ga, gb)):
        if g.tree.path not in digests:
            digests[g.tree.path] = buildstamp.tree_digest(g.tree.path)
        guest.build(g, logs, digests[g.tree.path])
    binary = guest.static_selftest(topo.arch, ga.tree.path / 'tools/testing/selftests', out)
    args = selftest_args(seconds)
    initrd = guest.initramfs(binary, args, out / 'initramfs.gz', topo.arch)
    full = dict(key, topology=topo.name, selftest_args=' '.join(args),
                selftest=hashlib.sha256(guest.SELFTEST.read_bytes()).hexdigest()[:16],
                qemu=qemu_version(topo))
    full[config_keys[0]] = guest.config_digest(ga)
    full[config_keys[1]] = guest.config_digest(gb)
    # What boots, by its bytes: a tree edited since (a KDIR) builds another image, and
    # its runs are not resumed into this comparison (the store refuses it, saying so)
    for k, path in (('image_a', ga.image()), ('image_b', gb.image()), ('initramfs', initrd)):
        full[k] = sha256_file(path)
    return AbPlan(AbSide(label_a, ga, initrd), AbSide(label_b, gb, initrd), topo, runs, timeout,
                  out, full, binary=binary)


# What makes the timed runs of a plan: run() here, or a lab's (lava/lab.py).
Runner = Callable[[AbPlan], Store]


def _brief(record: dict[str, object] | None) -> str:
    if not record:
        return ''
    try:
        f = extract(record)
    except (KeyError, ValueError):
        return ''
    return (f'1 thread {f["pps_single"]:,.0f} pps, all CPUs {f["pps_total"]:,.0f} pps, '
            f'efficiency {f["scaling_efficiency"]:.3f}')


def _brief_counted(record: dict[str, object] | None) -> str:
    c = (record or {}).get('counted')
    if not isinstance(c, dict):
        return ''
    text = f'{c["insns_pkt_single"]:,.0f} and {c["insns_pkt_all"]:,.0f} insns/packet'
    if 'remote_pct_all' not in c:       # the per-vCPU split was not measured
        return text
    return (text + f', {c["transfers_pkt_all"]:,.2f} transfers/packet '
            f'({c["fsharing_pkt_all"]:,.2f} false sharing), '
            f'{c["remote_miss_pct_all"]:.1f}% of misses remote')


def run(plan: AbPlan) -> Store:
    """The timed runs, interleaved, on this machine; resumes from the results file."""
    if plan.runs < 2:
        raise AbError(f'{plan.runs} runs a side: a comparison needs at least 2 (10 or '
                      'more to be worth reading)')
    return _interleave(plan, open_store(plan.out / 'runs.jsonl', plan.key), plan.runs)


def run_counted(plan: AbPlan) -> Store:
    """The counted boots, into counted.jsonl (resumable): seeds 0 to counted - 1 on each
    side, JOBS at once (bench/boots.py), started A B A B ... by seed.

    Separate boots from the timed ones: the plugin slows the guest, so its
    packets/s mean nothing, and its counts do not depend on time, nor on what
    ran beside them. Boot k of each side gets seed k, whichever ends first: a
    failed boot is retried with its seed, and the figures are read by seed
    (Store.seeded), so they are what one boot at a time gives.
    """
    if plan.plugin is None or plan.counted < 2 or plan.counted_initrd is None:
        raise AbError(f'{plan.counted} counted runs a side: a comparison needs at least 2')
    plugin, initrd = plan.plugin, plan.counted_initrd
    store = open_store(plan.out / 'counted.jsonl', plan.counted_key())
    sides = {'a': plan.a, 'b': plan.b}
    have = {s: store.seeds(s) for s in sides}
    if store.runs:
        progress.say(f'resuming {store.path}: {len(have["a"])} {plan.a.label} and '
                     f'{len(have["b"])} {plan.b.label} counted boots already there')
    consoles = plan.out / 'counted'
    consoles.mkdir(parents=True, exist_ok=True)
    total = 2 * plan.counted
    number = len(store.runs)
    todo: deque[boots.Boot] = deque()

    def queue(s: str, seed: int) -> None:
        nonlocal number
        number += 1
        side = sides[s]
        todo.append(boots.Boot(s, seed, side.guest, initrd, plan.topology, plan.timeout,
                               consoles / f'{number:03d}-{side.label}.log', plugin,
                               side.label))

    for k in range(plan.counted):
        for s in sides:
            if k not in have[s]:
                queue(s, k)
    if todo and plan.jobs > 1:
        progress.say(f'{len(todo)} counted boots to go, up to {min(plan.jobs, len(todo))} '
                     'at once (JOBS)')
    failure: list[AbError] = []

    def done(b: boots.Boot, r: guest.RunResult) -> bool:
        label = sides[b.side].label
        store.append(BenchRun(b.side, r.ok, round(r.seconds, 2), r.record, r.why,
                              '' if r.ok else r.console_tail, str(b.log)))
        if r.ok:
            have[b.side].add(b.seed)
            progress.say(f'counted run {sum(map(len, have.values()))}/{total} {label} '
                         f'(seed {b.seed}): {r.seconds:.1f} s, {_brief_counted(r.record)}')
            return True
        failures = len(store.failed_runs(b.side))
        progress.say(f'counted boot {label} seed {b.seed}: FAILED ({r.why}); console '
                     f'tail:\n{r.console_tail}')
        if failures > plan.max_failures:
            failure.append(AbError(
                f'{label}: {failures} failed runs (last: {r.why}); consoles in {consoles}; '
                f'the {len(store.runs)} runs so far are kept in {store.path} and a rerun '
                'resumes from them'))
            return False
        queue(b.side, b.seed)      # the same seed again
        return True

    boots.run(todo, plan.jobs, done, countstore.for_command())
    if failure:
        raise failure[0]
    return store


def _interleave(plan: AbPlan, store: Store, runs: int) -> Store:
    """The timed runs, one at a time: the side behind goes next."""
    sides = {'a': plan.a, 'b': plan.b}
    if store.runs:
        progress.say(f'resuming {store.path}: {len(store.ok_runs("a"))} {plan.a.label} and '
                     f'{len(store.ok_runs("b"))} {plan.b.label} good runs already there')
    consoles = plan.out / 'consoles'
    consoles.mkdir(parents=True, exist_ok=True)
    total = 2 * runs
    while True:
        have = {s: len(store.ok_runs(s)) for s in sides}
        if min(have.values()) >= runs:
            return store
        s = 'a' if have['a'] <= have['b'] else 'b'
        side = sides[s]
        n = len(store.runs) + 1
        log = consoles / f'{n:03d}-{side.label}.log'
        start = time.monotonic()
        r = guest.run(side.guest, side.initrd, plan.topology, plan.timeout, log)
        store.append(BenchRun(s, r.ok, round(time.monotonic() - start, 2), r.record, r.why,
                              '' if r.ok else r.console_tail, str(log)))
        done = sum(have.values()) + (1 if r.ok else 0)
        if r.ok:
            progress.say(f'run {done}/{total} {side.label}: {r.seconds:.1f} s, '
                         f'{_brief(r.record)}')
            continue
        failures = len(store.failed_runs(s))
        progress.say(f'run {n} {side.label}: FAILED ({r.why}); console tail:\n'
                     f'{r.console_tail}')
        if failures > plan.max_failures:
            raise AbError(f'{side.label}: {failures} failed runs (last: {r.why}); '
                          f'consoles in {consoles}; the {len(store.runs)} runs so far are '
                          f'kept in {store.path} and a rerun resumes from them')
