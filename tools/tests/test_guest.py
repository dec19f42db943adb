# SPDX-License-Identifier: GPL-2.0
"""Guest pieces that need no guest: requests, the initramfs, console parsing."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import unittest
from pathlib import Path
from unittest import mock

from kloc.counting.plugin import Plugin
from kloc.guests import guest, record
from kloc.paths import cache_dir
from kloc.qemu import release, topology
from kloc.trees.sources import Tree
from kloc.version import KernelVersion

from .helpers import debian_tree

RECORD = '{"threads": 4, "pps_total": 139193, "sent": 281664, "lo_tx": 281664}'


def tree(version: str) -> Tree:
    return Tree(Path('/nonexistent'), KernelVersion.parse(version), 'debian')


class MachineCheck(unittest.TestCase):
    def test_record_must_come_from_the_topology(self) -> None:
        topo = topology.get('x86_64_2n')
        four: dict[str, object] = {'per_cpu': [{'cpu': c, 'node': c // 2, 'pps': 1}
                                               for c in range(4)]}
        self.assertEqual(guest.check_machine(four, topo), '')
        two: dict[str, object] = {'per_cpu': [{'cpu': c, 'node': 0, 'pps': 1} for c in range(2)]}
        self.assertIn('ran on 2 CPUs in 1 nodes, but topology x86_64_2n has 4 CPUs in 2',
                      guest.check_machine(two, topo))
        one_node: dict[str, object] = {'per_cpu': [{'cpu': c, 'node': 0, 'pps': 1}
                                                   for c in range(4)]}
        self.assertIn('CONFIG_NUMA', guest.check_machine(one_node, topo))


class BuildRecord(unittest.TestCase):
    """Issue 37, item 6: kbuild's .cmd files say what a guest was built from; a patch
    to none of those files (nor to a file that drives a build) cannot change it."""

    def test_what_the_guest_read(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            src, bdir = Path(d) / 'src', Path(d) / 'build'
            (bdir / 'drivers/net').mkdir(parents=True)
            (bdir / '.config').write_text('CONFIG_NET=y\n')
            (bdir / 'drivers/net/.loopback.o.cmd').write_text(
                'savedcmd_drivers/net/loopback.o := gcc -c ../src/drivers/net/loopback.c\n\n'
                'source_drivers/net/loopback.o := ../src/drivers/net/loopback.c\n\n'
                'deps_drivers/net/loopback.o := \\\n'
                '  ../src/include/linux/kconfig.h \\\n'
                '    $(wildcard include/config/CPU_BIG_ENDIAN) \\\n'
                '  ../src/include/linux/percpu.h \\\n\n'
                'drivers/net/loopback.o: $(deps_drivers/net/loopback.o)\n')
            src.mkdir()
            read = record.compiled_in(bdir, src)
            self.assertEqual(read, {'drivers/net/loopback.c', 'include/linux/kconfig.h',
                                    'include/linux/percpu.h'})
            self.assertIsNone(record.compiled_in(Path(d) / 'none', src))
        its = ('drivers/irqchip/irq-gic-v3-its.c',)
        self.assertIn('names none of drivers/irqchip/irq-gic-v3-its.c',
                      record.untouched_by(read, its, 'the guest'))
        for moves in (('drivers/net/loopback.c',), ('include/linux/percpu.h',),
                      its + ('drivers/net/loopback.c',), ('drivers/irqchip/Kconfig',),
                      ('drivers/irqchip/Makefile',), ('tools/testing/selftests/x.c',),
                      ('scripts/foo.sh',)):
            with self.subTest(files=moves):
                self.assertEqual(record.untouched_by(read, moves, 'the guest'), '')
        self.assertEqual(record.untouched_by(None, its, 'the guest'), '')


class ConfiguredOut(unittest.TestCase):
    """Issue 48, item 4: a patch to a driver the guest's .config leaves out is known
    not to move the guest from the configuration alone, before a cold build (a
    review of 7.2's ITS driver built the x86_64 guest for 9.5 minutes to find it):
    the Makefiles of a real tree, a .config as olddefconfig writes it."""

    def test_a_driver_the_config_leaves_out(self) -> None:
        tree = debian_tree('6.12').path
        its = 'drivers/irqchip/irq-gic-v3-its.c'
        self.assertEqual(record.config_gate(tree, its), 'CONFIG_ARM_GIC_V3_ITS')
        self.assertEqual(record.config_gate(tree, 'drivers/net/loopback.c'), 'CONFIG_NET')
        for unsettled in ('include/linux/percpu.h', 'drivers/irqchip/Makefile',
                          'drivers/irqchip/../net/loopback.c', 'no/such/dir/x.c'):
            self.assertIsNone(record.config_gate(tree, unsettled), unsettled)
        with tempfile.TemporaryDirectory() as d:
            config = Path(d) / '.config'
            config.write_text('CONFIG_NET=y\n# CONFIG_ARM_GIC_V3_ITS is not set\n')
            why = record.not_configured(tree, config, (its,), 'the x86_64 guest')
            self.assertIn(f'{its} (CONFIG_ARM_GIC_V3_ITS)', why)
            for moves in ((its, 'drivers/net/loopback.c'), (its, 'include/linux/percpu.h'),
                          (its, 'drivers/irqchip/Kconfig'), ()):
                with self.subTest(files=moves):
                    self.assertEqual(record.not_configured(tree, config, moves, 'g'), '')
            config.write_text('CONFIG_NET=y\nCONFIG_ARM_GIC_V3_ITS=y\n')
            self.assertEqual(record.not_configured(tree, config, (its,), 'g'), '')
            self.assertEqual(record.not_configured(tree, Path(d) / 'none', (its,), 'g'), '')


class Pack(unittest.TestCase):
    def test_the_same_files_pack_to_the_same_bytes(self) -> None:
        """An initramfs is reproducible: packed twice, a second apart, from copies made
        at different times, the bytes are the same (a seed then counts alike from one
        comparison to the next)."""
        with tempfile.TemporaryDirectory() as d:
            packs = []
            for k in range(2):
                root = Path(d) / f'root{k}'
                (root / 'bin').mkdir(parents=True)
                (root / 'bin' / 'tool').write_text('#!/bin/sh\n')
                (root / 'init').write_text(f'#!/bin/sh\n{"x" * 10}\n')
                os.utime(root / 'init', (1000 + k * 10**6, 1000 + k * 10**6))
                packs.append(guest.pack(root, Path(d) / f'{k}.gz').read_bytes())
                time.sleep(1.1)
            self.assertEqual(packs[0], packs[1])
            listing = subprocess.run(['sh', '-c', f'gzip -dc {d}/0.gz | cpio -itv'],
                                     capture_output=True, text=True, check=True).stdout
        self.assertIn('init', listing)


class CountedCommand(unittest.TestCase):
    def test_tcg_one_thread_icount_and_no_kaslr(self) -> None:
        g = guest.Guest(tree('6.12.57'), 'x86_64', 'slub')
        topo = topology.get('x86_64_2n')
        plugin = Plugin(Path('/p/kloc-count.so'), '1:7.2', 1, False)
        cmd = guest.counted_command(g, Path('/i.gz'), topo, plugin, Path('/c.json'))
        self.assertEqual(cmd[cmd.index('-accel') + 1], 'tcg,thread=single')
        self.assertEqual(cmd.count('-accel'), 1)
        self.assertEqual(cmd[cmd.index('-icount') + 1], 'shift=0,sleep=off')
        self.assertIn('nokaslr', cmd[cmd.index('-append') + 1])
        self.assertTrue(cmd[cmd.index('-plugin') + 1].startswith('/p/kloc-count.so,'))
        timed = guest.qemu_command(g, Path('/i.gz'), topo)
        self.assertNotIn('nokaslr', timed[timed.index('-append') + 1])
        self.assertNotIn('-icount', timed)
        self.assertNotIn('-plugin', timed)

    def test_a_seed_fixes_the_guests_randomness_and_clock(self) -> None:
        g = guest.Guest(tree('6.12.57'), 'x86_64', 'slub')
        topo = topology.get('x86_64_2n')
        plugin = Plugin(Path('/p/kloc-count.so'), '1:7.2', 1, False)
        cmd = guest.counted_command(g, Path('/i.gz'), topo, plugin, Path('/c.json'), 3)
        self.assertEqual(cmd[cmd.index('-seed') + 1], '3')
        self.assertEqual(cmd[cmd.index('-rtc') + 1], 'base=2026-01-01T00:00:00,clock=vm')
        plain = guest.counted_command(g, Path('/i.gz'), topo, plugin, Path('/c.json'))
        self.assertNotIn('-seed', plain)
        self.assertNotIn('-rtc', plain)

    def test_percpu_offsets_from_the_guests_system_map(self) -> None:
        """The register check of the running vCPU gets __per_cpu_offset from the
        guest build's System.map; without one the boot is counted unchecked."""
        topo = topology.get('x86_64_2n')
        plugin = Plugin(Path('/p/kloc-count.so'), '1:10.0.2', 4, False)
        with tempfile.TemporaryDirectory() as tmp:
            t = Tree(Path(tmp) / 'linux', KernelVersion.parse('6.12.57'), 'debian')
            g = guest.Guest(t, 'x86_64', 'slub')
            g.build_dir().mkdir()
            (g.build_dir() / 'System.map').write_text('ffffffff82a1b2c0 D __per_cpu_offset\n')
            cmd = guest.counted_command(g, Path('/i.gz'), topo, plugin, Path('/c.json'))
            self.assertIn(',percpu=0xffffffff82a1b2c0', cmd[cmd.index('-plugin') + 1])
            (g.build_dir() / 'System.map').unlink()
            cmd = guest.counted_command(g, Path('/i.gz'), topo, plugin, Path('/c.json'))
            self.assertNotIn('percpu=', cmd[cmd.index('-plugin') + 1])

    def test_every_counted_boot_runs_under_icount(self) -> None:
        topo = topology.get('x86_64_2n')
        plugin = Plugin(Path('/p/kloc-count.so'), '1:10.0.2', 4, False)
        for version in ('6.1.192', '6.12.57', '7.2.0'):
            cmd = guest.counted_command(guest.Guest(tree(version), 'x86_64', 'slub'),
                                        Path('/i.gz'), topo, plugin, Path('/c.json'))
            self.assertEqual(cmd[cmd.index('-icount') + 1], 'shift=0,sleep=off')
            self.assertEqual(cmd[cmd.index('-accel') + 1], 'tcg,thread=single')

    def test_6_1_is_refused_on_a_qemu_whose_icount_hangs_it(self) -> None:
        """The QEMU on PATH decides: the system's 7.2 refuses 6.1, QEMU 10.0 runs it."""
        topo = topology.get('x86_64_2n')
        old = guest.Guest(tree('6.1.192'), 'x86_64', 'slab')
        new = guest.Guest(tree('6.12.57'), 'x86_64', 'slub')
        system = Path('/usr/bin')             # Debian 12's QEMU 7.2
        ten = release.fetch(cache_dir()).bin_dir
        for first, refused in ((system, True), (ten, False)):
            with mock.patch.dict(os.environ, {'PATH': f'{first}:{os.environ["PATH"]}'}):
                guest.check_counted(new, topo)      # 6.12 boots under either icount
                if refused:
                    with self.assertRaisesRegex(guest.GuestError,
                                                r'need QEMU 8\.1 or later.*QEMU 10\.0'):
                        guest.check_counted(old, topo)
                else:
                    guest.check_counted(old, topo)


class GuestRequest(unittest.TestCase):
    def test_slab_only_before_6_8(self) -> None:
        guest.check(guest.Guest(tree('6.1.120'), 'x86_64', 'slab'))
        guest.check(guest.Guest(tree('6.7'), 'arm64', 'slab'))
        with self.assertRaisesRegex(guest.GuestError, 'removed in 6.8; use KERNEL=6.1'):
            guest.check(guest.Guest(tree('6.12.57'), 'x86_64', 'slab'))
        guest.check(guest.Guest(tree('6.12.57'), 'x86_64', 'slub'))

    def test_bad_requests(self) -> None:
        with self.assertRaisesRegex(guest.GuestError, 'use slub or slab'):
            guest.check(guest.Guest(tree('6.1'), 'x86_64', 'slob'))
        with self.assertRaisesRegex(guest.GuestError, 'no guest for arch riscv'):
            guest.check(guest.Guest(tree('6.1'), 'riscv', 'slub'))

    def test_fragments_exist(self) -> None:
        for name in ('guest-base', 'numa', 'slub', 'slab'):
            self.assertTrue((guest.CONFIGS / f'{name}.config').is_file(), name)


class BuildNice(unittest.TestCase):
    """make test builds its guests in the background at KLOC_BUILD_NICE=19: their make
    runs at that niceness, the build's identity does not change with it, and a value
    that is no niceness is refused before anything runs."""

    def niceness_under(self, value: str | None) -> int:
        env = {k: v for k, v in os.environ.items() if k != guest.BUILD_NICE}
        if value is not None:
            env[guest.BUILD_NICE] = value
        with mock.patch.dict(os.environ, env, clear=True):
            prefix = guest.build_nice()
        own = os.getpriority(os.PRIO_PROCESS, 0)
        r = subprocess.run(prefix + ['nice'], capture_output=True, text=True, check=True)
        return int(r.stdout) - own

    def test_make_runs_at_the_niceness_asked(self) -> None:
        if os.getpriority(os.PRIO_PROCESS, 0) != 0:
            self.skipTest('this test runs niced already')
        self.assertEqual(self.niceness_under('19'), 19)
        self.assertEqual(self.niceness_under('5'), 5)
        self.assertEqual(self.niceness_under(None), 0)
        self.assertEqual(self.niceness_under('0'), 0)

    def test_the_build_is_the_same_build_niced_or_not(self) -> None:
        g = guest.Guest(tree('6.12.57'), 'x86_64', 'slub')
        with mock.patch.dict(os.environ, {guest.BUILD_NICE: '19'}):
            niced = guest._inputs(g)
        with mock.patch.dict(os.environ, {guest.BUILD_NICE: ''}):
            self.assertEqual(guest._inputs(g), niced)

    def test_no_niceness_is_refused(self) -> None:
        for bad in ('20', '-5', 'low', '1.5'):
            with mock.patch.dict(os.environ, {guest.BUILD_NICE: bad}), \
                    self.assertRaisesRegex(guest.GuestError,
                                           f"KLOC_BUILD_NICE='{bad}' is not a niceness from 0 "
                                           'to 19'):
                guest.build_nice()

    def test_refused_where_nothing_is_built(self) -> None:
        """check(), which every command runs before it builds or reuses a guest,
        refuses it: a bad value is never passed over because the image was reused."""
        g = guest.Guest(tree('6.12.57'), 'x86_64', 'slub')
        with mock.patch.dict(os.environ, {guest.BUILD_NICE: 'low'}), \
                self.assertRaisesRegex(guest.GuestError, "KLOC_BUILD_NICE='low'"):
            guest.check(g)
        with mock.patch.dict(os.environ, {guest.BUILD_NICE: '19'}):
            guest.check(g)


class Console(unittest.TestCase):
    def test_result(self) -> None:
        text = f'boot\n{guest.BEGIN}\n{RECORD}\n{guest.END} 0\nreboot\n'
        record, why = guest.parse_console(text)
        self.assertEqual(why, '')
        assert record is not None
        self.assertEqual(record['sent'], 281664)

    def test_failed_selftest_keeps_its_record_but_is_no_result(self) -> None:
        record, why = guest.parse_console(f'{guest.BEGIN}\n{RECORD}\n{guest.END} 1\n')
        self.assertIsNotNone(record)
        self.assertIn('failed (exit 1)', why)

    def test_panic_or_hang_is_no_result(self) -> None:
        for text in ('Kernel panic - not syncing: VFS\n', f'{guest.BEGIN}\n{{"threads"',
                     f'{guest.BEGIN}\nnot json\n{guest.END} 0\n'):
            record, why = guest.parse_console(text)
            self.assertTrue(why, text)


class StockInstall(unittest.TestCase):
    def test_command_is_the_stock_install_built_static(self) -> None:
        ksft, inst, build = Path('/t/tools/testing/selftests'), Path('/i'), Path('/b')
        cmd = guest.install_command('x86_64', ksft, inst, build)
        self.assertEqual(cmd[:5], ['make', '-C', str(ksft), 'TARGETS=lo_counters', 'install'])
        for arg in ('INSTALL_PATH=/i', 'O=/b', 'LDFLAGS=-static', 'CC=gcc', 'ARCH=x86_64'):
            self.assertIn(arg, cmd)
        self.assertFalse([a for a in cmd if a.startswith('CROSS_COMPILE=')])
        arm = guest.install_command('arm64', ksft, inst, build)
        self.assertIn('CC=aarch64-linux-gnu-gcc', arm)
        self.assertIn('CROSS_COMPILE=aarch64-linux-gnu-', arm)
        self.assertIn('ARCH=arm64', arm)

    def test_install_root(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            inst = Path(d)
            (inst / 'lo_counters').mkdir()
            (inst / 'lo_counters' / 'lo_counters').write_bytes(b'\x7fELF')
            self.assertIsNone(guest.install_root(inst / 'lo_counters' / 'lo_counters'))
            (inst / 'run_kselftest.sh').write_text('#!/bin/sh\n')
            self.assertEqual(guest.install_root(inst / 'lo_counters' / 'lo_counters'), inst)
            self.assertEqual(guest.installed_test(inst), inst / 'lo_counters' / 'lo_counters')


def listing(img: Path) -> set[str]:
    return set(subprocess.run(f'zcat {img} | cpio -t --quiet', shell=True,
                              capture_output=True, text=True, check=True).stdout.split())


def init_of(img: Path) -> str:
    return subprocess.run(f'zcat {img} | cpio -i --to-stdout --quiet init', shell=True,
                          capture_output=True, text=True, check=True).stdout


class Initramfs(unittest.TestCase):
    def setUp(self) -> None:
        if not guest.BUSYBOX.exists():
            self.skipTest('busybox-static is not installed')

    def test_a_kselftest_install_goes_in_whole(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            inst = Path(d) / 'kselftest-x86_64'
            for rel, data in (('run_kselftest.sh', b'#!/bin/sh\n'),
                              ('kselftest/runner.sh', b'#!/bin/sh\n'),
                              ('kselftest-list.txt', b'lo_counters:lo_counters\n'),
                              ('lo_counters/lo_counters', b'\x7fELF'),
                              ('lo_counters/settings', b'timeout=120\n'),
                              ('lo_counters/config', b'CONFIG_NET=y\n')):
                (inst / rel).parent.mkdir(parents=True, exist_ok=True)
                (inst / rel).write_bytes(data)
            img = guest.initramfs(guest.installed_test(inst), ['-d', '1', '-w', '0.5'],
                                  Path(d) / 'initrd.gz', 'x86_64')
            names = listing(img)
            self.assertTrue({'init', 'bin/busybox', 'proc', 'sys', 'kselftest/run_kselftest.sh',
                             'kselftest/kselftest/runner.sh', 'kselftest/kselftest-list.txt',
                             'kselftest/lo_counters/lo_counters',
                             'kselftest/lo_counters/settings'} <= names, names)
            init = init_of(img)
            self.assertIn('/kselftest/lo_counters/lo_counters -d 1 -w 0.5 -j /tmp.json', init)
            self.assertIn(f'echo {guest.BEGIN}', init)
            self.assertIn(f'echo "{guest.END} $rc"', init)
            self.assertIn('reboot -f', init)

    def test_another_program_takes_the_tests_place(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            binary = Path(d) / 'kloc-locality'
            binary.write_bytes(b'\x7fELF')
            img = guest.initramfs(binary, ['-n', '5'], Path(d) / 'initrd.gz', 'x86_64')
            self.assertIn('kselftest/lo_counters/lo_counters', listing(img))
            self.assertNotIn('kselftest/run_kselftest.sh', listing(img))
            self.assertIn('/kselftest/lo_counters/lo_counters -n 5 -j /tmp.json', init_of(img))
