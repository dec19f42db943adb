# SPDX-License-Identifier: GPL-2.0
"""Exact counts under TCG: the kloc-count QEMU plugin (tools/qemu-plugin).

Under TCG a timed run varies by 5-14% and no cache is modelled, so the
figures that can be trusted are counts. This module builds the plugin
against the installed QEMU's own qemu-plugin.h, derives its arguments (the
node memory map and the vCPU-to-node map) from a run's QEMU options, adds
it to a QEMU command line, parses the JSON it writes at exit into
dataclasses, and maps its PCs and data lines to kernel symbols with the
guest kernel's System.map.

Counts measure path length and sharing in a model; they are not time, and
not proof of a speed change on hardware.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kloc.errors import KlocError
from kloc.paths import PACKAGE_ROOT, cache_dir

PLUGIN_DIR = PACKAGE_ROOT / 'tools' / 'qemu-plugin'
MARKER_H = PLUGIN_DIR / 'kloc-marker.h'
GET_HEADER = PLUGIN_DIR / 'get-header.sh'
PLUGIN_SOURCES = ('kloc-count.c', 'Makefile')
PLUGIN_NAME = 'kloc-count'
PLUGIN_VERSION = '1.0'
# Before QEMU 8.2 ("plugin: Simplify struct qemu_plugin_hwaddr"),
# qemu_plugin_hwaddr_phys_addr() returned a RAM block's ram_addr offset plus
# its region's offset in its container, not the guest-physical address.
PHYS_ADDR_FIXED = (8, 2)
X86_RAM_BELOW_4G = {'pc': 3 << 30, 'q35': 2 << 30}   # all RAM below 4 GiB up to this
ARM_VIRT_RAM_BASE = 0x4000_0000
# Where QEMU's arm64 loader puts an Image with text_offset 0 (RAM base + 2 MiB).
ARM_VIRT_IMAGE_PHYS = ARM_VIRT_RAM_BASE + 0x20_0000
X86_START_KERNEL_MAP = 0xffff_ffff_8000_0000
LINE_BYTES = 64


class CountingError(KlocError):
    """The plugin cannot be built, set up or read."""


# Building

def _run(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    except FileNotFoundError:
        raise CountingError(f'{cmd[0]} not found: {what} needs it; run "make deps"') from None
    if r.returncode != 0:
        raise CountingError(f'{what} failed ({" ".join(cmd)}):\n'
                            f'{(r.stderr or r.stdout).strip()}')
    return r.stdout


def header_dir() -> Path:
    """The directory with qemu-plugin.h of the installed QEMU (fetched once)."""
    out = _run([str(GET_HEADER)], 'getting qemu-plugin.h')
    path = Path(out.strip().splitlines()[-1]) if out.strip() else Path()
    if not (path / 'qemu-plugin.h').is_file():
        raise CountingError(f'{GET_HEADER} printed no directory with qemu-plugin.h')
    return path


def header_api_version(header: Path) -> int:
    m = re.search(r'^#define QEMU_PLUGIN_VERSION (\d+)', header.read_text(), re.M)
    if not m:
        raise CountingError(f'{header} defines no QEMU_PLUGIN_VERSION')
    return int(m.group(1))


def installed_qemu_source() -> str:
    """The Debian source version the installed qemu-system-x86 was built from."""
    out = _run(['dpkg-query', '-W', '-f=${source:Version}', 'qemu-system-x86'],
               'asking dpkg for the QEMU version')
    return out.strip()


@dataclass(frozen=True)
class Plugin:
    path: Path              # the .so
    header_version: str     # Debian source version of the qemu-plugin.h it was built with
    api: int                # QEMU_PLUGIN_VERSION of that header
    built: bool             # built now (False: taken from the cache)


def build_plugin(cache: Path | None = None, cc: str = 'gcc') -> Plugin:
    """Build the plugin (-Wall -Wextra -Werror) into the cache, once per source and header."""
    inc = header_dir()
    header = inc / 'qemu-plugin.h'
    version_file = inc / 'source-version'
    header_version = version_file.read_text().strip() if version_file.exists() else 'unknown'
    key = hashlib.sha256()
    for f in [PLUGIN_DIR / s for s in PLUGIN_SOURCES] + [header]:
        key.update(f.read_bytes())
    key.update(header_version.encode())
    key.update(_run([cc, '--version'], 'the C compiler').encode())
    out = (cache or cache_dir()) / 'qemu-plugin' / key.hexdigest()[:16]
    so = out / f'{PLUGIN_NAME}.so'
    api = header_api_version(header)
    if so.exists():
        return Plugin(so, header_version, api, False)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix='.build-', dir=out.parent))
    try:
        _run(['make', '-s', '-C', str(PLUGIN_DIR), f'O={tmp}', f'CC={cc}',
              f'QEMU_PLUGIN_INCLUDE={inc}'], 'building the kloc-count plugin')
        try:
            tmp.rename(out)
        except OSError:
            if not so.exists():   # not a concurrent build that won
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Plugin(so, header_version, api, True)


def check_plugin_matches_qemu(plugin: Plugin) -> None:
    """The Python side of the API check: built for the QEMU that is installed now."""
    installed = installed_qemu_source()
    if plugin.header_version != installed:
        raise CountingError(f'{plugin.path} was built against qemu-plugin.h of QEMU '
                            f'{plugin.header_version}, but QEMU {installed} is installed: '
                            'build it again (counting.build_plugin)')


# QEMU options -> plugin arguments

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
    out = _run([binary, '--version'], 'asking QEMU its version')
    m = re.search(r'version (\d+)\.(\d+)', out)
    if not m:
        raise CountingError(f'{binary} --version: no version in {out!r}')
    return int(m.group(1)), int(m.group(2))


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


@dataclass(frozen=True)
class BootResult:
    output: str             # console and QEMU's stderr
    returncode: int         # -9 when killed at the timeout
    seconds: float
    peak_rss_kib: int       # QEMU's peak resident memory (the plugin's is inside it)
    timed_out: bool


def boot(cmd: list[str], timeout: float) -> BootResult:
    """Run QEMU to its exit (or kill it at the timeout); its output, time and peak RSS."""
    start = time.monotonic()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise CountingError(f'{cmd[0]} not found; run "make deps"') from None
    chunks: list[bytes] = []
    assert p.stdout is not None
    out = p.stdout
    reader = threading.Thread(target=lambda: chunks.append(out.read()), daemon=True)
    reader.start()
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        p.kill()
    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    out.close()
    return BootResult(b''.join(chunks).decode(errors='replace'), p.returncode,
                      time.monotonic() - start, int(usage.ru_maxrss), killed.is_set())


# Output

@dataclass(frozen=True)
class VcpuCounts:
    vcpu: int
    node: int
    insns_user: int
    insns_kernel: int
    loads: int
    stores: int
    local: int
    remote: int
    io: int
    unmapped: int
    hitm: int
    invalidations: int
    shared: int
    shared_stores: int = 0      # stores among shared: write-write sharing
    false_shared: int = 0       # of those, to bytes no other vCPU stored to

    @property
    def insns(self) -> int:
        return self.insns_user + self.insns_kernel

    @property
    def transfers(self) -> int:
        return self.hitm + self.invalidations

    @property
    def remote_share(self) -> float:
        """Remote-node share of this vCPU's RAM accesses (NaN without any)."""
        n = self.local + self.remote
        return self.remote / n if n else float('nan')


