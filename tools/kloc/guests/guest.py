# SPDX-License-Identifier: GPL-2.0
"""Minimal guest kernels and initramfs images for the loopback kselftest.

A guest is tinyconfig plus the fragments in configs/ (base, numa, and the
slab allocator), built once per tree, arch and allocator, with a busybox
initramfs that holds the kselftest installed the stock way (make -C
tools/testing/selftests TARGETS=lo_counters install, static), runs the
installed test once and reboots. A run that panics, hangs or prints no
result is a failed run with its console tail, never a result.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kloc import filelock, progress
from kloc.counting import qemu_args, symbols
from kloc.counting.counts import per_packet, read_counts
from kloc.counting.errors import CountingError
from kloc.counting.plugin import Plugin
from kloc.qemu import arches
from kloc.atomicfile import write_bytes, write_text
from kloc.qemu.topology import Topology, accel_args
from kloc.kunitpy.runner import build_env
from kloc.paths import PACKAGE_ROOT, cache_dir
from kloc.trees import archive, buildstamp, kernels
from kloc.trees.sources import Tree
from kloc.procs import disk_full_hint, run_logged, tail
from kloc.version import KernelVersion
from kloc.errors import KlocError

CONFIGS = PACKAGE_ROOT / 'configs'
SELFTEST = PACKAGE_ROOT / 'selftests' / 'lo_counters' / 'lo_counters.c'
BUSYBOX = Path('/bin/busybox')
ALLOCATORS = ('slub', 'slab')
BEGIN, END = 'KLOC-RESULT-BEGIN', 'KLOC-RESULT-END'


class GuestError(KlocError):
    """A guest cannot be built for this request."""


@dataclass(frozen=True)
class Guest:
    tree: Tree
    arch: str
    allocator: str

    @property
    def name(self) -> str:
        return f'{self.tree.label}-{self.arch}-{self.allocator}'

    def build_dir(self) -> Path:
        return self.tree.path.parent / f'guest-{self.arch}-{self.allocator}'

    def image(self) -> Path:
        return self.build_dir() / arches.get(self.arch).image


def fragments(allocator: str, arch: str) -> list[Path]:
    """The config fragments a guest takes on top of tinyconfig: on arm64, the PCI
    device behind the ITS that the MSI workload drives (its-msi.config) as well."""
    its = [CONFIGS / 'its-msi.config'] if arch == 'arm64' else []
    return [CONFIGS / 'guest-base.config', CONFIGS / 'numa.config',
            CONFIGS / f'{allocator}.config', *its]


def check(guest: Guest) -> None:
    if guest.arch not in arches.ARCHES:
        raise GuestError(f'no guest for arch {guest.arch}; use one of '
                         f'{", ".join(arches.ARCHES)}')
    if guest.allocator not in ALLOCATORS:
        raise GuestError(f'allocator {guest.allocator!r}: use slub or slab')
    if guest.allocator == 'slab' and not kernels.has_slab(guest.tree.version):
        raise GuestError(f'SLAB is not available on Linux {guest.tree.version}: it was '
                         'deprecated in 6.5 and removed in 6.8; use KERNEL=6.1 for SLAB')
    build_nice()    # refused here, before any build, not only where one is needed


MIN_FREE_GIB = 4


def check_space(where: Path) -> None:
    """Refuse to start builds on a nearly full disk."""
    where.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(where).free / 2 ** 30
    if free < MIN_FREE_GIB:
        raise GuestError(f'{where} has {free:.1f} GiB free; kernel builds need at least '
                         f'{MIN_FREE_GIB} GiB: free some space, or point KLOC_CACHE at a '
                         'bigger disk')


# Every guest kernel carries the same build stamp (Documentation/kbuild/
# reproducible-builds.rst): the kernel mixes its utsname into its random pool at
# boot, so two builds of one source (a review's comment-only patch) would draw
# different numbers from one seed, and count differently, for their dates alone.
BUILD_STAMP = {'KBUILD_BUILD_TIMESTAMP': '2026-01-01 00:00:00 UTC',
               'KBUILD_BUILD_USER': 'kloc', 'KBUILD_BUILD_HOST': 'kloc',
               'KBUILD_BUILD_VERSION': '1'}


def _command(guest: Guest) -> list[str]:
    cross = arches.get(guest.arch).cross_prefix()
    cmd = ['make', '-C', str(guest.tree.path), f'O={guest.build_dir()}', f'ARCH={guest.arch}',
           f'-j{os.cpu_count() or 1}', f'CC=ccache {cross}gcc']
    if cross:
        cmd.append(f'CROSS_COMPILE={cross}')
    return cmd


# KLOC_BUILD_NICE: the niceness of a guest's make (0 to 19; make test builds its
# guests in the background at 19, beside its other phases). Only make: the boots that
# follow keep the command's own priority, as their time limits assume.
BUILD_NICE = 'KLOC_BUILD_NICE'


def build_nice() -> list[str]:
    """The prefix that runs a guest's make at KLOC_BUILD_NICE (none where unset or 0)."""
    value = os.environ.get(BUILD_NICE, '').strip()
    if not value:
        return []
    if not value.isdigit() or int(value) > 19:
        raise GuestError(f'{BUILD_NICE}={value!r} is not a niceness from 0 to 19: give a '
                         f'number in that range (19: the lowest priority), or unset it')
    return ['nice', '-n', str(int(value))] if int(value) else []


