# SPDX-License-Identifier: GPL-2.0
"""QEMU NUMA topologies: arm64 virt with a GICv3 ITS, and x86_64 pc.

QEMU writes no numa-node-id on the ITS node of its device tree. So the arm64
DTB is dumped with -machine dumpdtb, using exactly the options of the run,
the property is added with fdtput, and the run boots with -dtb. x86_64 gets
its NUMA layout from the ACPI SRAT that QEMU builds.

To add a topology, add an entry to TOPOLOGIES and a three-line file in
tools/qemu_configs/ that names it (copy one that is there).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kloc.qemu import arches
from kloc.defaults import shown
from kloc.paths import cache_dir
from kloc.errors import KlocError

KUNIT_MEM_MB = 1024  # kunit.py always passes -m 1024
QEMU = arches.get('arm64').qemu_binary
QBOOT = Path('/usr/share/qemu/qboot.rom')


class TopologyError(KlocError):
    """A topology is malformed, or its device tree cannot be made."""


@dataclass(frozen=True, kw_only=True)
class Node:
    cpus: int
    mem_mb: int


@dataclass(frozen=True, kw_only=True)
class Topology:
    name: str
    nodes: tuple[Node, ...]
    its_node: int | None  # None: the ITS gets no numa-node-id
    about: str
    arch: str = 'arm64'   # or 'x86_64'

    @property
    def cpus(self) -> int:
        return sum(n.cpus for n in self.nodes)

    def validate(self) -> None:
        total = sum(n.mem_mb for n in self.nodes)
        if total != KUNIT_MEM_MB:
            raise TopologyError(f'{self.name}: node memory adds up to {total} MiB, but '
                                f'kunit.py runs QEMU with -m {KUNIT_MEM_MB}')
        if self.its_node is not None and not 0 <= self.its_node < len(self.nodes):
            raise TopologyError(f'{self.name}: ITS on node {self.its_node}, which does '
                                'not exist')

    @property
    def qemu_arch(self) -> str:
        return arches.get(self.arch).qemu

    @property
    def qemu_binary(self) -> str:
        return arches.get(self.arch).qemu_binary

    def machine_args(self) -> list[str]:
        """QEMU options that shape the machine, and so the DTB."""
        return [*arches.get(self.arch).numa_machine, '-smp', str(self.cpus),
                *self.numa_args()]

    def numa_args(self) -> list[str]:
        """The -object/-numa options: one memory backend and node per Node."""
        args: list[str] = []
        first = 0
        for i, node in enumerate(self.nodes):
            last = first + node.cpus - 1
            args += ['-object', f'memory-backend-ram,id=m{i},size={node.mem_mb}M',
                     '-numa', f'node,nodeid={i},cpus={first}-{last},memdev=m{i}']
            first = last + 1
        return args


TWO_NODES = (Node(cpus=2, mem_mb=512), Node(cpus=2, mem_mb=512))
TOPOLOGIES: dict[str, Topology] = {t.name: t for t in (
    Topology(name='arm64_2n_its1', nodes=TWO_NODES, its_node=1,
             about='2 nodes x 2 CPUs, ITS on node 1 (remote from the boot CPU)'),
    Topology(name='arm64_2n_its0', nodes=TWO_NODES, its_node=0,
             about='2 nodes x 2 CPUs, ITS on node 0'),
    Topology(name='arm64_2n_itsnone', nodes=TWO_NODES, its_node=None,
             about='2 nodes x 2 CPUs, ITS on no node (NUMA_NO_NODE)'),
    Topology(name='arm64_1n', nodes=(Node(cpus=2, mem_mb=1024),), its_node=None,
             about='1 node x 2 CPUs'),
    Topology(name='x86_64_2n', nodes=TWO_NODES, its_node=None,
             about='x86_64, 2 nodes x 2 CPUs', arch='x86_64'),
)}


def get(name: str) -> Topology:
    try:
        return TOPOLOGIES[name]
    except KeyError:
        raise TopologyError(f'unknown topology {name!r}; known: '
                            f'{", ".join(TOPOLOGIES)}') from None


def parse_names(text: str) -> tuple[str, ...]:
    """TOPOLOGIES=: comma-separated topology names, each once; empty for all of them.
    The one reader of the variable, for every command that takes it."""
    if not text:
        return tuple(TOPOLOGIES)
    names = text.split(',')
    given = f'TOPOLOGIES={shown(text)}'
    fix = (f'give one or more of {", ".join(TOPOLOGIES)}, comma-separated, or '
           'TOPOLOGIES= (nothing) for all')
    if not any(names):
        raise TopologyError(f'{given} names no topology: {fix}')
    if '' in names:
        raise TopologyError(f'{given} has an empty name between commas: {fix}')
    for n in names:
        if n not in TOPOLOGIES:
            raise TopologyError(f'{given} names {shown(n)}, which is not a topology: {fix}')
        if names.count(n) > 1:
            raise TopologyError(f'{given} names {n} twice: {fix}')
    return tuple(names)


def kvm_possible(guest_arch: str, cpuinfo: Path = Path('/proc/cpuinfo')) -> bool:
    """Whether this host could run the guest under KVM at all: a native guest, a
    /dev/kvm it may use, and (x86) a CPU with virtualization extensions. A /dev/kvm
    can exist where the CPU has none (a nested guest without them): a boot probe
    there waited out its whole time limit before TCG ran."""
    host = platform.machine()
    native = host == guest_arch or (host == 'arm64' and guest_arch == 'aarch64')
    if not native or not os.access('/dev/kvm', os.R_OK | os.W_OK):
        return False
    return host != 'x86_64' or virtualization_flags(cpuinfo)


def virtualization_flags(cpuinfo: Path) -> bool:
    """Whether an x86 CPU's flags have vmx (Intel VT-x) or svm (AMD-V); True where
    cpuinfo cannot be read (the boot probe decides)."""
    try:
        text = cpuinfo.read_text(errors='replace')
    except OSError:
        return True
    for line in text.splitlines():
        if line.startswith('flags') and ':' in line:
            return bool({'vmx', 'svm'} & set(line.split(':', 1)[1].split()))
    return True


def kvm_verdict_path(guest_arch: str, cache: Path | None = None) -> Path:
    """Where a boot probe records whether KVM really runs guests here."""
    return (cache or cache_dir()) / f'kvm-{guest_arch}-{platform.release()}.json'


def kvm_proven(guest_arch: str, cache: Path | None = None) -> bool | None:
    try:
        return bool(json.loads(kvm_verdict_path(guest_arch, cache).read_text())['ok'])
    except (OSError, ValueError, KeyError):
        return None


def accel_args(guest_arch: str = 'aarch64') -> list[str]:
    """KVM where a boot probe showed that it works (or KLOC_ACCEL=kvm), else TCG."""
    want = os.environ.get('KLOC_ACCEL', 'auto')
    if want not in ('auto', 'kvm', 'tcg'):
        raise TopologyError(f'KLOC_ACCEL={want}: use auto, kvm or tcg')
    possible = kvm_possible(guest_arch)
    if want == 'kvm' and not possible:
        raise TopologyError(f'KLOC_ACCEL=kvm, but KVM cannot run a {guest_arch} guest '
                            f'on this {platform.machine()} host (or /dev/kvm is not usable)')
    if want == 'kvm' or (want == 'auto' and possible and kvm_proven(guest_arch)):
        return ['-accel', 'kvm', '-cpu', 'host']
    return ['-accel', 'tcg,thread=multi']


def _run(cmd: list[str], what: str) -> None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise TopologyError(f'{cmd[0]} not found: {what} needs it; run "make deps"') from None
    if r.returncode != 0:
        raise TopologyError(f'{what} failed: {" ".join(cmd)}\n{r.stderr.strip()}')


def _qemu_version() -> str:
    try:
        r = subprocess.run([QEMU, '--version'], capture_output=True, text=True)
    except FileNotFoundError:
        raise TopologyError(f'{QEMU} not found; run "make deps" '
                            '(Debian package qemu-system-arm)') from None
    return r.stdout.splitlines()[0] if r.stdout else ''


def _its_path(dtb: Path) -> str:
    """The device-tree path of the GICv3 ITS node."""
    r = subprocess.run(['fdtget', '-l', str(dtb), '/'], capture_output=True, text=True)
    for intc in r.stdout.split():
        if not intc.startswith('intc@'):
            continue
        sub = subprocess.run(['fdtget', '-l', str(dtb), f'/{intc}'],
                             capture_output=True, text=True)
        for child in sub.stdout.split():
            if child.startswith('its@'):
                return f'/{intc}/{child}'
    raise TopologyError(f'{dtb}: no /intc@*/its@* node; is gic-version=3 set?')


def dtb(topo: Topology, cache: Path | None = None) -> Path:
    """The DTB for this topology, made once per QEMU version and options."""
    topo.validate()
    args = topo.machine_args() + ['-m', str(KUNIT_MEM_MB)]
    key = hashlib.sha256('\n'.join([_qemu_version(), repr(topo), 'packed'] + args).encode())
    out_dir = (cache or cache_dir()) / 'dtb'
    out = out_dir / f'{topo.name}-{key.hexdigest()[:12]}.dtb'
    if out.exists():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f'.tmp{os.getpid()}')
    machine = args[1] + f',dumpdtb={tmp}'
    _run([QEMU] + args[:1] + [machine] + args[2:] + ['-accel', 'tcg', '-nographic',
                                                     '-nodefaults'],
         f'dumping the {topo.name} DTB')
    # QEMU dumps a 1 MiB blob, which a kernel booted with -dtb hangs on
    # before its console starts: pack it.
    _run(['dtc', '-q', '-I', 'dtb', '-O', 'dtb', '-o', str(tmp), str(tmp)],
         f'packing the {topo.name} DTB')
    if topo.its_node is not None:
        path = _its_path(tmp)
        _run(['fdtput', '-t', 'i', str(tmp), path, 'numa-node-id', str(topo.its_node)],
             f'adding numa-node-id to {path}')
        r = subprocess.run(['fdtget', str(tmp), path, 'numa-node-id'],
                           capture_output=True, text=True)
        if r.stdout.strip() != str(topo.its_node):
            raise TopologyError(f'{tmp}: numa-node-id did not stick on {path}')
    tmp.rename(out)
    return out


def kunit_params(name: str) -> dict[str, object]:
    """Keyword arguments for kunit.py's QemuArchParams."""
    topo = get(name)
    if topo.arch == 'x86_64':
        topo.validate()
        return {
            'linux_arch': 'x86_64',
            # Without PCI there is no ACPI NUMA, and the kernel fakes one node.
            'kconfig': '\n'.join(['CONFIG_SERIAL_8250=y', 'CONFIG_SERIAL_8250_CONSOLE=y',
                                  'CONFIG_SMP=y', 'CONFIG_NUMA=y', 'CONFIG_PCI=y',
                                  'CONFIG_X86_64_ACPI_NUMA=y']),
            'qemu_arch': arches.get('x86_64').qemu,
            'kernel_path': arches.get('x86_64').kunit_image,
            'kernel_command_line': f'console={arches.get("x86_64").console} panic=-1',
            'extra_qemu_params': topo.machine_args() + accel_args('x86_64')
            + (['-bios', str(QBOOT)] if QBOOT.exists() else []),
        }
    return {
        'linux_arch': 'arm64',
        'kconfig': '\n'.join(['CONFIG_SERIAL_AMBA_PL011=y',
                              'CONFIG_SERIAL_AMBA_PL011_CONSOLE=y',
                              'CONFIG_PCI=y', 'CONFIG_NUMA=y']),
        'qemu_arch': arches.get('arm64').qemu,
        'kernel_path': arches.get('arm64').kunit_image,
        'kernel_command_line': f'console={arches.get("arm64").console} panic=-1',
        'extra_qemu_params': topo.machine_args() + accel_args('aarch64')
        + ['-dtb', str(dtb(topo))],
    }
