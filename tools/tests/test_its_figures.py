# SPDX-License-Identifier: GPL-2.0
"""kloc.its.figures on a real trace of the MSI workload, and each of its refusals.

tests/data/its-msi-6.12-arm64_2n_its1.trace is QEMU 10.0's trace of
tools/guest/its-msi.c (10 requests) in 6.12's arm64 guest on arm64_2n_its1.
The refusals are that trace with one thing taken away or added: the guest's
level-2 page line, its end marker, its result line, a second window, a line
QEMU would not write.
"""

from __future__ import annotations

import unittest
from pathlib import Path

from kloc.its import redist, trace
from kloc.its.figures import Boots, ItsFiguresError, figures, lines, side_by_side
from kloc.qemu import topology

MSI = Path(__file__).parent / 'data' / 'its-msi-6.12-arm64_2n_its1.trace'
TOPO = topology.get('arm64_2n_its1')
NODE_OF = trace.node_of(['qemu-system-aarch64', *TOPO.machine_args(), '-m', '1024'])


def real() -> list[str]:
    return [x for x in MSI.read_text().splitlines() if not x.startswith('#')]


def without_console_line(events: list[str], text: str) -> list[str]:
    """events less the pl011_write events that wrote the console line text."""
    out: list[str] = []
    pending: list[str] = []
    line = bytearray()
    for e in events:
        if not e.startswith('pl011_write') or int(e.split()[2], 16) != 0:   # not DR
            out.append(e)
            continue
        pending.append(e)
        b = int(e.split('value ')[1].split()[0], 16) & 0xff
        if b != 0x0a:
            line.append(b)
            continue
        if line.decode(errors='replace').rstrip('\r') != text:
            out += pending
        pending, line = [], bytearray()
    return out + pending


def read(events: list[str], its_node: int = 1) -> trace.ItsTrace:
    return trace.ItsTrace(NODE_OF, its_node).feed_all(events)


class RealTrace(unittest.TestCase):
    def test_ten_interrupts_five_local_reads_each(self) -> None:
        f = figures(read(real()), TOPO.name)
        self.assertEqual((f.requests, f.interrupts, f.guest_interrupts, f.devid,
                          f.device_node), (10, 10, 10, 0x8, 0))
        self.assertEqual({t: f.per_interrupt(t) for t in ('dt_l1', 'dte', 'ite', 'cte')},
                         {'dt_l1': (1, 0), 'dte': (1, 0), 'ite': (2, 0), 'cte': (1, 0)})
        self.assertEqual((f.local, f.remote, f.exact), (5, 0, True))
        self.assertEqual((f.cmd.local, f.cmd.remote, f.moved), (4, 0, 2))   # MOVI, SYNC x 2
        self.assertEqual(f.to_json()['remote_per_interrupt'], 0)

    def test_the_same_reads_from_node_0_are_remote(self) -> None:
        """The classification is by the ITS's node: an ITS on node 0 would find
        every table (all on node 1) remote."""
        f = figures(read(real(), its_node=0), TOPO.name)
        self.assertEqual((f.local, f.remote), (0, 5))

    def test_the_report(self) -> None:
        f = figures(read(real()), TOPO.name)
        text = '\n'.join(lines(f))
        self.assertIn('10 interrupts for 10 requests', text)
        self.assertRegex(text, r'all tables +5 +0')
        both = side_by_side(TOPO.name, Boots((f,)),
                            Boots((figures(read(real(), its_node=0), TOPO.name),)))
        self.assertTrue(all(len(x) <= 72 for x in both), both)
        self.assertRegex('\n'.join(both), r'all tables +5/0 +0/5')


CMD = ['qemu-system-aarch64', *TOPO.machine_args(), '-m', '1024']