@dataclass(frozen=True)
class PcCount:
    pc: int
    events: int           # hitm + invalidations + shared, as counted for ranking
    overcount_max: int    # the space-saving bound: events may be this much high
    hitm: int             # since this PC last took its slot
    invalidations: int
    shared: int
    vcpus: tuple[int, ...]

    @property
    def transfers(self) -> int:
        return self.hitm + self.invalidations


@dataclass(frozen=True)
class LineVcpu:
    vcpu: int
    hitm: int
    invalidations: int
    shared: int
    shared_stores: int = 0
    store_bytes: int = 0        # bit i: byte i of the line, by its shared stores


@dataclass(frozen=True)
class Line:
    paddr: int            # guest-physical, of the line
    vaddr: int            # of the first access counted on the line (names its object)
    node: int
    hitm: int
    invalidations: int
    shared: int
    vcpus: tuple[LineVcpu, ...]
    pcs: tuple[PcCount, ...]
    false_shared: int = 0       # shared stores to bytes only their vCPU stores to

    @property
    def transfers(self) -> int:
        return self.hitm + self.invalidations


@dataclass(frozen=True)
class Phase:
    phase: int
    windows: int
    contended_lines: int
    vcpus: tuple[VcpuCounts, ...]
    lines: tuple[Line, ...]

    def total(self, field: str) -> int:
        return sum(int(getattr(v, field)) for v in self.vcpus)

    @property
    def remote_share(self) -> float:
        n = self.total('local') + self.total('remote')
        return self.total('remote') / n if n else float('nan')


