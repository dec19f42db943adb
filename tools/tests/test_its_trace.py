# SPDX-License-Identifier: GPL-2.0
"""kloc.its.trace: QEMU's ITS trace read into table reads per MSI, local or remote.

The registers come from a real trace (tests/data/its-probe-6.12-arm64_2n_its1.trace:
Linux 6.12's ITS probe under QEMU 7.2 on arm64_2n_its1). The windows and MSIs
after it are written here in QEMU's own formats (hw/intc/trace-events,
hw/char/trace-events), each event as QEMU's ITS emits it per translation
(docs/design.md); test_its_figures.py reads a real trace of the MSI workload.
"""

from __future__ import annotations

import math
import unittest
from pathlib import Path

from kloc.its import trace
from kloc.its.trace import ItsTrace, Table
from kloc.qemu import topology

PROBE = Path(__file__).parent / 'data' / 'its-probe-6.12-arm64_2n_its1.trace'
TOPO = topology.get('arm64_2n_its1')
NODE_OF = trace.node_of(['qemu-system-aarch64', *TOPO.machine_args(), '-m', '1024'])


def console(text: str, qemu10: bool = False) -> list[str]:
    """The pl011_write events of text written to the UART's data register."""
    if qemu10:
        return [f'pl011_write addr 0x000 value 0x{b:08x} reg DR' for b in text.encode()]
    return [f'pl011_write addr 0x00000000 value 0x{b:08x}' for b in text.encode()]


def msi(devid: int, eventid: int, ittaddr: int, icid: int) -> list[str]:
    """One MSI's translation, as QEMU 7.2 and 10.0 trace it."""
    return [
        f'gicv3_its_translation_write GICv3 ITS TRANSLATER write: offset 0x40 data '
        f'{eventid:#x} size 4 requester_id {devid:#x}',
        f'gicv3_its_dte_read GICv3 ITS: Device Table read for DeviceID {devid:#x}: valid 1 '
        f'size 0x1 ITTaddr {ittaddr:#x}',
        f'gicv3_its_ite_read GICv3 ITS: Interrupt Table read for ITTaddr {ittaddr:#x} '
        f'EventID {eventid:#x}: valid 1 inttype 1 intid 0x2001 ICID {icid:#x} vPEID 0x0 '
        'doorbell 0x0',
        f'gicv3_its_cte_read GICv3 ITS: Collection Table read for ICID {icid:#x}: valid 1 '
        f'RDBase {icid:#x}']


def run(lines: list[str]) -> ItsTrace:
    probe = [x for x in PROBE.read_text().splitlines() if not x.startswith('#')]
    return ItsTrace(NODE_OF, its_node=1).feed_all(probe + lines)


class Registers(unittest.TestCase):
    def test_the_probe(self) -> None:
        """Linux's tables on the ITS's node 1: an indirect device table, a flat
        collection table and the command queue, each one 64 KiB page."""
        t = run([])
        self.assertEqual(t.table(trace.BASER_DEVICE), Table(kind=1, base=0x6003_0000,
                                                            page=65536, entry=8, indirect=True))
        self.assertEqual(t.table(trace.BASER_COLLECTION),
                         Table(kind=4, base=0x6004_0000, page=65536, entry=8, indirect=False))
        self.assertEqual(trace.cbaser_base(t.regs[trace.GITS_CBASER]), 0x6002_0000)
        for addr in (0x6002_0000, 0x6003_0000, 0x6004_0000):
            self.assertEqual(NODE_OF(addr), 1)
        self.assertEqual((t.windows, t.unreadable), ([], []))

    def test_baser_decoding(self) -> None:
        self.assertIsNone(trace.decode_baser(0x0107_0000_0000_0200))     # not Valid
        # 4 KiB pages: PA[47:12] in place; 64 KiB: PA[51:48] from bits 15:12
        self.assertEqual(trace.decode_baser(0x8107_0000_6003_1000),
                         Table(kind=1, base=0x6003_1000, page=4096, entry=8, indirect=False))
        high = trace.decode_baser(0xc407_0000_6004_1200)
        assert high is not None
        self.assertEqual(high.base, 0x1_0000_6004_0000)
        # a 32-bit write of the high half updates it
        t = run(['gicv3_its_write GICv3 ITS write: offset 0x10c data 0x0 size 4'])
        self.assertIsNone(t.table(trace.BASER_COLLECTION))


