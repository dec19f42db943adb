# SPDX-License-Identifier: GPL-2.0
"""The runner's own checks of what the kernel saw, and its KTAP extraction."""

from __future__ import annotations

import json
import re
import tempfile
import unittest
from pathlib import Path

from kloc.kunitpy import diagnostics, ktap, suites
from kloc.qemu import topology
from kloc.kunitpy.runner import (KunitError, check_topology, extract_ktap, load_run,
                                 suite_warnings)

from .helpers import DATA, stock_parser


def statuses(result: ktap.Result) -> dict[str, ktap.Status]:
    return {c.name: c.status for c in result.children}


class TopologyCheck(unittest.TestCase):
    def setUp(self) -> None:
        self.doc = ktap.parse((DATA / 'its-6.12-its1-pass.console').read_text(), stock_parser())

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
        line = '    # pcpu_kunit_first_chunk_on_nodes: kloc: online_nodes={} possible_cpus=4'
        for seen, want in ((2, ktap.Status.PASS), (1, ktap.Status.FAIL)):
            text = ('KTAP version 1\n1..1\n    KTAP version 1\n    # Subtest: percpu_locality\n'
                    '    1..1\n' + line.format(seen) + '\n'
                    '    ok 1 pcpu_kunit_first_chunk_on_nodes\nok 1 percpu_locality\n')
            r = check_topology(ktap.parse(text, stock_parser()), topology.get('x86_64_2n'))
            self.assertEqual(statuses(r)['online_nodes'], want, seen)
            self.assertNotIn('its_numa_node_from_dtb', statuses(r))

    def test_extract_ktap(self) -> None:
        text = extract_ktap((DATA / 'its-6.12-its1-pass.console').read_text())
        self.assertTrue(text.startswith('KTAP version 1\n'))
        self.assertEqual(extract_ktap('no results here\n'), '')


class BuildWarningTest(unittest.TestCase):
    # Real lines from the 6.12 and 6.1 arm64 KUnit builds, before the probing
    # cases were marked __init.
    LOG = ('  LD      vmlinux.o\n'
           'WARNING: modpost: vmlinux: section mismatch in reference: '
           'its_kunit_probe_fails_cleanly+0xb4 (section: .text) -> its_probe_one '
           '(section: .init.text)\n'
           'WARNING: modpost: vmlinux.o: section mismatch in reference: its_kunit_probe_new '
           '(section: .text.unlikely) -> its_setup_one (section: .init.text)\n'
           'WARNING: modpost: vmlinux: section mismatch in reference: some_driver_fn+0x10 '
           '(section: .text) -> other_init (section: .init.text)\n')

    def test_warnings_naming_a_suite_are_found(self) -> None:
        found = suite_warnings(self.LOG)
        self.assertEqual(len(found), 2)
        self.assertTrue(all('its_kunit_' in w for w in found))

    def test_a_clean_log_has_none(self) -> None:
        self.assertEqual(suite_warnings('  LD      vmlinux.o\n  OBJCOPY arch/arm64/boot/Image\n'),
                         [])


class DiagnosticsContract(unittest.TestCase):
    """The "kloc:" lines: the C suites print every key the runner reads, each
    marked as parsed in the source, and diagnostics.py reads them back."""

    def formats(self) -> list[tuple[str, str, str]]:
        """(file, the comment before it, the format string) of each kloc: line."""
        out = []
        for s in suites.SUITES:
            for c in sorted(s.path.glob('*.c')):
                text = c.read_text()
                for m in re.finditer(r'(/\*(?:(?!\*/).)*\*/)\s*kunit_info\(test, "(kloc: [^"]*)"',
                                     text, re.DOTALL):
                    out.append((c.name, m.group(1), m.group(2)))
        return out

    def test_every_key_is_printed_and_marked(self) -> None:
        found = self.formats()
        printed = {k for _, _, f in found for k in re.findall(r'(\w+)=', f)}
        self.assertLessEqual(set(diagnostics.KEYS), printed)
        for name, comment, fmt in found:
            self.assertIn('Parsed', comment, f'{name}: {fmt} is not marked as parsed')
        unmarked = [(s.dir, line) for s in suites.SUITES for c in s.path.glob('*.c')
                    for line in c.read_text().splitlines()
                    if '"kloc: ' in line and not line.lstrip().startswith(('*', '/*'))
                    and not any(fmt in line for _, _, fmt in found)]
        self.assertEqual(unmarked, [])

    def test_records_read_back(self) -> None:
        lines = ['    # its_kunit_boot_its_on_node: kloc: its_phys_base=0x0000000008080000 '
                 'its_numa_node=-1 online_nodes=2',
                 '    # x: no kloc here', 'kloc: broken']
        self.assertEqual(diagnostics.integers(lines, diagnostics.ITS_NUMA_NODE), [-1])
        self.assertEqual(diagnostics.integers(lines, diagnostics.ONLINE_NODES), [2])
        self.assertEqual(diagnostics.integers(lines, 'its_phys_base'), [])


class OlderRecords(unittest.TestCase):
    def test_a_record_without_its_parser_says_what_to_do(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            meta = Path(d) / 'arm64_1n.meta.json'
            meta.write_text(json.dumps({'kernel': 'linux-6.12.0', 'topology': 'arm64_1n',
                                        'seconds': 1.0, 'kunit_py_exit': 0}))
            with self.assertRaisesRegex(KunitError, 'run make kunit again'):
                load_run(meta)