class Redistributor(unittest.TestCase):
    """The target CPU's redistributor on the real trace: the workload moved the
    device's interrupts to CPU 2, on node 1, and stock 6.12 put every CPU's LPI pending
    table on node 0 (the known failure lpi-pending-tables-ignore-node): each MSI's
    7,172 byte accesses to it (QEMU's code as a model: set, acknowledge, a rescan of
    7,168 bytes) are remote, as is its one read of the property table."""

    def test_the_figures(self) -> None:
        f = figures(read(real()), TOPO.name, cpu_nodes=trace.cpu_nodes(CMD))
        self.assertEqual([(t.cpu, t.cpu_node, t.interrupts, t.acked, t.pending_node,
                           t.property_node, t.scan) for t in f.redist],
                         [(2, 1, 10, 10, 0, 0, 7168)])
        self.assertEqual(redist.per_interrupt(f.redist, 'pending'), (0, 7172))
        self.assertEqual(redist.per_interrupt(f.redist, 'property'), (0, 1))
        self.assertEqual(Boots((f,)).redist_remote(), 7173)
        text = lines(f)
        self.assertTrue(all(len(x) <= 72 for x in redist.lines(f.redist)), text)
        self.assertRegex('\n'.join(text), r'LPI pending table of the target CPU +0 +7172')
        doc = f.to_json()['redistributor']
        assert isinstance(doc, dict)
        self.assertEqual(doc['per_interrupt']['pending'], {'local': 0, 'remote': 7172})
        # with the table on the CPU's node, as the fix puts it: all local
        local = figures(read([x.replace('data 0x40', 'data 0x60') if
                              x.startswith('gicv3_redist_write') and 'offset 0x78 ' in x
                              else x for x in real()]), TOPO.name,
                        cpu_nodes=trace.cpu_nodes(CMD))
        self.assertEqual(redist.per_interrupt(local.redist, 'pending'), (7172, 0))

    def test_without_the_redistributors_writes(self) -> None:
        events = [x for x in real() if not x.startswith('gicv3_redist_write')]
        with self.assertRaisesRegex(ItsFiguresError, 'no GICR_PENDBASER/GICR_PROPBASER'):
            figures(read(events), TOPO.name, cpu_nodes=trace.cpu_nodes(CMD))


class BootsThatDiffer(unittest.TestCase):
    """Where the boots place a table differently, each distinct pair is shown."""

    def test_the_pairs_and_the_note(self) -> None:
        aware = figures(read(real()), TOPO.name)
        moved = figures(read(real(), its_node=0), TOPO.name)
        b, p = Boots((aware, aware)), Boots((moved, aware, moved))
        self.assertTrue(b.agree)
        self.assertFalse(p.agree)
        self.assertEqual((b.remotes(), p.remotes()), ('0', '5, 0, 5'))
        self.assertAlmostEqual(p.remote, 10 / 3)
        text = '\n'.join(side_by_side(TOPO.name, b, p))
        self.assertRegex(text, r'all tables +5/0 +0/5,5/0')
        self.assertIn("the patched's boots differ: remote reads per interrupt 5, 0, 5", text)
        self.assertEqual(Boots((aware,)).to_json()['agree'], True)


class Refusals(unittest.TestCase):
    def refused(self, events: list[str], why: str) -> None:
        with self.assertRaisesRegex(ItsFiguresError, why):
            figures(read(events), TOPO.name)

    def test_no_level_2_page(self) -> None:
        l2 = next(t for t in read(real()).console if t.startswith('kloc-its: l2'))
        self.refused(without_console_line(real(), l2), 'reads of the device table entry')

    def test_a_window_left_open(self) -> None:
        self.refused(without_console_line(real(), trace.END), 'never closed')

    def test_no_result_line(self) -> None:
        result = next(t for t in read(real()).console if t.startswith('kloc-its: result'))
        self.refused(without_console_line(real(), result), '0 "kloc-its: result" lines')

    def test_two_windows(self) -> None:
        self.refused(real() + without_console_line(real(), 'x'), '2 windows')

    def test_a_line_that_does_not_parse(self) -> None:
        self.refused(real() + ['gicv3_its_dte_read GICv3 ITS: Device Table read for '
                               'DeviceID 0xzz'], 'did not parse')

    def test_every_unparsed_line_is_counted(self) -> None:
        """The count is of all of them, not of the 20 kept as examples."""
        bad = 'gicv3_its_cte_read GICv3 ITS: Collection Table read for ICID 0xzz'
        self.refused(real() + [bad] * 25, '25 trace lines did not parse')

    def test_no_window(self) -> None:
        self.refused(without_console_line(without_console_line(real(), trace.BEGIN),
                                          trace.END), '0 windows')


if __name__ == '__main__':
    unittest.main()