def _make(guest: Guest, *targets: str, log: Path) -> None:
    cmd = build_nice() + _command(guest)
    rc = run_logged(cmd + list(targets), log, f'{guest.name} {" ".join(targets)}',
                    env=dict(build_env(cache_dir()), **BUILD_STAMP))
    if rc:
        raise GuestError(f'{guest.name}: make {" ".join(targets)} failed; '
                         f'{disk_full_hint(log)}last lines of {log}:\n{tail(log)}')


def build(guest: Guest, logs: Path, tree_digest: str = '') -> Path:
    """Configure and build the guest kernel; return its image. One build of a build dir
    at a time: a second command (two reviews of one base at once) waits for the first.
    tree_digest: the tree's buildstamp digest, where the caller has it."""
    check(guest)
    bdir = guest.build_dir()
    bdir.mkdir(parents=True, exist_ok=True)
    with filelock.exclusive(bdir.with_name(bdir.name + '.lock')):
        return _build(guest, bdir, logs, tree_digest)


def _build(guest: Guest, bdir: Path, logs: Path, tree_digest: str) -> Path:
    start = time.monotonic()
    digest = tree_digest or buildstamp.tree_digest(guest.tree.path)
    inputs = _inputs(guest)
    if buildstamp.unchanged(bdir, digest, inputs, guest.image()):
        progress.say(f'{guest.name}: {guest.image()} reused, nothing changed since its '
                     f'last build ({time.monotonic() - start:.1f} s to check)')
        return guest.image()
    buildstamp.begin(bdir)
    _configure(guest, bdir, logs)
    image = arches.get(guest.arch).image
    progress.say(f'{guest.name}: building {image}')
    _make(guest, os.path.basename(image), log=logs / f'{guest.name}-build.log')
    buildstamp.record(bdir, digest, inputs, guest.image())
    return guest.image()


def configure(guest: Guest, logs: Path) -> Path:
    """The guest's .config (tinyconfig and the fragments), made if the fragments
    changed, without building: seconds, where a cold build takes minutes. Its path."""
    check(guest)
    bdir = guest.build_dir()
    bdir.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    with filelock.exclusive(bdir.with_name(bdir.name + '.lock')):
        _configure(guest, bdir, logs)
    return bdir / '.config'


def _configure(guest: Guest, bdir: Path, logs: Path) -> None:
    frags = fragments(guest.allocator, guest.arch)
    wanted = '\n'.join(p.read_text() for p in frags)
    stamp = bdir / '.kloc-fragments'
    if not stamp.exists() or stamp.read_text() != wanted:
        names = ', '.join(p.name for p in frags)
        progress.say(f'{guest.name}: configuring (tinyconfig + {names})')
        _make(guest, 'tinyconfig', log=logs / f'{guest.name}-config.log')
        subprocess.run([str(guest.tree.path / 'scripts/kconfig/merge_config.sh'), '-m', '-O',
                        str(bdir), str(bdir / '.config')] + [str(f) for f in frags],
                       check=True, capture_output=True, cwd=guest.tree.path,
                       env=dict(os.environ, ARCH=guest.arch))
        _make(guest, 'olddefconfig', log=logs / f'{guest.name}-config.log')
        config = (bdir / '.config').read_text()
        for need in ('CONFIG_NUMA=y', f'CONFIG_{guest.allocator.upper()}=y', 'CONFIG_NET_NS=y'):
            if need not in config.splitlines():
                raise GuestError(f'{guest.name}: {need} did not survive olddefconfig')
        write_text(stamp, wanted)


