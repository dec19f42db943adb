# SPDX-License-Identifier: GPL-2.0
"""The redistributor's LPI table accesses per MSI: a model of QEMU's code over
counts from its trace.

QEMU's redistributor (hw/intc/arm_gicv3_redist.c, QEMU 7.2 and 10.0 alike)
keeps LPI state in guest RAM and reaches it through the GIC's DMA address
space, one byte at a time. No trace event and no TCG plugin sees those
accesses, so they are not counted: they are derived here, per delivered LPI,
from what QEMU's code does with it:

- the ITS sets the LPI pending on its target CPU's redistributor
  (gicv3_redist_process_lpi -> set_pending_table_bit): one byte of that
  CPU's pending table read and, when the bit changes, written; then one
  byte of the property table read (gicv3_redist_check_lpi_priority);
- the CPU acknowledges it (ICC_IAR1 -> icc_activate_irq ->
  gicv3_redist_lpi_pending(cs, irq, 0)): the byte read and written again,
  and, as the LPI was the highest pending one, a rescan of the whole
  pending table (update_for_all_lpis): one read per byte from LPI 8192 up
  to the size GICR_PROPBASER.IDBits gives, plus one property read per
  other pending LPI it finds.

What is traced and counted: the MSIs the ITS translated for each CPU (the
collection's RDBase), the LPIs each CPU acknowledged, and each CPU's
GICR_PENDBASER and GICR_PROPBASER, whose addresses give the tables' nodes.
An MSI that finds its LPI already pending costs one read and is not
acknowledged on its own: translated minus acknowledged counts those.

What the model assumes and cannot say: that no other LPI was pending on the
CPU during a rescan (each would add one property read), and nothing about
hardware. A real redistributor caches LPI state and does not rescan its
pending table per interrupt: the figures are QEMU's, an upper bound on the
traffic, never a prediction of a real GIC's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kloc.errors import KlocError

PENDBASER_ADDR = 0x000f_ffff_ffff_0000      # GICR_PENDBASER.PA, bits [51:16]
PROPBASER_ADDR = 0x000f_ffff_ffff_f000      # GICR_PROPBASER.PA, bits [51:12]
IDBITS_MAX = 15                             # QEMU's GICD_TYPER_IDBITS
LPI_FIRST = 8192
TABLES = ('pending', 'property')
ABOUT = {'pending': 'LPI pending table of the target CPU',
         'property': 'LPI property table'}


class RedistError(KlocError):
    """A trace whose redistributor side the model cannot read."""


def scan_bytes(propbaser: int) -> int:
    """The pending-table bytes one rescan reads: from LPI 8192 to the table's end,
    as GICR_PROPBASER.IDBits (capped at QEMU's 16 bits) sizes it."""
    idbits = min(propbaser & 0x1f, IDBITS_MAX)
    return max(0, (1 << (idbits + 1)) // 8 - LPI_FIRST // 8)


@dataclass(frozen=True)
class Target:
    """One target CPU's LPIs in the window, and where its tables are."""
    cpu: int
    cpu_node: int
    interrupts: int         # MSIs the ITS translated for this CPU
    acked: int              # LPIs the CPU acknowledged
    pending_node: int       # the node of its pending table (GICR_PENDBASER)
    property_node: int      # the node of the property table (GICR_PROPBASER)
    scan: int               # bytes a rescan of its pending table reads

    def accesses(self, table: str) -> int:
        """The model's byte accesses to table in the window, reads and writes."""
        if table == 'pending':
            # set: 1 read (+1 write when the bit changes); acknowledge: 1 read,
            # 1 write, then the rescan
            return self.interrupts + self.acked + self.acked * (1 + 1 + self.scan)
        return self.acked

    def node(self, table: str) -> int:
        return self.pending_node if table == 'pending' else self.property_node

    def split(self, table: str) -> tuple[int, int]:
        """(local, remote) accesses to table, relative to this CPU's node."""
        n = self.accesses(table)
        return (n, 0) if self.node(table) == self.cpu_node else (0, n)

    def to_json(self) -> dict[str, object]:
        return {'cpu': self.cpu, 'cpu_node': self.cpu_node, 'interrupts': self.interrupts,
                'acknowledged': self.acked, 'pending_table_node': self.pending_node,
                'property_table_node': self.property_node, 'rescan_bytes': self.scan,
                'accesses': {t: dict(zip(('local', 'remote'), self.split(t)))
                             for t in TABLES}}


def targets(translated: dict[int, int], acked: dict[int, int],
            rd_regs: dict[tuple[int, int], int], cpu_node: dict[int, int],
            node_of: Callable[[int], int | None]) -> tuple[Target, ...]:
    """The window's target CPUs (RedistError where the trace cannot place them).
    rd_regs: (CPU, 0x70 or 0x78) -> GICR_PROPBASER or GICR_PENDBASER; node_of: a
    guest-physical address's node (None outside RAM)."""
    out = []
    for cpu in sorted(set(translated) | set(acked)):
        n, a = translated.get(cpu, 0), acked.get(cpu, 0)
        if a > n:
            raise RedistError(f'CPU {cpu} acknowledged {a} LPIs in the window, but the ITS '
                              f'translated {n} MSIs for it: LPIs from elsewhere')
        if cpu not in cpu_node:
            raise RedistError(f'CPU {cpu} is in no -numa node of the machine')
        regs = [rd_regs.get((cpu, off)) for off in (0x78, 0x70)]
        if regs[0] is None or regs[1] is None:
            raise RedistError(f'the trace has no GICR_PENDBASER/GICR_PROPBASER write for '
                              f'CPU {cpu}: was gicv3_redist_write traced from the start?')
        pend, prop = regs[0] & PENDBASER_ADDR, regs[1] & PROPBASER_ADDR
        nodes = [node_of(x) for x in (pend, prop)]
        if nodes[0] is None or nodes[1] is None:
            raise RedistError(f'CPU {cpu}\'s LPI tables ({pend:#x}, {prop:#x}) are not '
                              'both in the machine\'s RAM')
        out.append(Target(cpu, cpu_node[cpu], n, a, nodes[0], nodes[1], scan_bytes(regs[1])))
    return tuple(out)


def per_interrupt(ts: tuple[Target, ...], table: str) -> tuple[float, float]:
    """(local, remote) accesses to table per interrupt, over all target CPUs."""
    n = sum(t.interrupts for t in ts)
    if not n:
        return float('nan'), float('nan')
    return (sum(t.split(table)[0] for t in ts) / n, sum(t.split(table)[1] for t in ts) / n)


def lines(ts: tuple[Target, ...]) -> list[str]:
    """Report lines, each under 72 columns: each target CPU, then each table's byte
    accesses per interrupt."""
    out = ['  the target CPU\'s redistributor, QEMU\'s code as a model over traced',
           '  counts (a real one caches LPI state): byte accesses per interrupt,',
           '  local or remote to the target CPU\'s node']
    for t in ts:
        out += [f'    CPU {t.cpu} (node {t.cpu_node}): {t.interrupts} MSIs, {t.acked} '
                'acknowledged; its pending',
                f'      table on node {t.pending_node} (a rescan: {t.scan:,} bytes); '
                f'property table on node {t.property_node}']
    for table in TABLES:
        loc, rem = per_interrupt(ts, table)
        out.append(f'  {ABOUT[table]:<36} {loc:>7.5g} {rem:>7.5g}')
    return out
