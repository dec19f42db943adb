# SPDX-License-Identifier: GPL-2.0
"""The plugin's QEMU command line: its arguments read from a run's QEMU options, then added.

The node memory map (guest-physical ranges, and before QEMU 8.2 the
RAM-block offsets the plugin is given instead) and the vCPU-to-node map
come from -object memory-backend-*, -numa and -machine; counted_command()
loads the plugin under TCG.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kloc.counting.errors import CountingError, run_tool
from kloc.qemu import release

# Before QEMU 8.2 ("plugin: Simplify struct qemu_plugin_hwaddr"),
# qemu_plugin_hwaddr_phys_addr() returned a RAM block's ram_addr offset plus
# its region's offset in its container, not the guest-physical address.
PHYS_ADDR_FIXED = (8, 2)
X86_RAM_BELOW_4G = {'pc': 3 << 30, 'q35': 2 << 30}   # all RAM below 4 GiB up to this
ARM_VIRT_RAM_BASE = 0x4000_0000
# Where QEMU's arm64 loader puts an Image with text_offset 0 (RAM base + 2 MiB).
ARM_VIRT_IMAGE_PHYS = ARM_VIRT_RAM_BASE + 0x20_0000

_SIZE = re.compile(r'^(\d+)([KMGT]?)B?$', re.I)


def parse_size(text: str) -> int:
    """QEMU's size syntax: a plain number is bytes; K, M, G, T suffixes."""
    m = _SIZE.match(text.strip())
    if not m:
        raise CountingError(f'cannot read the size {text!r}')
    shift = {'': 0, 'K': 10, 'M': 20, 'G': 30, 'T': 40}[m.group(2).upper()]
    return int(m.group(1)) << shift


def _opts(text: str) -> tuple[str, list[tuple[str, str]]]:
    head, *rest = text.split(',')
    return head, [(k, v) for k, _, v in (p.partition('=') for p in rest)]


def _cpu_list(text: str) -> list[int]:
    lo, _, hi = text.partition('-')
    return list(range(int(lo), int(hi or lo) + 1))


@dataclass(frozen=True)
class MemNode:
    node: int
    cpus: tuple[int, ...]
    size: int          # bytes
    gpa: int           # guest-physical start
    raw: int           # what qemu_plugin_hwaddr_phys_addr() gives for its first byte


@dataclass(frozen=True)
class MemoryMap:
    arch: str          # 'x86_64' or 'aarch64'
    machine: str
    nodes: tuple[MemNode, ...]

    def plugin_args(self, remap: bool) -> list[str]:
        args = []
        for n in self.nodes:
            args.append(f'node={n.node}:{n.gpa:#x}-{n.gpa + n.size - 1:#x}')
        for n in self.nodes:
            lo, hi = n.cpus[0], n.cpus[-1]
            if list(n.cpus) != list(range(lo, hi + 1)):
                args += [f'cpus={c}:{n.node}' for c in n.cpus]
            else:
                args.append(f'cpus={lo}-{hi}:{n.node}' if hi > lo else f'cpus={lo}:{n.node}')
        if remap:
            for n in self.nodes:
                args.append(f'ram={n.raw:#x}-{n.raw + n.size - 1:#x}:{n.gpa:#x}')
        return args


def qemu_arch(cmd: list[str]) -> str:
    name = os.path.basename(cmd[0])
    if not name.startswith('qemu-system-'):
        raise CountingError(f'{cmd[0]}: not a qemu-system-* command')
    return name.removeprefix('qemu-system-')