def _inputs(guest: Guest) -> list[str]:
    """What a guest build is made from besides the tree: make's command line and
    environment, the configuration fragments, the compiler."""
    cross = arches.get(guest.arch).cross_prefix()
    return [*_command(guest), *(f'{k}={v}' for k, v in sorted(BUILD_STAMP.items())),
            *(p.read_text() for p in fragments(guest.allocator, guest.arch)),
            buildstamp.compiler(f'{cross}gcc')]


TARGET = 'lo_counters'
# Where the initramfs holds the kselftest install; its init runs the test from it.
GUEST_INSTALL = 'kselftest'
GUEST_TEST = f'/{GUEST_INSTALL}/{TARGET}/{TARGET}'


def install_command(arch: str, ksft_dir: Path, install_path: Path, build: Path) -> list[str]:
    """The stock kselftest install of lo_counters, static, for arch.

    make -C <tree>/tools/testing/selftests TARGETS=lo_counters install, as
    tuxmake, KernelCI and LKFT run it; O= keeps the build out of the tree.
    """
    cross = arches.get(arch).cross_prefix()
    cmd = ['make', '-C', str(ksft_dir), f'TARGETS={TARGET}', 'install',
           f'INSTALL_PATH={install_path}', f'O={build}', f'ARCH={arch}',
           'LDFLAGS=-static', f'CC={cross}gcc']
    if cross:
        cmd.append(f'CROSS_COMPILE={cross}')
    return cmd


def installed_test(install_path: Path) -> Path:
    return install_path / TARGET / TARGET


def static_selftest(arch: str, ksft_dir: Path, out: Path) -> Path:
    """Install the tree's lo_counters the stock way, static, into out/kselftest-<arch>;
    return the installed binary (initramfs() packs the install it sits in).
    """
    dest = out / f'kselftest-{arch}'
    log = out / f'kselftest-{arch}.log'
    out.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f'.{dest.name}.kloc-tmp')    # the install appears whole or not
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with tempfile.TemporaryDirectory(prefix='kloc-ksft-build-') as build:
            cmd = install_command(arch, ksft_dir, tmp, Path(build))
            rc = run_logged(cmd, log, f'{TARGET} install ({arch})')
        if rc or not installed_test(tmp).is_file():
            raise GuestError(f'{TARGET}: the stock kselftest install for {arch} failed '
                             f'(make -C {ksft_dir} TARGETS={TARGET} install); '
                             f'{disk_full_hint(log)}last lines of {log}:\n{tail(log)}')
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return installed_test(dest)


def install_root(binary: Path) -> Path | None:
    """The kselftest install the binary sits in (INSTALL/lo_counters/lo_counters), if any."""
    root = binary.parent.parent
    if binary.parent.name == TARGET and (root / 'run_kselftest.sh').is_file():
        return root
    return None


def _host_arch() -> str:
    m = os.uname().machine
    return 'arm64' if m == 'aarch64' else m


def busybox(arch: str) -> Path:
    """Debian's static busybox for arch: the host's own, or the foreign .deb unpacked."""
    if arch == _host_arch():
        if not BUSYBOX.exists():
            raise GuestError(f'{BUSYBOX} is missing: apt-get install busybox-static '
                             '(make deps)')
        return BUSYBOX
    dest = cache_dir() / 'busybox' / arch / 'busybox'
    if dest.exists():
        return dest
    pkg = f'busybox-static:{arches.get(arch).debian}'
    with tempfile.TemporaryDirectory(prefix='kloc-busybox-') as tmp:
        r = subprocess.run(['apt-get', 'download', pkg], cwd=tmp, capture_output=True,
                           text=True)
        debs = list(Path(tmp).glob('busybox-static_*.deb'))
        if r.returncode or not debs:
            raise GuestError(f'cannot download {pkg}: {r.stderr.strip()}\n'
                             f'{arch} guests need it; as root run: dpkg --add-architecture '
                             f'{arches.get(arch).debian} && apt-get update (make deps does this)')
        archive.unpack_deb(debs[0], Path(f'{tmp}/x'))
        write_bytes(dest, Path(f'{tmp}/x/bin/busybox').read_bytes(), mode=0o755)
    progress.say(f'unpacked {pkg} into {dest}')
    return dest