@dataclass(frozen=True)
class Counts:
    version: str
    qemu_header: str
    api: tuple[int, int, int]     # built, QEMU's min, QEMU's current
    target: str
    vcpus: int
    vcpu_threads: int
    line_table_bytes: int
    open_phase: int | None
    bad_markers: int
    unmatched_ends: int
    nested_starts: int
    lines_dropped: int
    phases: dict[int, Phase]

    def phase(self, n: int) -> Phase:
        try:
            return self.phases[n]
        except KeyError:
            raise CountingError(f'the guest marked no window for phase {n} (phases seen: '
                                f'{sorted(self.phases) or "none"})') from None


def _hex(v: object) -> int:
    return int(str(v), 16)


def _int(d: dict[str, object], k: str) -> int:
    v = d[k]
    if not isinstance(v, int):
        raise CountingError(f'{k} is {v!r}, not a number')
    return v


def parse_counts(text: str) -> Counts:
    try:
        doc = json.loads(text)
        if doc.get('plugin') != PLUGIN_NAME:
            raise CountingError('not kloc-count output')
        phases = {}
        for p in doc['phases']:
            vcpus = tuple(VcpuCounts(**{k: int(v) for k, v in c.items()}) for c in p['vcpus'])
            lines = tuple(
                Line(_hex(li['paddr']), _hex(li['vaddr']), int(li['node']), int(li['hitm']),
                     int(li['invalidations']), int(li['shared']),
                     tuple(LineVcpu(int(c['vcpu']), int(c['hitm']), int(c['invalidations']),
                                    int(c['shared']), int(c.get('shared_stores', 0)),
                                    _hex(c.get('store_bytes', '0x0'))) for c in li['vcpus']),
                     tuple(PcCount(_hex(c['pc']), int(c['events']), int(c['overcount_max']),
                                   int(c['hitm']), int(c['invalidations']), int(c['shared']),
                                   tuple(int(x) for x in c['vcpus'])) for c in li['pcs']),
                     int(li.get('false_shared', 0)))
                for li in p['lines'])
            phases[int(p['phase'])] = Phase(int(p['phase']), int(p['windows']),
                                            int(p['contended_lines']), vcpus, lines)
        api = doc['api']
        m = doc['markers']
        return Counts(str(doc['version']), str(doc['qemu_header']),
                      (_int(api, 'built'), _int(api, 'qemu_min'), _int(api, 'qemu_cur')),
                      str(doc['target']), _int(doc, 'vcpus'), _int(doc, 'vcpu_threads'),
                      _int(doc, 'line_table_bytes'), doc['open_phase'],
                      _int(m, 'bad'), _int(m, 'unmatched_ends'), _int(m, 'nested_starts'),
                      _int(doc, 'lines_dropped'), phases)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CountingError(f'the plugin output cannot be read: {e}') from None


# The kselftest's windows (selftests/lo_counters/lo_counters.c)
PHASE_SINGLE = 1    # one thread
PHASE_ALL = 2       # one thread per CPU


def per_packet(counts: Counts, record: dict[str, object]) -> dict[str, float]:
    """The counted figures of one boot, per packet the kselftest sent in each window.

    record: the kselftest's JSON record of the same boot (its packets).
    """
    single, every = counts.phase(PHASE_SINGLE), counts.phase(PHASE_ALL)
    per_cpu = record.get('per_cpu')
    n1 = record.get('measured_single')
    n2 = sum(int(c['measured']) for c in per_cpu if isinstance(c, dict)) \
        if isinstance(per_cpu, list) else 0
    if not isinstance(n1, int) or n1 <= 0 or n2 <= 0:
        raise CountingError('the kselftest record gives no packets for its windows '
                            '(measured_single, per_cpu[].measured)')
    out = {}
    for suffix, phase, n in (('single', single, n1), ('all', every, n2)):
        out[f'insns_pkt_{suffix}'] = phase.total('insns') / n
        out[f'shared_pkt_{suffix}'] = phase.total('shared') / n
        out[f'wshared_pkt_{suffix}'] = phase.total('shared_stores') / n
        out[f'fshared_pkt_{suffix}'] = phase.total('false_shared') / n
        out[f'transfers_pkt_{suffix}'] = phase.total('transfers') / n
        out[f'remote_pct_{suffix}'] = 100 * phase.remote_share
    return out


