# SPDX-License-Identifier: GPL-2.0
"""The MSI workload in the default kernel's arm64 guest, booted on arm64_2n_its1 and
arm64_2n_its0 with QEMU tracing its ITS: the table reads per interrupt, exactly.

Linux 6.12 allocates every ITS table on the ITS's node (the seed patch, merged in
5.0), so each MSI reads five times, all local: the device table's level-1 entry
and level-2 entry (Linux makes the device table two-level with 64K pages), the
ITT entry (QEMU reads its 12 bytes as 8 and 4) and the collection-table entry.
A numa-unaware mutant moves some of them to the other node (docs/measurements.md).

make test runs this in a phase of its own (KLOC_GUEST_TESTS=arm64), where it builds
the guest if it must; elsewhere it skips unless that guest is built.
"""

from __future__ import annotations

import os
import tempfile
import unittest
from pathlib import Path
from typing import ClassVar

from kloc.guests import guest, its_boot, msi
from kloc.its.figures import ItsFigures
from kloc.paths import cache_dir
from kloc.qemu import topology
from kloc.trees import kernels
from kloc.trees.sources import resolve

REQUESTS = its_boot.REQUESTS
# (local, remote) reads per interrupt of each table on a NUMA-aware kernel
AWARE = {'dt_l1': (1, 0), 'dte': (1, 0), 'ite': (2, 0), 'cte': (1, 0)}


class _MsiWorkload(unittest.TestCase):
    TOPOLOGY = ''
    fig: ClassVar[ItsFigures]

    @classmethod
    def setUpClass(cls) -> None:
        wanted = os.environ.get('KLOC_GUEST_TESTS') == 'arm64'
        if os.environ.get('KLOC_GUEST_TESTS') == 'later':
            raise unittest.SkipTest('make test boots the guests in a later phase')
        built = cache_dir() / 'trees' / f'linux-{kernels.DEFAULT}' / 'guest-arm64-slub'
        if not wanted and not (built / 'arch/arm64/boot/Image').is_file():
            raise unittest.SkipTest(f'no built arm64 guest of Linux {kernels.DEFAULT} '
                                    '(make guest ARCH=arm64 builds it)')
        g = guest.Guest(resolve(kernels.DEFAULT, '', cache_dir()), 'arm64', 'slub')
        with tempfile.TemporaryDirectory(prefix='kloc-its-boot-') as tmp:
            out = Path(tmp)
            guest.build(g, out)      # make's no-op where it is built
            topo = topology.get(cls.TOPOLOGY)
            cls.fig = its_boot.run(g, msi.initramfs('arm64', out), topo,
                                   int(os.environ.get('TIMEOUT', '300')), out, REQUESTS)
        print(f'\n{cls.TOPOLOGY}: {cls.fig.interrupts} interrupts, '
              f'{cls.fig.local:g} local and {cls.fig.remote:g} remote reads per interrupt',
              end=' ')

    def test_every_interrupt_is_translated_and_counted(self) -> None:
        f = self.fig
        self.assertEqual(f.interrupts, f.guest_interrupts)
        self.assertGreaterEqual(f.interrupts, REQUESTS)
        # the hwrng core's fill thread reads too, rarely: a few at most
        self.assertLessEqual(f.interrupts, REQUESTS + 3)
        self.assertEqual(f.devid, 0x8)     # 00:01.0, the first slot of virt's PCIe bus
        self.assertEqual(f.device_node, its_boot.DEVICE_NODE)   # the DTB's, as Linux saw it

    def test_reads_per_interrupt_exactly(self) -> None:
        self.assertTrue(self.fig.exact)
        got = {t: self.fig.per_interrupt(t) for t in AWARE}
        self.assertEqual(got, {t: (float(a), float(b)) for t, (a, b) in AWARE.items()})
        self.assertEqual((self.fig.local, self.fig.remote), (5.0, 0.0))

    def test_the_target_cpus_redistributor(self) -> None:
        """Every MSI went to a CPU whose redistributor took it (each acknowledged);
        the model's accesses are the pending table's set, acknowledge and a rescan of
        its 7,168 bytes (Linux's 16 bits of LPI IDs), all to the node Linux put the
        CPU's table on (node 0 for every CPU on stock kernels: the known failure
        lpi-pending-tables-ignore-node; the CPU's own with the fix)."""
        ts = self.fig.redist
        self.assertTrue(ts)
        self.assertEqual(sum(t.interrupts for t in ts), self.fig.interrupts)
        for t in ts:
            self.assertEqual((t.acked, t.scan), (t.interrupts, 7168))
            n = 7172 * t.interrupts
            self.assertEqual(t.split('pending'),
                             (n, 0) if t.pending_node == t.cpu_node else (0, n))
        print(f'redistributor: {[(t.cpu, t.cpu_node, t.pending_node) for t in ts]} '
              '(CPU, its node, its pending table\'s node)', end=' ')

    def test_the_moves_commands(self) -> None:
        """The workload moves each of the device's two interrupts to another CPU in
        the window: a MOVI and a SYNC each, read from the queue on the ITS's node;
        steady MSIs need no other command."""
        self.assertEqual(self.fig.moved, 2)
        self.assertEqual((self.fig.cmd.local, self.fig.cmd.remote), (4, 0))


class Its1(_MsiWorkload):
    TOPOLOGY = 'arm64_2n_its1'


class Its0(_MsiWorkload):
    TOPOLOGY = 'arm64_2n_its0'


del _MsiWorkload


if __name__ == '__main__':
    unittest.main()