class Windows(unittest.TestCase):
    N = 64
    L2 = 0x6005_0000        # the device table's level-2 page, as the guest reports it

    def window(self, ittaddr: int, l2: bool = True, qemu10: bool = False) -> trace.Window:
        lines = console(f'kloc-its: l2 0 {self.L2:#x}\r\n' if l2 else '', qemu10)
        lines += msi(8, 1, ittaddr, 0)      # before the window: not counted
        lines += console('kloc-its: begin\r\n', qemu10)
        for _ in range(self.N):
            lines += msi(8, 1, ittaddr, 0)
        # a command inside the window (an INT): the command path, not the MSIs'
        lines += ['gicv3_its_process_command GICv3 ITS: processing command at offset 0x10: '
                  '0x3', 'gicv3_its_cmd_int GICv3 ITS: command INT DeviceID 0x8 EventID 0x1']
        lines += msi(8, 1, ittaddr, 0)[1:]
        lines += console('kloc-its: end\r\n', qemu10)
        t = run(lines)
        self.assertEqual(t.unreadable, [])
        self.assertEqual(len(t.windows), 1)
        return t.windows[0]

    def test_every_table_on_the_its_node(self) -> None:
        """Each MSI: the level-1 entry, the DTE, the ITE's two reads and the CTE,
        all on node 1 with the ITS: 5 local reads an interrupt."""
        w = self.window(ittaddr=0x6006_0000)
        self.assertEqual(w.interrupts, self.N)
        want = {'dt_l1': 1, 'dte': 1, 'ite': 2, 'cte': 1}
        self.assertEqual({k: w.per_interrupt(k, 0) for k in want}, want)
        self.assertEqual({k: w.per_interrupt(k, 1) for k in want}, dict.fromkeys(want, 0))
        # the INT command: its queue read, and its own table reads
        self.assertEqual((w.count('cmd', 'cmd', 0), w.count('cmd', 'dte', 0),
                          w.count('cmd', 'ite', 0)), (1, 1, 2))

    def test_an_itt_on_the_other_node(self) -> None:
        """An ITT the driver put on node 0: two remote reads an interrupt."""
        w = self.window(ittaddr=0x5006_0000, qemu10=True)
        self.assertEqual((w.per_interrupt('ite', 0), w.per_interrupt('ite', 1)), (0, 2))
        self.assertEqual(w.per_interrupt('dte', 0), 1)

    def test_no_level_2_address(self) -> None:
        """Without the guest's report the DTE's node is unknown: unplaced, not guessed."""
        w = self.window(ittaddr=0x6006_0000, l2=False)
        self.assertEqual((w.per_interrupt('dte', 0), w.per_interrupt('dte', 2)), (0, 1))
        self.assertEqual(w.per_interrupt('dt_l1', 0), 1)

    def test_no_interrupts(self) -> None:
        t = run(console('kloc-its: begin\nkloc-its: end\n'))
        self.assertTrue(math.isnan(t.windows[0].per_interrupt('ite', 0)))

    def test_a_damaged_line_is_named(self) -> None:
        t = run(['gicv3_its_dte_read GICv3 ITS: Device Table read for DeviceID zz'])
        self.assertEqual(len(t.unreadable), 1)
        self.assertIn('DeviceID zz', t.unreadable[0])


if __name__ == '__main__':
    unittest.main()


class Redistributors(unittest.TestCase):
    """What the redistributor model (its/redist.py) is fed: each MSI's target CPU, the
    LPIs each CPU acknowledged, each CPU's GICR_PENDBASER and GICR_PROPBASER, in QEMU
    10.0's formats (hw/intc/trace-events)."""

    @staticmethod
    def rd_write(cpu: int, offset: int, data: int, size: int) -> str:
        return (f'gicv3_redist_write GICv3 redistributor {cpu:#x} write: offset {offset:#x} '
                f'data {data:#x} size {size} secure 0')

    @staticmethod
    def iar1(cpu: int, intid: int) -> str:
        return f'gicv3_icc_iar1_read GICv3 ICC_IAR1 read cpu {cpu:#x} value {intid:#x}'

    def test_targets_acks_and_tables(self) -> None:
        lines = [self.rd_write(2, 0x70, 0x4010_0000 | 0xf, 8),
                 self.rd_write(2, 0x78, 0x4020_0000, 4),      # a 32-bit half, then the other
                 self.rd_write(2, 0x7c, 0x0, 4),
                 self.rd_write(2, 0x10, 0x1, 4)]              # not a table register
        lines += console('kloc-its: begin\n')
        for _ in range(3):
            lines += msi(0x8, 0, 0x6005_0000, 2)
            lines += [self.iar1(2, 0x2000), self.iar1(2, 27)]  # the LPI, then a timer PPI
        lines += [self.iar1(1, 0x3ff)]                          # spurious: not an LPI
        lines += console('kloc-its: end\n')
        t = run(lines)
        w = t.windows[0]
        self.assertEqual((w.interrupts, w.targets, w.acked), (3, {2: 3}, {2: 3}))
        self.assertEqual(t.rd_regs[(2, 0x70)], 0x4010_000f)
        self.assertEqual(t.rd_regs[(2, 0x78)], 0x4020_0000)
        self.assertNotIn((2, 0x10), t.rd_regs)
        self.assertEqual(trace.cpu_of_affinity(0x0102), 18)    # Aff1 1, Aff0 2: CPU 18
