# SPDX-License-Identifier: GPL-2.0
"""The runner's own checks of what the kernel saw, and its KTAP extraction."""

from __future__ import annotations

import unittest

from kloc.kunit import ktap
from kloc.qemu import topology
from kloc.kunit.runner import check_topology, extract_ktap

from .helpers import DATA


def statuses(result: ktap.Result) -> dict[str, ktap.Status]:
    return {c.name: c.status for c in result.children}


class TopologyCheck(unittest.TestCase):
    def setUp(self) -> None:
        self.doc = ktap.parse((DATA / 'its-6.12-its1-pass.console').read_text())

    def test_its_node_matches_the_dtb(self) -> None:
        r = check_topology(self.doc, topology.get('arm64_2n_its1'))
        self.assertEqual(statuses(r)['its_numa_node_from_dtb'], ktap.Status.PASS)
        self.assertEqual(r.status, ktap.Status.PASS)

    def test_its_node_mismatch_fails(self) -> None:
        for name in ('arm64_2n_its0', 'arm64_2n_itsnone'):
            r = check_topology(self.doc, topology.get(name))
            self.assertEqual(statuses(r)['its_numa_node_from_dtb'], ktap.Status.FAIL, name)
            self.assertEqual(r.status, ktap.Status.FAIL, name)

    def test_node_count(self) -> None:
        line = '    # pcpu_kunit_first_chunk_on_nodes: first chunk: embed allocator, ' \
               'unit stride 57344 bytes, 4 possible CPUs, {} online nodes'
        for seen, want in ((2, ktap.Status.PASS), (1, ktap.Status.FAIL)):
            text = ('KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: percpu_locality\n'
                    '    1..1\n' + line.format(seen) + '\n'
                    '    ok 1 pcpu_kunit_first_chunk_on_nodes\nok 1 percpu_locality\n')
            r = check_topology(ktap.parse(text), topology.get('x86_64_2n'))
            self.assertEqual(statuses(r)['online_nodes'], want, seen)
            self.assertNotIn('its_numa_node_from_dtb', statuses(r))

    def test_extract_ktap(self) -> None:
        text = extract_ktap((DATA / 'its-6.12-its1-pass.console').read_text())
        self.assertTrue(text.startswith('KTAP version 1\n'))
        self.assertEqual(extract_ktap('no results here\n'), '')
