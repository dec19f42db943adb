# SPDX-License-Identifier: GPL-2.0
"""Naming the plugin's PCs and data lines from the guest kernel's System.map."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

from kloc.counting.counts import Line
from kloc.counting.errors import CountingError
from kloc.counting.qemu_args import ARM_VIRT_IMAGE_PHYS

X86_START_KERNEL_MAP = 0xffff_ffff_8000_0000   # x86_64's kernel image mapping, without KASLR


@dataclass(frozen=True)
class Symbol:
    addr: int
    kind: str
    name: str


class SymbolMap:
    """A guest kernel's System.map: PCs to functions, image data to its symbols."""

    def __init__(self, path: Path) -> None:
        syms: list[Symbol] = []
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) < 3:
                continue
            try:
                syms.append(Symbol(int(parts[0], 16), parts[1], parts[2]))
            except ValueError:
                continue
        syms.sort(key=lambda s: s.addr)
        self.text = [s for s in syms if s.kind in 'tTwW']
        self.data = [s for s in syms if s.kind in 'dDbBrRvV']
        self._text_keys = [s.addr for s in self.text]
        self.data_keys = [s.addr for s in self.data]
        by_name = {s.name: s.addr for s in syms}
        self.start = by_name.get('_text', by_name.get('_stext', 0))
        self.end = by_name.get('_end', 0)

    @staticmethod
    def _find(keys: list[int], syms: list[Symbol], addr: int) -> str:
        i = bisect.bisect_right(keys, addr) - 1
        if i < 0:
            return ''
        s = syms[i]
        names = [s.name]   # aliases, and zero-size objects (lock keys) at one address
        j = i - 1
        while j >= 0 and syms[j].addr == s.addr:
            if syms[j].name not in names:
                names.insert(0, syms[j].name)
            j -= 1
        name = '|'.join(names)
        return name if addr == s.addr else f'{name}+{addr - s.addr:#x}'

    def in_image(self, vaddr: int) -> bool:
        return self.start <= vaddr < self.end

    def function(self, pc: int) -> str:
        """'name+0xoff' for a kernel PC, '' for one outside the image (user space)."""
        return self._find(self._text_keys, self.text, pc) if self.in_image(pc) else ''

    def data_symbol(self, vaddr: int) -> str:
        """The static-data symbol at a kernel-image address, else ''."""
        return self._find(self.data_keys, self.data, vaddr) if self.in_image(vaddr) else ''

    def image_vaddr(self, paddr: int, arch: str, phys_offset: int | None = None) -> int | None:
        """The kernel-image virtual address of a guest-physical one, if it is in the image.

        x86_64 without KASLR: the image runs at __START_KERNEL_map + phys
        (phys_offset 0). arm64 virt: the Image is loaded at 0x40200000 and
        _text maps to it (phys_offset = that load address). Not for the
        direct map, where dynamic objects live: those have no symbol.
        """
        if arch == 'x86_64':
            v = paddr + X86_START_KERNEL_MAP - (phys_offset or 0)
        else:
            v = paddr - (ARM_VIRT_IMAGE_PHYS if phys_offset is None else phys_offset) \
                + self.start
        return v if self.in_image(v) else None


def load_system_map(path: Path) -> SymbolMap:
    if not path.is_file():
        raise CountingError(f'{path}: no System.map; it is in the guest build directory')
    syms = SymbolMap(path)
    if not syms.text or not syms.end:
        raise CountingError(f'{path} has no kernel symbols (Debian ships a placeholder: the '
                            'real one is in the -dbg package); use the System.map of the '
                            'guest build')
    return syms


PERCPU_OFFSETS = '__per_cpu_offset'


def percpu_offsets(path: Path) -> int | None:
    """The address of the kernel's __per_cpu_offset[] in a System.map (no KASLR),
    for the plugin's percpu= (its register check of the running vCPU); None
    where there is no map, or it has none (a kernel without SMP): the boot is
    counted without the check, and its counts say so (vcpu_index.check)."""
    if not path.exists():
        return None
    try:
        text = path.read_text()
    except OSError as e:
        raise CountingError(f'{path}: cannot read the System.map ({e.strerror})') from None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == PERCPU_OFFSETS and parts[1] in 'dDbBrR':
            try:
                return int(parts[0], 16)
            except ValueError:
                break
    return None


def percpu_arg(path: Path) -> list[str]:
    """The plugin's percpu= argument from a guest's System.map, or nothing."""
    addr = percpu_offsets(path)
    return [f'percpu={addr:#x}'] if addr else []


def describe_line(line: Line, syms: SymbolMap | None, arch: str) -> str:
    """What a contended line holds: the static symbol its first counted access
    touched, or what kind of memory it is."""
    if line.vaddr >> 63 == 0:
        return 'user'
    if syms is None:
        return ''
    if syms.in_image(line.vaddr):
        return syms.data_symbol(line.vaddr) or 'kernel image'
    v = syms.image_vaddr(line.paddr + (line.vaddr & (line.size - 1)), arch)
    if v is not None:
        return syms.data_symbol(v) or 'kernel image'
    return 'kernel, dynamic (direct map)'


def line_symbols(line: Line, syms: SymbolMap, arch: str) -> list[str]:
    """Every static symbol that starts in the line (false sharing: more than one)."""
    base = line.vaddr & ~(line.size - 1) if syms.in_image(line.vaddr) \
        else syms.image_vaddr(line.paddr, arch)
    if base is None:
        return []
    i = bisect.bisect_left(syms.data_keys, base)
    out = []
    while i < len(syms.data) and syms.data[i].addr < base + line.size:
        if syms.data[i].name not in out:
            out.append(syms.data[i].name)
        i += 1
    return out


@dataclass(frozen=True)
class Moved:
    """How two builds' System.maps differ: what a patch did to the layout."""
    common: int         # symbols (by name, one address each) in both
    moved: int          # of those, at another address
    added: int          # in the second only
    removed: int        # in the first only

    def to_json(self) -> dict[str, int]:
        return {'common': self.common, 'moved': self.moved, 'added': self.added,
                'removed': self.removed}


def _addresses(path: Path) -> dict[str, int]:
    """Each symbol name of a System.map that occurs once, and its address (a static
    name defined in several files is left out: which is which cannot be told)."""
    seen: dict[str, int] = {}
    twice: set[str] = set()
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        try:
            addr = int(parts[0], 16)
        except ValueError:
            continue
        if parts[2] in seen:
            twice.add(parts[2])
        seen[parts[2]] = addr
    return {k: v for k, v in seen.items() if k not in twice}


def moved(a: Path, b: Path) -> Moved:
    """How far the symbols of System.map b sit from those of a."""
    for p in (a, b):
        if not p.is_file():
            raise CountingError(f'{p}: no System.map; it is in the guest build directory')
    sa, sb = _addresses(a), _addresses(b)
    common = sa.keys() & sb.keys()
    return Moved(len(common), sum(sa[k] != sb[k] for k in common), len(sb.keys() - sa.keys()),
                 len(sa.keys() - sb.keys()))