def memory_map(cmd: list[str]) -> MemoryMap:
    """The node memory map of a QEMU command line with -object memory-backend-* and -numa.

    Backends are RAM blocks in the order of their -object options; the
    machine's RAM is a container holding them in -numa order, from 0 on
    x86_64 pc (all below 4 GiB while RAM is at most 3 GiB; q35: 2 GiB) and
    from 0x40000000 on arm64 virt.
    """
    arch = qemu_arch(cmd)
    backends: dict[str, int] = {}
    order: list[str] = []
    numa: list[tuple[int, list[int], str]] = []
    machine = ''
    for opt, val in zip(cmd, cmd[1:]):
        if opt == '-object':
            kind, kv = _opts(val)
            d = dict(kv)
            if kind.startswith('memory-backend-'):
                if 'id' not in d or 'size' not in d:
                    raise CountingError(f'-object {val}: a memory backend needs id= and size=')
                backends[d['id']] = parse_size(d['size'])
                order.append(d['id'])
        elif opt == '-numa':
            kind, kv = _opts(val)
            if kind != 'node':
                continue
            d = dict(kv)
            cpus = [c for k, v in kv if k == 'cpus' for c in _cpu_list(v)]
            if 'memdev' not in d:
                raise CountingError(f'-numa {val}: counting needs memdev= on every node')
            numa.append((int(d.get('nodeid', len(numa))), cpus, d['memdev']))
        elif opt in ('-machine', '-M'):
            machine = _opts(val)[0]
    if not numa:
        raise CountingError('the QEMU command has no -numa node options: the plugin needs '
                            "the topology's node memory map")
    if arch == 'x86_64':
        if machine not in X86_RAM_BELOW_4G:
            raise CountingError(f'machine {machine!r}: the x86_64 memory map is known for '
                                'pc and q35 only')
        base = 0
        limit = X86_RAM_BELOW_4G[machine]
    elif arch == 'aarch64':
        if machine != 'virt':
            raise CountingError(f'machine {machine!r}: the arm64 memory map is known for '
                                'virt only')
        base, limit = ARM_VIRT_RAM_BASE, 1 << 40
    else:
        raise CountingError(f'qemu-system-{arch}: counting supports x86_64 and aarch64')
    ram_addr: dict[str, int] = {}
    at = 0
    for b in order:   # find_ram_offset() hands out ram_addr space in creation order
        ram_addr[b] = at
        at += -(-backends[b] // (256 << 10)) * (256 << 10)
    nodes = []
    offset = 0
    for nodeid, cpus, memdev in numa:
        if memdev not in backends:
            raise CountingError(f'-numa node memdev={memdev}: no such memory backend')
        size = backends[memdev]
        nodes.append(MemNode(nodeid, tuple(cpus), size, base + offset,
                             ram_addr[memdev] + offset))
        offset += size
    if offset > limit:
        raise CountingError(f'{offset >> 20} MiB of RAM: on {machine} the plugin knows the '
                            f'memory map up to {limit >> 20} MiB')
    return MemoryMap(arch, machine, tuple(nodes))


def qemu_version(binary: str) -> tuple[int, int]:
    out = run_tool([binary, '--version'], 'asking QEMU its version')
    v = release.version_of(out)
    if v is None:
        raise CountingError(f'{binary} --version: no version in {out!r}')
    return v


def plugin_args(cmd: list[str], version: tuple[int, int] | None = None) -> list[str]:
    """node=, cpus= (and, before QEMU 8.2, ram=) arguments for this QEMU command."""
    v = version if version is not None else qemu_version(cmd[0])
    return memory_map(cmd).plugin_args(remap=v < PHYS_ADDR_FIXED)


def counted_command(cmd: list[str], plugin: Path, out_json: Path, threads: str = 'single',
                    extra: list[str] | None = None,
                    version: tuple[int, int] | None = None) -> list[str]:
    """cmd with the plugin loaded, writing out_json at exit, under TCG.

    threads='single' runs every vCPU in one host thread, round-robin: the
    plugin then sees no concurrent callbacks at all. 'multi' is MTTCG.
    """
    if threads not in ('single', 'multi'):
        raise CountingError(f'threads={threads!r}: use single or multi')
    for p in (plugin, out_json):
        if ',' in str(p):
            raise CountingError(f'{p}: QEMU cannot take a path with a comma in -plugin')
    args = plugin_args(cmd, version)
    out: list[str] = []
    i = 0
    while i < len(cmd):
        if cmd[i] == '-accel' and i + 1 < len(cmd):
            if cmd[i + 1].split(',')[0] != 'tcg':
                raise CountingError(f'-accel {cmd[i + 1]}: the plugin counts under TCG '
                                    'only; use KLOC_ACCEL=tcg')
            i += 2
            continue
        if cmd[i] == '-cpu' and i + 1 < len(cmd) and cmd[i + 1] == 'host':
            raise CountingError('-cpu host is for KVM; the plugin counts under TCG only')
        out.append(cmd[i])
        i += 1
    spec = ','.join([str(plugin)] + args + [f'out={out_json}'] + (extra or []))
    return out + ['-accel', f'tcg,thread={threads}', '-plugin', spec]
