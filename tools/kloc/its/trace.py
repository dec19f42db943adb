# SPDX-License-Identifier: GPL-2.0
"""QEMU's GICv3 ITS on the interrupt path, read from QEMU's trace.

QEMU's ITS model (hw/intc/arm_gicv3_its.c, the same in 7.2 and 10.0)
translates every MSI written to GITS_TRANSLATER by reading its tables from
guest memory, with no cache (docs/design.md, "QEMU's ITS on the interrupt
path"). Its `log` trace backend writes one line per event, in execution
order, into one file; this module reads such a file (the events of
EVENTS) and counts, per window the guest marks on its console, the reads
of each table, local or remote to the ITS's node by the machine's memory
map:

- dt_l1: the device table's level-1 entry (indirect tables only; no event
  of its own: one per device-table entry read);
- dte: the device-table entry (gicv3_its_dte_read); in an indirect table
  at the level-2 page the guest reports (a console line L2_LINE), which
  no event carries;
- ite: the interrupt translation entry, 12 bytes read as 8 and 4
  (gicv3_its_ite_read: two reads);
- cte: the collection-table entry (gicv3_its_cte_read);
- cmd: a 32-byte command the ITS reads from its queue
  (gicv3_its_process_command).

Reads made while translating an MSI count for the interrupt path; those of
a command (MAPTI reads a DTE) for the command path.

The redistributors' side of each MSI is not traced: QEMU's redistributor
(hw/intc/arm_gicv3_redist.c) reads and writes each CPU's LPI pending table
and the LPI property table in guest RAM through its DMA address space, and
no trace event or plugin sees those accesses. What the trace does give is
counted: each MSI's target CPU (gicv3_its_cte_read's RDBase: QEMU's ITS
has GITS_TYPER.PTA 0, so RDBase is the CPU's number), each LPI a CPU
acknowledged (gicv3_icc_iar1_read), and each CPU's GICR_PENDBASER and
GICR_PROPBASER as the driver wrote them (gicv3_redist_write); redist.py
derives the table accesses from them. The table bases are
the GITS_BASERn and GITS_CBASER values the driver wrote and read back
(gicv3_its_write/gicv3_its_read). The guest's console reaches the trace as
one pl011_write event per byte written to the UART's data register.

Every file here was written by QEMU running a guest: nothing in it is
trusted beyond being parsed. A line that does not parse is counted and
named, not guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kloc.counting.qemu_args import memory_map

# The -trace events file kloc gives QEMU.
EVENTS = ('gicv3_its_*', 'gicv3_redist_write', 'gicv3_icc_iar1_read', 'pl011_write')
# The guest marks a window with these console lines (its own, whole lines).
BEGIN, END = 'kloc-its: begin', 'kloc-its: end'
# and reports each level-2 device-table page it finds: "kloc-its: l2 <l1 index> <address>"
L2_LINE = re.compile(r'^kloc-its: l2 (\d+) (0x[0-9a-f]+)$')
TABLES = ('dt_l1', 'dte', 'ite', 'cte', 'cmd')

GITS_CBASER, GITS_BASER0, GITS_BASERS = 0x80, 0x100, 8
ITT_ENTRY = 12          # QEMU's ITS_ITT_ENTRY_SIZE
CMD_BYTES = 32
BASER_DEVICE, BASER_COLLECTION = 1, 4
GICR_PROPBASER, GICR_PENDBASER = 0x70, 0x78     # in a redistributor's RD_base frame
LPI_FIRST = 8192                                # GICV3_LPI_INTID_START


@dataclass(frozen=True)
class Table:
    """A GITS_BASERn, decoded (Arm IHI 0069, 12.19.1)."""
    kind: int           # 1 device, 4 collection (Type)
    base: int           # physical address
    page: int           # bytes
    entry: int          # bytes
    indirect: bool


def decode_baser(value: int) -> Table | None:
    """The table a GITS_BASERn value describes; None unless Valid."""
    if not value >> 63:
        return None
    page = {0: 4096, 1: 16384}.get((value >> 8) & 3, 65536)
    if page == 65536:   # PA[47:16] in place, PA[51:48] in bits 15:12
        base = (value & 0x0000_ffff_ffff_0000) | ((value >> 12) & 0xf) << 48
    else:
        base = value & 0x0000_ffff_ffff_f000
    return Table(kind=(value >> 56) & 7, base=base, page=page,
                 entry=((value >> 48) & 0x1f) + 1, indirect=bool((value >> 62) & 1))


def cbaser_base(value: int) -> int:
    return value & 0x000f_ffff_ffff_f000


def node_of(cmd: list[str]) -> Callable[[int], int | None]:
    """A guest-physical address's NUMA node in the machine cmd starts (its -numa
    nodes and memory backends), None outside its RAM."""
    nodes = memory_map(cmd).nodes

    def lookup(addr: int) -> int | None:
        return next((n.node for n in nodes if n.gpa <= addr < n.gpa + n.size), None)
    return lookup


def cpu_of_affinity(affid: int) -> int:
    """The CPU number of an affinity value in QEMU's trace, as the virt machine gives
    them with a GICv3 (virt_cpu_mp_affinity(): clusters of GICV3_TARGETLIST_BITS, 16
    CPUs): Aff0 the CPU within its cluster, Aff1 the cluster."""
    return (affid >> 8 & 0xff) * 16 + (affid & 0xff)


def cpu_nodes(cmd: list[str]) -> dict[int, int]:
    """Each CPU's NUMA node in the machine cmd starts (its -numa nodes' cpus=)."""
    return {c: n.node for n in memory_map(cmd).nodes for c in n.cpus}


@dataclass
class Window:
    """One marked window: interrupts and table reads, each node-classified."""
    interrupts: int = 0
    # (path, table) -> [local, remote, unplaced]; path 'msi' or 'cmd'
    reads: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    # CPU number -> MSIs translated for it (the collection's RDBase)
    targets: dict[int, int] = field(default_factory=dict)
    # CPU number -> LPIs it acknowledged
    acked: dict[int, int] = field(default_factory=dict)

    def add(self, path: str, table: str, where: int) -> None:
        self.reads.setdefault((path, table), [0, 0, 0])[where] += 1

    def count(self, path: str, table: str, where: int) -> int:
        return self.reads.get((path, table), [0, 0, 0])[where]

    def per_interrupt(self, table: str, where: int) -> float:
        """An MSI's reads of table, local (0), remote (1) or unplaced (2)."""
        if not self.interrupts:
            return float('nan')
        return self.count('msi', table, where) / self.interrupts


