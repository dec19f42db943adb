# SPDX-License-Identifier: GPL-2.0
"""make bench-plugin-cost's table: the ratios it prints are of the right boots, and
cache.c is configured as kloc-count models (its geometry, a core per vCPU)."""

from __future__ import annotations

import unittest
from pathlib import Path

from kloc.bench import plugin_cost
from kloc.bench.plugin_cost import Boot
from kloc.qemu import topology


class TableTest(unittest.TestCase):
    def test_ratios_are_to_the_icount_and_the_timed_boots(self) -> None:
        seconds = {'timed': (8.0, 10.0), 'icount': (12.0, 12.0), 'kloc-count': (27.0, 29.0),
                   'cache.c': (35.0, 37.0)}
        boots = [Boot(k, seed, s[seed - 1], 300.0 + seed) for seed in (1, 2)
                 for k, s in seconds.items()]
        text = plugin_cost.table(boots)
        row = {line.split()[0]: line.split() for line in text.splitlines()[1:5]}
        self.assertEqual(row['kloc-count'][2:6], ['28.0', '1.4', '2.33x', '3.11x'])
        self.assertEqual(row['cache.c'][4:7], ['3.00x', '4.00x', '302'])
        self.assertEqual(row['timed'][4:6], ['0.75x', '1.00x'])
        self.assertRegex(text, r'kloc-count / cache\.c: 0\.78x the wall time')

    def test_cache_c_is_configured_as_kloc_count_models(self) -> None:
        vcpus = topology.get(plugin_cost.TOPOLOGY).cpus
        args = dict(a.split('=') for a in plugin_cost.cache_c_args(vcpus))
        self.assertEqual(args, {'dcachesize': str(1 << 20), 'dassoc': '16', 'dblksize': '64',
                                'evict': 'lru', 'cores': str(vcpus)})
        src = (Path(__file__).resolve().parents[1] / 'qemu-plugin' /
               'kloc-count.c').read_text()
        self.assertIn('.cache_bytes = 1U << 20,', src)
        self.assertIn('.assoc = 16,', src)
        self.assertIn('.line_bytes = 64,', src)


if __name__ == '__main__':
    unittest.main()
