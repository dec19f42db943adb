# SPDX-License-Identifier: GPL-2.0
"""The registries (kernels, arches, suites, topologies, defaults) agree with the files."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import unittest

from kloc import cli, defaults
from kloc.cli import handlers
from kloc.bench import compare
from kloc.kunitpy import known, suites
from kloc.mutants import mutants
from kloc.qemu import arches, topology
from kloc.series import changes
from kloc.trees import archive, kernels
from kloc.paths import PACKAGE_ROOT
from kloc.version import KernelVersion

DEPS = (PACKAGE_ROOT / 'tools' / 'deps.sh').read_text()
SERIES_LIST = [ln.strip() for ln in (PACKAGE_ROOT / 'kunit' / 'series').read_text().splitlines()
               if ln.strip() and not ln.startswith('#')]


def deps_packages() -> set[str]:
    """What tools/deps.sh checks: its own list and what kloc registry deps says."""
    r = subprocess.run(['/bin/bash', '-c', 'source <(sed -n "/^DEPS=(/,/^)/p" "$1"); '
                        'printf "%s\\n" "${DEPS[@]}"', '-', str(PACKAGE_ROOT / 'tools/deps.sh')],
                       capture_output=True, text=True, check=True)
    listed = {line.split()[0] for line in r.stdout.splitlines() if line.strip()}
    return listed | {line.split()[0] for line in handlers.deps_lines().splitlines()}


class KeywordsTest(unittest.TestCase):
    """Every registry entry, and every options record, is built by keyword: a
    positional one is refused by the class itself."""

    def test_keyword_only(self) -> None:
        for cls in (arches.Arch, suites.Suite, topology.Topology, topology.Node,
                    defaults.Option, kernels.Kernel, known.KnownFailure,
                    compare.CompareOptions, cli.Command):
            with self.subTest(cls=cls.__name__):
                fields = dataclasses.fields(cls)
                self.assertTrue(fields and all(f.kw_only for f in fields))
                with self.assertRaises(TypeError):
                    cls(*(None for _ in fields))


class KernelsTest(unittest.TestCase):
    def test_each_kernel_has_its_package_and_hooks(self) -> None:
        series_changes = changes.load_series()
        for k in kernels.KERNELS:
            with self.subTest(kernel=k.series):
                if k.suite:     # fetched into the cache from another suite, not installed
                    self.assertNotIn(k.package, deps_packages())
                    self.assertIn(k.suite, archive.SUITES)
                else:
                    self.assertIn(k.package, deps_packages(),
                                  f'tools/deps.sh lacks {k.package}')
                for c in series_changes:
                    if c.patches:
                        self.assertIsNotNone(c.patch_for(k.version), c.name)
        self.assertIn(kernels.DEFAULT, kernels.names())
        # make review's default: the newest declared kernel
        self.assertEqual(kernels.NEWEST, max(k.version for k in kernels.KERNELS).series)
        self.assertTrue(any(k.slab for k in kernels.KERNELS), 'make compare needs SLAB')

    def test_deps_sh_repeats_no_registry_fact(self) -> None:
        """deps.sh asks kloc registry deps for the kernels' and arches' packages: its
        own list names none of them again."""
        own = set(re.findall(r'^\t"([\w.+:-]+) ', DEPS, re.MULTILINE))
        registry = {line.split()[0] for line in handlers.deps_lines().splitlines()}
        self.assertFalse(own & registry, f'tools/deps.sh repeats {sorted(own & registry)}')
        self.assertIn('kloc registry deps', DEPS)

    def test_deps_lists_no_other_kernel(self) -> None:
        listed = {p for p in deps_packages() if p.startswith('linux-source-')}
        self.assertEqual(listed, {k.package for k in kernels.KERNELS if not k.suite})

    def test_known_failures_are_of_declared_kernels(self) -> None:
        for k in known.KNOWN:
            with self.subTest(entry=k.name):
                since = KernelVersion.parse(k.since)
                if k.until:
                    self.assertLess(since, KernelVersion.parse(k.until))
                # a declared kernel carries it: make known-failures can check its fix
                self.assertTrue(any(k.carried_by(kernel.version) for kernel in
                                    kernels.KERNELS), k.range())
                for t in k.topologies:
                    topology.get(t)


class ArchesTest(unittest.TestCase):
    def test_packages_for_every_arch(self) -> None:
        for a in arches.ARCHES.values():
            with self.subTest(arch=a.name):
                self.assertIn(a.qemu_package, deps_packages())
                if a.cross_prefix():
                    self.assertIn(a.cross_package, deps_packages())

    def test_cross_prefix_on_every_host(self) -> None:
        # guest builds once cross-compiled only on x86_64 hosts: an x86_64
        # guest on an arm64 host was built with the arm64 gcc.
        self.assertEqual(arches.get('x86_64').cross_prefix('aarch64'), 'x86_64-linux-gnu-')
        self.assertEqual(arches.get('arm64').cross_prefix('x86_64'), 'aarch64-linux-gnu-')
        self.assertEqual(arches.get('arm64').cross_prefix('aarch64'), '')
        self.assertEqual(arches.get('x86_64').cross_prefix('x86_64'), '')

    def test_every_topology_has_a_known_arch(self) -> None:
        for t in topology.TOPOLOGIES.values():
            self.assertIn(t.arch, arches.ARCHES, t.name)


class SuitesTest(unittest.TestCase):
    def test_series_lists_exactly_the_suites_changes(self) -> None:
        declared = [c for s in suites.SUITES for c in s.changes]
        self.assertEqual(SERIES_LIST, declared,
                         'kunit/series and tools/kloc/kunitpy/suites.py disagree')

    def test_files_of_each_suite(self) -> None:
        for s in suites.SUITES:
            with self.subTest(suite=s.name):
                self.assertTrue(s.path.is_dir())
                if s.kind == 'kunit':
                    assert s.kunitconfig is not None
                    self.assertTrue(s.kunitconfig.is_file(), s.kunitconfig)
                for a in s.arches:
                    self.assertIn(a, arches.ARCHES)
                topo = topology.get(s.mutant_topology)
                self.assertIn(topo.arch, s.arches)

    def test_lint_objects_are_the_series_sources(self) -> None:
        series_changes = changes.load_series()
        touched = set()
        for c in series_changes:
            for k in kernels.KERNELS:
                p = c.patch_for(k.version)
                if p is not None:
                    touched |= set(re.findall(r'^\+\+\+ b/(\S+)', p.read_text(), re.MULTILINE))
            touched |= {a.dst for a in c.additions}
        for obj in suites.lint_objects():
            self.assertIn(obj.removesuffix('.o') + '.c', touched, obj)

    def test_mutants_of_every_kernel_belong_to_a_suite(self) -> None:
        dirs = {p.parent.parent for p in PACKAGE_ROOT.glob('*/*/mutants/*/*.patch')}
        self.assertEqual(dirs, {s.mutants for s in suites.SUITES if s.mutants.is_dir()})
        for k in kernels.KERNELS:
            for m in mutants.load(k.version):
                self.assertIn(m.kind, ('kunit', 'guest'))


if __name__ == '__main__':
    unittest.main()