_EVENT = re.compile(r'\b(gicv3_its_\w+|gicv3_redist_write|gicv3_icc_iar1_read|pl011_write) '
                    r'(.*)$')
_HEX = r'0x([0-9a-f]+)'
_DEC = r'(\d+)'
# event -> (its fields, each hex (x) or decimal (d)): what feed() reads of it
_PARSE: dict[str, tuple[re.Pattern[str], str]] = {
    'gicv3_its_read': (re.compile(rf'offset {_HEX} data {_HEX} size {_DEC}$'), 'xxd'),
    'gicv3_its_write': (re.compile(rf'offset {_HEX} data {_HEX} size {_DEC}$'), 'xxd'),
    'gicv3_its_translation_write': (re.compile(
        rf'offset {_HEX} data {_HEX} size \d+ requester_id {_HEX}$'), 'xxx'),
    'gicv3_its_process_command': (re.compile(rf'offset {_HEX}: {_HEX}$'), 'xx'),
    'gicv3_its_dte_read': (re.compile(rf'DeviceID {_HEX}: valid {_DEC}'), 'xd'),
    'gicv3_its_ite_read': (re.compile(rf'ITTaddr {_HEX} EventID {_HEX}: valid {_DEC}'),
                           'xxd'),
    'gicv3_its_cte_read': (re.compile(rf'ICID {_HEX}: valid {_DEC} RDBase {_HEX}$'), 'xdx'),
    'gicv3_redist_write': (re.compile(
        rf'redistributor {_HEX} write: offset {_HEX} data {_HEX} size {_DEC}'), 'xxxd'),
    'gicv3_icc_iar1_read': (re.compile(rf'read cpu {_HEX} value {_HEX}$'), 'xx'),
    # 7.2: "addr 0x00000000 value 0x00000041"; 10.0 adds " reg DR"
    'pl011_write': (re.compile(rf'addr {_HEX} value {_HEX}'), 'xx'),
}


_HANDLERS = {'pl011_write': '_console_byte', 'gicv3_redist_write': '_redist_write',
             'gicv3_icc_iar1_read': '_iar1_read'}