def read_counts(path: Path) -> Counts:
    """The plugin's JSON; its absence means QEMU did not exit cleanly."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CountingError(f'{path}: the plugin wrote no counts; QEMU did not exit '
                            'cleanly (killed, or it crashed)') from None
    return parse_counts(text)


# Symbols

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


def describe_line(line: Line, syms: SymbolMap | None, arch: str) -> str:
    """What a contended line holds: the static symbol its first counted access
    touched, or what kind of memory it is."""
    if line.vaddr >> 63 == 0:
        return 'user'
    if syms is None:
        return ''
    if syms.in_image(line.vaddr):
        return syms.data_symbol(line.vaddr) or 'kernel image'
    v = syms.image_vaddr(line.paddr + (line.vaddr & (LINE_BYTES - 1)), arch)
    if v is not None:
        return syms.data_symbol(v) or 'kernel image'
    return 'kernel, dynamic (direct map)'


def line_symbols(line: Line, syms: SymbolMap, arch: str) -> list[str]:
    """Every static symbol that starts in the line (false sharing: more than one)."""
    base = line.vaddr & ~(LINE_BYTES - 1) if syms.in_image(line.vaddr) \
        else syms.image_vaddr(line.paddr, arch)
    if base is None:
        return []
    i = bisect.bisect_left(syms.data_keys, base)
    out = []
    while i < len(syms.data) and syms.data[i].addr < base + LINE_BYTES:
        if syms.data[i].name not in out:
            out.append(syms.data[i].name)
        i += 1
    return out


def _vcpu_set(vcpus: tuple[int, ...]) -> str:
    """0,1,2,3 -> 0-3."""
    if len(vcpus) > 2 and list(vcpus) == list(range(vcpus[0], vcpus[-1] + 1)):
        return f'{vcpus[0]}-{vcpus[-1]}'
    return ','.join(map(str, vcpus))


def line_table(phase: Phase, syms: SymbolMap | None = None, arch: str = 'x86_64',
               top: int = 10, pcs: int = 3) -> str:
    """A perf-c2c-like table of the most contended lines of a phase, a block
    per line that fits review mails (the PCs' addresses are in the JSON)."""
    rows = [f'phase {phase.phase}: {phase.total("hitm")} hitm, '
            f'{phase.total("invalidations")} invalidations, {phase.total("shared")} '
            f'shared accesses,',
            f'  {phase.total("false_shared")} false-sharing stores, '
            f'{phase.contended_lines} contended lines']
    for n, li in enumerate(phase.lines[:top], 1):
        what = describe_line(li, syms, arch)
        named = set(what.split('+')[0].split('|'))
        others = [s for s in (line_symbols(li, syms, arch) if syms else []) if s not in named]
        if others:
            what += f' (line also: {", ".join(others[:3])}{", ..." if len(others) > 3 else ""})'
        rows += [f'{n:>2}. line {li.paddr:#x}, node {li.node}: {what}',
                 f'    hitm {li.hitm}, invalidations {li.invalidations}, shared {li.shared}, '
                 f'false sharing {li.false_shared}',
                 '    vCPU:hitm/inval/shared '
                 + ' '.join(f'{c.vcpu}:{c.hitm}/{c.invalidations}/{c.shared}'
                            for c in li.vcpus)]
        for pc in li.pcs[:pcs]:
            if pc.pc >> 63 == 0:
                fn = '(user)'
            else:
                fn = (syms.function(pc.pc) if syms else '') or '?'
            exact = '' if not pc.overcount_max else f' (<= {pc.overcount_max} over)'
            rows.append(f'    {pc.events} events at {fn}, vCPUs {_vcpu_set(pc.vcpus)}{exact}')
    return '\n'.join(rows)