# With kloc.stock on the kernel command line, /init runs the install the stock
# way instead, run_kselftest.sh -c lo_counters with the test's defaults, and
# prints STOCK_END and its exit status. The runner needs a shell at /bin/sh,
# /dev/null, and /dev/stdout (its log file), which busybox's /dev lacks.
STOCK_FLAG, STOCK_END = 'kloc.stock', 'KLOC-STOCK-END'
STOCK_RUN = (f'if /bin/busybox grep -qw {STOCK_FLAG} /proc/cmdline; then\n'
             '\t/bin/busybox --install -s /bin\n'
             '\tmknod /dev/null c 1 3\n'
             '\tln -s /proc/self/fd/0 /dev/stdin\n'
             '\tln -s /proc/self/fd/1 /dev/stdout\n'
             '\tln -s /proc/self/fd/2 /dev/stderr\n'
             f'\tcd /{GUEST_INSTALL} && ./run_kselftest.sh -c {TARGET}\n'
             f'\techo "{STOCK_END} $?"\n'
             '\treboot -f\n'
             'fi\n')


def initramfs(binary: Path, args: list[str], out: Path, arch: str) -> Path:
    """busybox, the kselftest install, and an /init that runs the test once and reboots
    (or, with kloc.stock on the command line, runs run_kselftest.sh: STOCK_RUN).

    binary is the installed test static_selftest() returns: its whole install
    (run_kselftest.sh, kselftest/, lo_counters/) goes in as /kselftest. Any
    other static program is packed alone in the test's place.
    """
    box = busybox(arch)
    with tempfile.TemporaryDirectory(prefix='kloc-initramfs-') as tmp:
        root = Path(tmp)
        for d in ('bin', 'proc', 'sys', 'dev'):
            (root / d).mkdir()
        shutil.copy2(box, root / 'bin' / 'busybox')
        installed = install_root(binary)
        inside = root / GUEST_INSTALL
        if installed is not None:
            shutil.copytree(installed, inside, symlinks=True)
        else:
            (inside / TARGET).mkdir(parents=True)
            shutil.copy2(binary, inside / TARGET / TARGET)
        init = root / 'init'
        init.write_text('#!/bin/busybox sh\n'
                        '/bin/busybox mount -t proc proc /proc\n'
                        '/bin/busybox mount -t sysfs sys /sys\n'
                        + STOCK_RUN +
                        f'{GUEST_TEST} {" ".join(args)} -j /tmp.json\n'
                        'rc=$?\n'
                        f'echo {BEGIN}\n/bin/busybox cat /tmp.json\necho "{END} $rc"\n'
                        '/bin/busybox reboot -f\n')
        init.chmod(0o755)
        return pack(root, out)


# Every file of an initramfs gets this mtime, and the archive no inode numbers,
# owners or gzip timestamp of its own: two packs of the same files are the same
# bytes, so counted boots of one seed count alike from one comparison to the next
# (the guest's memory layout follows what it unpacks).
PACK_MTIME = 1767225600         # 2026-01-01T00:00:00Z, the fixed RTC's date


def pack(root: Path, out: Path) -> Path:
    """root's files as a gzipped newc cpio at out: an initramfs, reproducibly."""
    files = sorted(subprocess.run(['find', '.'], cwd=root, capture_output=True, text=True,
                                  check=True).stdout.splitlines())
    for f in files:
        os.utime(root / f, (PACK_MTIME, PACK_MTIME), follow_symlinks=False)
    cpio = subprocess.run(['cpio', '-o', '-H', 'newc', '--quiet', '--reproducible',
                           '--owner=0:0'], cwd=root,
                          input=('\n'.join(files) + '\n').encode(), capture_output=True,
                          check=True).stdout
    write_bytes(out, subprocess.run(['gzip', '-9', '-n'], input=cpio, capture_output=True,
                                    check=True).stdout)
    return out


@dataclass
class RunResult:
    ok: bool
    record: dict[str, object] | None
    seconds: float
    why: str
    console_tail: str


