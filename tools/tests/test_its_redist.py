# SPDX-License-Identifier: GPL-2.0
"""kloc.its.redist: the redistributor model's arithmetic, against values worked by hand
from QEMU 10.0's hw/intc/arm_gicv3_redist.c (the real trace's figures are checked in
tests/test_its_figures.py)."""

from __future__ import annotations

import unittest

from kloc.its import redist
from kloc.its.redist import RedistError, Target

GIB = 1 << 30
# two nodes of 512 MiB from 0x40000000, as the arm64 topologies lay them out
NODES = {0: (0x4000_0000, 0x6000_0000), 1: (0x6000_0000, 0x8000_0000)}


def node_of(addr: int) -> int | None:
    return next((n for n, (lo, hi) in NODES.items() if lo <= addr < hi), None)


# Linux writes GICR_PROPBASER.IDBits = lpi_id_bits - 1 = 15 (16 bits of LPI IDs)
PROP = 0x4100_0000 | 0x0f
PEND0, PEND1 = 0x4200_0000, 0x6200_0000


class Model(unittest.TestCase):
    def test_a_rescan_reads_the_table_from_lpi_8192(self) -> None:
        # 2^16 bits of pending table, less the first 8192 (1 KiB): 7,168 bytes
        self.assertEqual(redist.scan_bytes(PROP), 7168)
        self.assertEqual(redist.scan_bytes(0x4100_0000 | 0x1f), 7168)  # capped at 16 bits
        self.assertEqual(redist.scan_bytes(0x4100_0000 | 12), 0)       # no LPI above 8191
        self.assertEqual(redist.scan_bytes(0x4100_0000 | 3), 0)

    def test_one_lpi_set_and_acknowledged(self) -> None:
        t = Target(cpu=3, cpu_node=1, interrupts=1, acked=1, pending_node=0,
                   property_node=0, scan=7168)
        # set: read + write; acknowledge: read + write + 7,168 reads
        self.assertEqual(t.accesses('pending'), 7172)
        self.assertEqual(t.accesses('property'), 1)
        self.assertEqual(t.split('pending'), (0, 7172))

    def test_an_msi_that_found_its_lpi_pending_costs_one_read(self) -> None:
        t = Target(3, 1, interrupts=3, acked=2, pending_node=1, property_node=0, scan=7168)
        self.assertEqual(t.accesses('pending'), 3 + 2 + 2 * 7170)
        self.assertEqual(t.split('pending'), (14345, 0))
        self.assertEqual(t.split('property'), (0, 2))

    def test_targets_from_the_registers(self) -> None:
        regs = {(2, 0x78): PEND0, (2, 0x70): PROP, (3, 0x78): PEND1 | 0x7 << 7,
                (3, 0x70): PROP}
        ts = redist.targets({2: 4, 3: 6}, {2: 4, 3: 6}, regs, {0: 0, 1: 0, 2: 1, 3: 1}, node_of)
        self.assertEqual([(t.cpu, t.cpu_node, t.pending_node, t.property_node) for t in ts],
                         [(2, 1, 0, 0), (3, 1, 1, 0)])
        loc, rem = redist.per_interrupt(ts, 'pending')
        self.assertEqual((loc * 10, rem * 10), (6 * 7172, 4 * 7172))
        self.assertEqual(redist.per_interrupt(ts, 'property'), (0.0, 1.0))

    def test_what_the_model_refuses(self) -> None:
        regs = {(3, 0x78): PEND1, (3, 0x70): PROP}
        nodes = {3: 1}
        cases: tuple[tuple[dict[int, int], dict[int, int], dict[tuple[int, int], int],
                           dict[int, int], str], ...] = (
                ({3: 1}, {3: 2}, regs, nodes, 'acknowledged 2 LPIs'),
                ({3: 1}, {3: 1}, {(3, 0x70): PROP}, nodes, 'no GICR_PENDBASER'),
                ({3: 1}, {3: 1}, regs, {}, 'no -numa node'),
                ({3: 1}, {3: 1}, {(3, 0x78): 8 * GIB, (3, 0x70): PROP}, nodes,
                 'not both in the machine'))
        for translated, acked, r, cpus, why in cases:
            with self.subTest(why=why), self.assertRaisesRegex(RedistError, why):
                redist.targets(translated, acked, r, cpus, node_of)


if __name__ == '__main__':
    unittest.main()
