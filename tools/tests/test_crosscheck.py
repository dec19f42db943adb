# SPDX-License-Identifier: GPL-2.0
"""Issue 25's cross-check: kloc-count's cache model agrees with QEMU's own
contrib/plugins/cache.c, configured alike, on the same guest run.

One boot per cache of the x86_64 guest kernel the counting tests use, with
the counting tests' initramfs (tests/kloc-locality.c), one vCPU and one
node of 1 GiB, under the installed QEMU, with three plugins loaded:
kloc-count (count=all, coherence=off; node=0 covering the RAM, cpus=0:0),
cache.c (the same size, ways and 64-byte lines, evict=lru; its dcache is
compared), and a counter of the accesses that straddle a line
(kloc.counting.crosscheck). With one vCPU, kloc-locality finds no node 1
and stops at once (Linux numbers the node of the boot CPU 0, whatever
QEMU's -numa says): the run compared is the kernel's boot, from the
firmware to the guest's reboot, some 385 million data accesses. The
firmware is qboot (-bios qboot.rom): SeaBIOS reads its ROM some 190,000
times, qboot and the kernel's scans of the BIOS area some 13,000, and ROM
accesses are references of cache.c's alone (below). Without -icount the
run, and so the figures, differ a little from boot to boot; both plugins
see the same one.

The differences the two models are expected to have, and nothing else:
- a straddling access (two lines; across a page, each page's own) is two
  lookups for kloc-count, one (its first byte's line) for cache.c;
- an access outside kloc-count's RAM map (the firmware's ROM:
  kloc-count's unmapped) or with no hwaddr (kloc-count's io) is a lookup
  for cache.c only; MMIO is a lookup for neither.
Each such reference, made by one model alone, changes the misses by one to
first order (its own miss, or the line it evicts or brings in for a later
access), so the bound is straddles + (cache.c's accesses - kloc-count's
cached accesses), and the misses must agree within it. LRU could in the
worst case turn one reference into associativity + 1 misses in a cascade:
that bound is printed, not asserted. Everything else is the same in both:
the line of an access (with one RAM block at 0, QEMU 7.2's
qemu_plugin_hwaddr_phys_addr(), which cache.c uses, is the guest-physical
address kloc-count maps it to), the set index, LRU, the empty start, one
core. So a difference beyond the bound is a bug in one of them, or a
configuration that is not alike: MISMATCH (cache.c with half the ways,
some 2.7% more misses) is caught.

The figures are printed. The test needs a built x86_64 guest kernel (make
guest, the guest make mutants builds, or KLOC_COUNT_GUEST=/path/to/bzImage)
and QEMU's sources (qemu/source.py); without them it is skipped, saying why.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from kloc.counting import crosscheck
from kloc.counting.crosscheck import CacheConfig
from kloc.counting.errors import CountingError
from kloc.counting.plugin import PLUGIN_DIR
from kloc.counting.qemu_args import plugin_args
from kloc.guests import guest
from kloc.qemu import arches

from .test_counting import (GUEST_ARCHES, ITERS, find_guest_image, guest_tests, missing,
                            tool_or_skip)

ARCH = 'x86_64'
L1 = CacheConfig(32 << 10, 8)       # a core's L1 dcache: capacity misses all along
L2 = CacheConfig(1 << 20, 16)       # kloc-count's default (a server core's L2)
# A configuration that is not alike: cache.c with half the ways must be caught.
MISMATCH = CacheConfig(L1.size, L1.assoc // 2)


def machine(image: Path, initrd: Path) -> list[str]:
    """One vCPU, one node of 1 GiB (the -numa node gives kloc-count its memory map)."""
    _, _, console, _, _, _ = GUEST_ARCHES[ARCH]
    return ['qemu-system-x86_64', *arches.get(ARCH).numa_machine, '-smp', '1', '-m', '1024',
            '-bios', 'qboot.rom',
            '-object', 'memory-backend-ram,id=m0,size=1024M',
            '-numa', 'node,nodeid=0,cpus=0,memdev=m0',
            '-kernel', str(image), '-initrd', str(initrd),
            '-append', f'console={console} panic=-1 quiet', '-nographic', '-nodefaults',
            '-serial', 'stdio', '-no-reboot']


class Parts(unittest.TestCase):
    """What needs no boot: the arguments, and reading cache.c's table."""

    def test_plugin_arguments_of_the_machine(self) -> None:
        cmd = machine(Path('bzImage'), Path('initrd'))
        self.assertEqual(plugin_args(cmd, (7, 2)),
                         ['node=0:0x0-0x3fffffff', 'cpus=0:0', 'ram=0x0-0x3fffffff:0x0'])
        self.assertEqual(L1.kloc_args(), ['count=all', 'coherence=off', 'cache=32768',
                                          'assoc=8', 'line=64'])
        self.assertEqual(L2.cache_c_args(), ['dcachesize=1048576', 'dassoc=16', 'dblksize=64',
                                             'evict=lru', 'cores=1'])
        with self.assertRaisesRegex(CountingError, 'power-of-two number of sets'):
            CacheConfig(48 << 10, 8)

    def test_cache_c_table(self) -> None:
        log = ('core #, data accesses, data misses, dmiss rate, insn accesses, insn misses, '
               'imiss rate\n'
               '0       1787217        25175           1.4086%  5811210        695'
               '             0.0120%\n\naddress, data misses, instruction\n')
        self.assertEqual(crosscheck.parse_cache_log(log),
                         {0: crosscheck.CacheCore(0, 1787217, 25175)})
        with self.assertRaisesRegex(CountingError, 'no "core #'):
            crosscheck.parse_cache_log('address, data misses, instruction\n')
        self.assertEqual(crosscheck.parse_straddles('accesses 10\nstraddles 2\n'), (10, 2))

    def test_the_bound(self) -> None:
        c = crosscheck.CrossCheck(L1, L1, kloc_misses=1100, kloc_accesses=10000,
                                  kloc_cached=9000, io=10, unmapped=990, qemu_misses=1000,
                                  qemu_accesses=9991, straddles=50, looked_up=9990)
        self.assertEqual((c.qemu_only, c.bound, c.worst_case_bound), (991, 1041, 9369))
        self.assertTrue(c.agrees)
        self.assertAlmostEqual(c.relative_difference, 0.1)
        self.assertFalse(dataclasses.replace(c, kloc_misses=2042).agrees)