def parse_console(console: str) -> tuple[dict[str, object] | None, str]:
    """The JSON record between the markers, and why there is none."""
    if BEGIN not in console:
        return None, 'the guest printed no result: it panicked, hung or never ran the test'
    body = console.split(BEGIN, 1)[1]
    if END not in body:
        return None, 'the result was cut short'
    text, _, rest = body.partition(END)
    rc = rest.split()[0] if rest.split() else '?'
    try:
        record = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, f'the selftest exited {rc} without a JSON record'
    if not isinstance(record, dict):
        return None, 'the JSON record is not an object'
    if rc != '0':
        return record, f'the selftest failed (exit {rc})'
    return record, ''


def config_digest(guest: Guest) -> str:
    """What the built guest really is: a hash of its .config."""
    return hashlib.sha256((guest.build_dir() / '.config').read_bytes()).hexdigest()[:16]


def check_machine(record: dict[str, object], topo: Topology) -> str:
    """Why the record does not come from the machine the topology describes, or ''."""
    per_cpu = record.get('per_cpu')
    if not isinstance(per_cpu, list):
        return 'the record has no per-CPU figures'
    nodes = {c.get('node') for c in per_cpu if isinstance(c, dict)}
    if len(per_cpu) != topo.cpus or len(nodes) != len(topo.nodes):
        return (f'the guest ran on {len(per_cpu)} CPUs in {len(nodes)} nodes, but topology '
                f'{topo.name} has {topo.cpus} CPUs in {len(topo.nodes)} nodes: check '
                'CONFIG_NR_CPUS and CONFIG_NUMA in the guest config')
    return ''


def qemu_command(guest: Guest, initrd: Path, topo: Topology,
                 counted: bool = False, append: str = '') -> list[str]:
    """counted: for qemu_args.counted_command(), which picks the accelerator (TCG),
    with the kernel where its System.map says (counted boots name PCs by it).
    append: more of the kernel's command line."""
    console = arches.get(guest.arch).console
    extra = (' nokaslr' if counted else '') + (f' {append}' if append else '')
    accel = [] if counted else accel_args(topo.qemu_arch)
    return [topo.qemu_binary, *topo.machine_args(),
            *accel, '-m', '1024', '-kernel', str(guest.image()),
            '-initrd', str(initrd), '-append', f'console={console} panic=-1 quiet{extra}',
            '-nographic', '-nodefaults', '-serial', 'stdio', '-no-reboot']


# A counted boot's clock: virtual time advances with the instructions run
# (1 ns each), and an idle guest skips ahead. Timer interrupts then fall at
# the same points of the work in every boot, whatever the host's speed:
# without it, instructions per packet varied by 1.6% between boots, with it
# by 0.1% (docs/counting.md).
ICOUNT = ['-icount', 'shift=0,sleep=off']
# Every counted boot runs under icount with all its vCPUs online. Linux
# before 6.12 (6.1.192, tinyconfig and Debian's cloud kernel alike) hangs
# under QEMU 7.2's icount at "x86: Booting SMP configuration", with every
# shift and sleep setting tried: with icount and SMP, 7.2's round-robin vCPU
# scheduler could starve a vCPU for good ("accel/tcg/tcg-accel-ops-rr: ensure
# fairness with icount", QEMU 8.1). QEMU 10.0 (qemu/release.py) boots it in
# 56 s; where only an older QEMU runs, those counted boots are refused.
ICOUNT_SMP_HANGS_BEFORE = KernelVersion(6, 12)
ICOUNT_SMP_FAIR_FROM = (8, 1)


def check_counted(g: Guest, topo: Topology) -> None:
    """Refuse counted boots this QEMU cannot run under icount with every vCPU."""
    if g.tree.version >= ICOUNT_SMP_HANGS_BEFORE:
        return
    binary = topo.qemu_binary
    try:
        have = qemu_args.qemu_version(binary)
    except CountingError as e:
        raise GuestError(f'counted boots: {e}') from None
    if have < ICOUNT_SMP_FAIR_FROM:
        raise GuestError(
            f'counted boots of Linux {g.tree.version} need QEMU '
            f'{ICOUNT_SMP_FAIR_FROM[0]}.{ICOUNT_SMP_FAIR_FROM[1]} or later: under QEMU '
            f'{have[0]}.{have[1]}\'s icount its secondary CPUs never come up. make deps '
            'fetches QEMU 10.0 (unset KLOC_SYSTEM_QEMU), or give COUNTED=0')


