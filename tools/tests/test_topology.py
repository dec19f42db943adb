# SPDX-License-Identifier: GPL-2.0
"""Topologies, their DTBs, and the kunit.py QEMU configs that name them."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from kloc.qemu import topology
from kloc.paths import QEMU_CONFIGS

from .helpers import debian_tree


def fdtget(dtb: Path, *args: str) -> str:
    return subprocess.run(['fdtget', str(dtb)] + list(args), capture_output=True,
                          text=True).stdout.strip()


class TopologyTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix='kloc-topo-')
        self.addCleanup(self.tmp.cleanup)
        self.cache = Path(self.tmp.name)

    def test_every_topology_is_valid_and_has_a_config(self) -> None:
        self.assertGreaterEqual(len(topology.TOPOLOGIES), 4)
        for name, topo in topology.TOPOLOGIES.items():
            topo.validate()
            self.assertTrue((QEMU_CONFIGS / f'{name}.py').is_file(), name)
        configs = {p.stem for p in QEMU_CONFIGS.glob('*.py')}
        self.assertEqual(configs, set(topology.TOPOLOGIES))

    def test_memory_must_add_up(self) -> None:
        bad = topology.Topology(name='bad', nodes=(topology.Node(cpus=2, mem_mb=512),
                                                   topology.Node(cpus=2, mem_mb=256)),
                                its_node=0, about='')
        with self.assertRaisesRegex(topology.TopologyError, '768 MiB.*-m 1024'):
            bad.validate()
        bad = topology.Topology(name='bad', nodes=(topology.Node(cpus=2, mem_mb=1024),),
                                its_node=1, about='')
        with self.assertRaisesRegex(topology.TopologyError, 'node 1, which does not exist'):
            bad.validate()

    def test_unknown_topology(self) -> None:
        with self.assertRaisesRegex(topology.TopologyError, 'known: arm64_2n_its1'):
            topology.get('nope')

    def test_dtb_its_node(self) -> None:
        for name, want in (('arm64_2n_its1', '1'), ('arm64_2n_its0', '0'),
                           ('arm64_2n_itsnone', '')):
            dtb = topology.dtb(topology.get(name), self.cache)
            its = [x for x in fdtget(dtb, '-l', '/intc@8000000').split()
                   if x.startswith('its@')]
            self.assertEqual(len(its), 1, name)
            self.assertEqual(fdtget(dtb, f'/intc@8000000/{its[0]}', 'numa-node-id'), want, name)
            cpus = fdtget(dtb, '-l', '/cpus').split()
            self.assertEqual(len([c for c in cpus if c.startswith('cpu@')]), 4)
        # Made once, then reused.
        first = topology.dtb(topology.get('arm64_2n_its1'), self.cache)
        mtime = first.stat().st_mtime_ns
        self.assertEqual(topology.dtb(topology.get('arm64_2n_its1'), self.cache), first)
        self.assertEqual(first.stat().st_mtime_ns, mtime)

    def test_accel_choice(self) -> None:
        with mock.patch.dict(os.environ, {'KLOC_ACCEL': 'tcg'}):
            self.assertEqual(topology.accel_args(), ['-accel', 'tcg,thread=multi'])
        with mock.patch.dict(os.environ, {'KLOC_ACCEL': 'warp'}):
            with self.assertRaisesRegex(topology.TopologyError, 'use auto, kvm or tcg'):
                topology.accel_args()
        with mock.patch.dict(os.environ, {'KLOC_ACCEL': 'kvm'}), \
                mock.patch('platform.machine', return_value='x86_64'):
            with self.assertRaisesRegex(topology.TopologyError, 'KVM cannot run'):
                topology.accel_args('aarch64')

    def test_auto_uses_kvm_only_after_a_boot_probe_passed(self) -> None:
        env = {'KLOC_ACCEL': 'auto', 'KLOC_CACHE': str(self.cache)}
        verdict = topology.kvm_verdict_path('x86_64', self.cache)
        with mock.patch.dict(os.environ, env), \
                mock.patch.object(topology, 'kvm_possible', return_value=True):
            self.assertEqual(topology.accel_args('x86_64'), ['-accel', 'tcg,thread=multi'])
            verdict.write_text('{"ok": false}')
            self.assertEqual(topology.accel_args('x86_64'), ['-accel', 'tcg,thread=multi'])
            verdict.write_text('{"ok": true}')
            self.assertEqual(topology.accel_args('x86_64'), ['-accel', 'kvm', '-cpu', 'host'])
        with mock.patch.dict(os.environ, env), \
                mock.patch.object(topology, 'kvm_possible', return_value=False):
            self.assertEqual(topology.accel_args('x86_64'), ['-accel', 'tcg,thread=multi'])

    def test_no_probe_where_the_cpu_has_no_virtualization(self) -> None:
        """Issue 48, item 9: a /dev/kvm on a CPU without vmx or svm cannot run a guest;
        kloc does not spend the probe's 60 s finding that out. This machine's own
        cpuinfo is read too: the answer must match its flags."""
        with tempfile.TemporaryDirectory() as d:
            info = Path(d) / 'cpuinfo'
            info.write_text('processor\t: 0\nflags\t\t: fpu sse2 hypervisor avx2\n')
            self.assertFalse(topology.virtualization_flags(info))
            info.write_text('processor\t: 0\nflags\t\t: fpu vmx sse2\n')
            self.assertTrue(topology.virtualization_flags(info))
            info.write_text('flags\t\t: fpu svm\n')
            self.assertTrue(topology.virtualization_flags(info))
            self.assertTrue(topology.virtualization_flags(Path(d) / 'none'))
            with mock.patch('platform.machine', return_value='x86_64'), \
                    mock.patch('os.access', return_value=True):
                info.write_text('flags\t\t: fpu sse2\n')
                self.assertFalse(topology.kvm_possible('x86_64', info))
                info.write_text('flags\t\t: fpu vmx\n')
                self.assertTrue(topology.kvm_possible('x86_64', info))
                self.assertFalse(topology.kvm_possible('aarch64', info))
        flags = Path('/proc/cpuinfo').read_text()
        mine = any(f in line.split() for line in flags.splitlines()
                   if line.startswith('flags') for f in ('vmx', 'svm'))
        self.assertEqual(topology.virtualization_flags(Path('/proc/cpuinfo')), mine)

    def test_stock_kunit_py_loads_every_config(self) -> None:
        """Each tools/qemu_configs/*.py works with an unmodified kunit.py."""
        tree = debian_tree('6.12')
        kunit_dir = str(tree.path / 'tools' / 'testing' / 'kunit')
        sys.path.insert(0, kunit_dir)
        self.addCleanup(sys.path.remove, kunit_dir)
        kunit_kernel = importlib.import_module('kunit_kernel')
        for name, topo in topology.TOPOLOGIES.items():
            with mock.patch.dict(os.environ, {'KLOC_CACHE': str(self.cache)}):
                arch, ops = kunit_kernel._get_qemu_ops(str(QEMU_CONFIGS / f'{name}.py'),
                                                       None, None)
            self.assertEqual(arch, topo.arch)
            params = ops._extra_qemu_params
            self.assertIn(f'node,nodeid={len(topo.nodes) - 1},cpus=2-3,memdev=m1'
                          if len(topo.nodes) == 2 else 'node,nodeid=0,cpus=0-1,memdev=m0',
                          params)
            if topo.arch == 'arm64':
                self.assertIn('-dtb', params)
                self.assertTrue(Path(params[params.index('-dtb') + 1]).is_file())
                self.assertIn('virt,gic-version=3,its=on', params)
            else:
                self.assertNotIn('-dtb', params)