class _Boot(unittest.TestCase):
    CONFIG: CacheConfig
    QEMU_CONFIG: CacheConfig | None = None
    run_: crosscheck.Run
    tmp: tempfile.TemporaryDirectory[str]

    @classmethod
    def setUpClass(cls) -> None:
        guest_tests()
        _, _, _, cc, libc, env = GUEST_ARCHES[ARCH]
        image = find_guest_image(ARCH)
        if image is None or not image.is_file():
            missing(f'no built {ARCH} guest kernel (make guest ARCH={ARCH} builds one; '
                    f'or set {env}=/path/to/image)', ARCH)
        for tool in ('qemu-system-x86_64', cc, 'cpio', 'pkg-config'):
            tool_or_skip(tool)
        if not Path(libc).exists():
            raise unittest.SkipTest(f'no static libc for {ARCH} ({libc}; make deps)')
        try:
            crosscheck.cache_plugin_source()
        except CountingError as e:
            raise unittest.SkipTest(f'no QEMU sources for the installed QEMU: {e}') from None
        cls.tmp = tempfile.TemporaryDirectory(prefix='kloc-crosscheck-')
        try:
            cls.run_ = cls.boot(image, Path(cls.tmp.name), cc)
        except BaseException:
            cls.tmp.cleanup()   # tearDownClass does not run
            raise
        print(f'\n{image}: cross-check boot {cls.run_.seconds:.1f} s: '
              f'{cls.run_.check.summary()}', end=' ')

    @classmethod
    def boot(cls, image: Path, tmp: Path, cc: str) -> crosscheck.Run:
        prog = tmp / 'kloc-locality'
        subprocess.run([cc, '-static', '-O2', '-Wall', '-Wextra', '-Werror', '-pthread',
                        '-o', str(prog), str(PLUGIN_DIR / 'tests' / 'kloc-locality.c')],
                       check=True)
        try:
            initrd = guest.initramfs(prog, ['-n', str(ITERS)], tmp / 'initrd.gz', ARCH)
        except guest.GuestError as e:
            raise unittest.SkipTest(str(e)) from None
        return crosscheck.run(machine(image, initrd), cls.CONFIG, tmp,
                              timeout=int(os.environ.get('TIMEOUT', '900')),
                              qemu_config=cls.QEMU_CONFIG)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()

    def test_the_guest_ran_to_its_end(self) -> None:
        """The kernel booted, ran /init's program (which wants a node 1) and rebooted."""
        console = self.run_.console
        self.assertIn('no node 1', console, console[-3000:])
        self.assertIn(f'{guest.END} 1', console, console[-3000:])

    def test_both_saw_the_same_accesses(self) -> None:
        c = self.run_.check
        # the non-MMIO accesses with an hwaddr: kloc-count's loads + stores less io,
        # the straddle counter's, and cache.c's but those without an hwaddr
        self.assertEqual(c.looked_up, c.kloc_accesses - c.io)
        self.assertGreaterEqual(c.qemu_accesses, c.looked_up)
        self.assertLessEqual(c.qemu_accesses - c.looked_up, c.io)
        self.assertGreaterEqual(c.qemu_only, c.unmapped)


class _Alike(_Boot):
    def test_misses_agree_within_the_bound(self) -> None:
        c = self.run_.check
        # a bound as large as the misses would let any two models agree
        self.assertLess(c.bound, c.qemu_misses, c.summary())
        self.assertLessEqual(abs(c.difference), c.bound, c.summary())


class L1Cache(_Alike):
    CONFIG = L1


class L2Cache(_Alike):
    CONFIG = L2


class Mismatch(_Boot):
    """cache.c with half the ways: the same check must fail."""
    CONFIG = L1
    QEMU_CONFIG = MISMATCH

    def test_a_configuration_not_alike_is_caught(self) -> None:
        c = self.run_.check
        self.assertGreater(abs(c.difference), c.bound, c.summary())


del _Boot, _Alike   # only their subclasses are tests


if __name__ == '__main__':
    unittest.main()