# How much longer a counted boot may take than a timed one (measured: 3-9x):
# it runs all vCPUs in one host thread, under the plugin.
COUNTED_SLOWDOWN = 12


# A counted boot's randomness, fixed: under icount the guest runs the same way from
# boot to boot but for what it draws from the host, RDRAND/RDSEED (x86 -cpu max)
# and the device tree's rng-seed (arm64 virt), and the wall clock it reads from the
# RTC, which it also mixes into its random pool. QEMU's -seed makes the first
# deterministic, the RTC on the virtual clock from a fixed date the second: boots
# with one seed then count the same, to the last access (docs/counting.md, "The
# guest's randomness, fixed per pair"). Boot k of each side of a comparison gets
# seed k.
RTC_FIXED = ['-rtc', 'base=2026-01-01T00:00:00,clock=vm']


def seed_args(seed: int) -> list[str]:
    return ['-seed', str(seed)] + RTC_FIXED


def counted_command(guest: Guest, initrd: Path, topo: Topology, plugin: Plugin,
                    counts: Path, seed: int | None = None) -> list[str]:
    """A counted boot: TCG with one host thread and icount, the plugin, no KASLR; with
    seed, the guest's randomness and clock fixed (seed_args)."""
    cmd = qemu_command(guest, initrd, topo, counted=True)
    percpu = symbols.percpu_arg(guest.build_dir() / 'System.map')
    fixed = seed_args(seed) if seed is not None else []
    return qemu_args.counted_command(cmd, plugin.path, counts, extra=percpu) + ICOUNT + fixed


def run(guest: Guest, initrd: Path, topo: Topology, timeout: int,
        console_log: Path, plugin: Plugin | None = None, seed: int | None = None) -> RunResult:
    """One boot. With a plugin, a counted boot: the record gets its per-packet
    figures under 'counted', and the plugin's JSON beside the console; seed: its
    randomness and clock fixed (seed_args), and recorded.
    timeout: a timed boot's; a counted boot gets COUNTED_SLOWDOWN times it."""
    counts = counts_path(console_log)
    if plugin is None:
        cmd = qemu_command(guest, initrd, topo)
    else:
        counts.unlink(missing_ok=True)
        cmd = counted_command(guest, initrd, topo, plugin, counts, seed)
        timeout *= COUNTED_SLOWDOWN
    start = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors='replace',
                           timeout=timeout, stdin=subprocess.DEVNULL)
        out = r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b'').decode(errors='replace') if isinstance(e.stdout, bytes) \
            else (e.stdout or '')
        out += f'\n[kloc: killed after {timeout} s]\n'
    secs = time.monotonic() - start
    write_text(console_log, out)
    return result(out, secs, topo, counts if plugin is not None else None, seed)


def counts_path(console_log: Path) -> Path:
    """Where a counted boot's plugin JSON goes: beside its console."""
    return console_log.with_name(console_log.stem + '.counts.json')


def result(out: str, secs: float, topo: Topology, counts: Path | None,
           seed: int | None = None) -> RunResult:
    """A boot's result from its console (out) and, for a counted boot, the plugin's
    raw counts in the file counts: the figures are computed here, from them, so a
    stored boot's (bench/countstore.py) are those of the code that reads them now."""
    record, why = parse_console(out)
    if record and not why:
        why = check_machine(record, topo)
    if record and not why and counts is not None:
        try:
            c = read_counts(counts)
            ix = c.vcpu_index
            # where the per-vCPU split came from, and how it was checked
            index = {'source': ix.source, 'callback_index_wrong': ix.callback_index_wrong,
                     'unresolved': ix.unresolved,
                     'check': None if ix.check is None else
                     {'registers': list(ix.check.registers), 'blocks': ix.check.blocks,
                      'agree': ix.check.agree, 'disagree': ix.check.disagree,
                      'unmapped': ix.check.unmapped, 'pending': ix.check.pending}}
            record = dict(record, counted=per_packet(c, record), counted_vcpu_index=index,
                          counts_file=str(counts), seed=seed)
        except CountingError as e:
            why = f'counted boot: {e}'
    return RunResult(not why, record, secs, why, '\n'.join(out.splitlines()[-25:]))