class ItsTrace:
    """Fed QEMU's trace line by line (feed), it keeps the ITS's registers, the
    guest's console, and the windows the console marks (windows)."""

    def __init__(self, node_of: Callable[[int], int | None], its_node: int) -> None:
        self.node_of = node_of
        self.its_node = its_node
        self.regs: dict[int, int] = {}          # 64-bit register offset -> value
        # (CPU number, GICR_PROPBASER or GICR_PENDBASER) -> value
        self.rd_regs: dict[tuple[int, int], int] = {}
        self.l2: dict[int, int] = {}            # level-1 index -> level-2 page
        self.console: list[str] = []            # whole lines
        self.windows: list[Window] = []
        self.unreadable: list[str] = []         # the first event lines that did not parse
        self.unparsed = 0                       # how many did not
        self._line = bytearray()
        self._open: Window | None = None
        self._path = ''                         # what the ITS is doing: 'msi' or 'cmd'

    @property
    def open_window(self) -> bool:
        """Whether a window was opened and not (yet) closed."""
        return self._open is not None

    def feed_all(self, lines: Iterable[str]) -> ItsTrace:
        for line in lines:
            self.feed(line)
        return self

    def feed(self, line: str) -> None:
        m = _EVENT.search(line)
        if not m or m.group(1) not in _PARSE:
            return
        name, rest = m.groups()
        pattern, kinds = _PARSE[name]
        a = pattern.search(rest)
        if not a:
            self.unparsed += 1
            if len(self.unreadable) < 20:
                self.unreadable.append(line.rstrip()[:200])
            return
        args = [int(v, 16 if k == 'x' else 10) for v, k in zip(a.groups(), kinds)]
        handler = _HANDLERS.get(name) or '_' + name[len('gicv3_its_'):]
        getattr(self, handler)(*args)

    # the registers
    def _reg(self, offset: int, data: int, size: int) -> None:
        base = offset & ~7
        if size == 8 and offset == base:
            self.regs[base] = data
        elif size == 4:
            old = self.regs.get(base, 0)
            shift = 8 * (offset - base)
            self.regs[base] = (old & ~(0xffff_ffff << shift)) | (data & 0xffff_ffff) << shift

    _read = _write = _reg     # a read-back and a write set the register alike

    def table(self, kind: int) -> Table | None:
        for n in range(GITS_BASERS):
            t = decode_baser(self.regs.get(GITS_BASER0 + 8 * n, 0))
            if t is not None and t.kind == kind:
                return t
        return None

    # where a read lands
    def _where(self, addr: int | None) -> int:
        if addr is None:
            return 2
        node = self.node_of(addr)
        return 2 if node is None else int(node != self.its_node)

    def _count(self, table: str, addr: int | None, times: int = 1) -> None:
        if self._open is not None and self._path:
            for _ in range(times):
                self._open.add(self._path, table, self._where(addr))

    def _entry(self, kind: int, index: int, l1_table: str | None) -> int | None:
        """The address of entry index of a BASER table; its level-1 read counted."""
        t = self.table(kind)
        if t is None:
            return None
        if not t.indirect:
            return t.base + index * t.entry
        per_page = t.page // t.entry
        l1 = index // per_page
        if l1_table:
            self._count(l1_table, t.base + l1 * 8)
        page = self.l2.get(l1)
        return None if page is None else page + (index % per_page) * t.entry

    # the interrupt path and the commands
    def _translation_write(self, offset: int, eventid: int, devid: int) -> None:
        self._path = 'msi'
        if self._open is not None:
            self._open.interrupts += 1

    def _process_command(self, rd_offset: int, cmd: int) -> None:
        self._path = 'cmd'
        base = self.regs.get(GITS_CBASER)
        self._count('cmd', None if base is None else cbaser_base(base) + rd_offset * CMD_BYTES)

    def _dte_read(self, devid: int, valid: int) -> None:
        self._count('dte', self._entry(BASER_DEVICE, devid, 'dt_l1'))

    def _ite_read(self, ittaddr: int, eventid: int, valid: int) -> None:
        self._count('ite', ittaddr + eventid * ITT_ENTRY, times=2)

    def _cte_read(self, icid: int, valid: int, rdbase: int) -> None:
        self._count('cte', self._entry(BASER_COLLECTION, icid, None))
        if self._open is not None and self._path == 'msi' and valid:
            self._open.targets[rdbase] = self._open.targets.get(rdbase, 0) + 1

    # the redistributors and the CPU interfaces
    def _redist_write(self, affid: int, offset: int, data: int, size: int) -> None:
        base = offset & ~7
        if base not in (GICR_PROPBASER, GICR_PENDBASER):
            return
        key = (cpu_of_affinity(affid), base)
        if size == 8 and offset == base:
            self.rd_regs[key] = data
        elif size == 4:
            shift = 8 * (offset - base)
            old = self.rd_regs.get(key, 0)
            self.rd_regs[key] = (old & ~(0xffff_ffff << shift)) | (data & 0xffff_ffff) << shift

    def _iar1_read(self, affid: int, intid: int) -> None:
        if self._open is not None and LPI_FIRST <= intid < 1 << 24:
            cpu = cpu_of_affinity(affid)
            self._open.acked[cpu] = self._open.acked.get(cpu, 0) + 1

    # the console
    def _console_byte(self, addr: int, value: int) -> None:
        if addr != 0:           # not the data register
            return
        b = value & 0xff
        if b != 0x0a:
            if b != 0x0d:
                self._line.append(b)
            return
        text = self._line.decode(errors='replace')
        self._line.clear()
        self.console.append(text)
        if text == BEGIN and self._open is None:
            self._open = Window()
            self._path = ''
        elif text == END and self._open is not None:
            self.windows.append(self._open)
            self._open = None
        else:
            m = L2_LINE.match(text)
            if m:
                self.l2[int(m.group(1))] = int(m.group(2), 16)
