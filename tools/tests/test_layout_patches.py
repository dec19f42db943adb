# SPDX-License-Identifier: GPL-2.0
"""make bench-aa's layout-only patches (bench/layout.py) and what a review records of a
layout (symbols.moved): each patch applies to the default kernel's tree, adds at a
top-level place outside every #if, and no two of the first rotation share a spot."""

from __future__ import annotations

import subprocess
import tempfile
import unittest
from pathlib import Path

from kloc.bench import layout
from kloc.counting import symbols
from kloc.paths import cache_dir
from kloc.trees import kernels
from kloc.trees.sources import resolve


class Places(unittest.TestCase):
    def test_outside_ifs_and_definitions(self) -> None:
        text = ['int a(void)\n', '{\n', '}\n', '\n',
                '#ifdef CONFIG_X\n', 'int b(void)\n', '{\n', '}\n', '\n', '#endif\n',
                'static const struct s c = {\n', '};\n', '\n', 'int d;\n', '}\n']
        self.assertEqual(layout.places(text), [3, 12])

    def test_an_addition_is_distinct_and_kept(self) -> None:
        added = ''.join(layout.addition(7))
        self.assertIn('static noinline __used int kloc_aa_layout_7(int x)', added)
        self.assertIn('kloc_aa_layout_7_data[64] __used', added)
        self.assertIn('kloc_aa_layout_7_rodata[64] __used', added)
        self.assertNotEqual(added, ''.join(layout.addition(8)))

    def test_refusals(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(layout.LayoutError, 'give 0 or more'):
                layout.make(Path(d), -1)
            with self.assertRaisesRegex(layout.LayoutError, 'cannot read it'):
                layout.make(Path(d), 0)
            f = Path(d) / layout.FILES[0]
            f.parent.mkdir(parents=True)
            f.write_text('#if 1\nint a(void)\n{\n}\n\n#endif\n')
            with self.assertRaisesRegex(layout.LayoutError, 'no top-level place'):
                layout.make(Path(d), 0)


class OnTheTree(unittest.TestCase):
    def test_each_patch_of_a_rotation_applies_at_its_own_spot(self) -> None:
        tree = resolve(kernels.DEFAULT, '', cache_dir()).path
        spots = set()
        for i in range(len(layout.FILES) * layout.PLACES):
            p = layout.make(tree, i)
            spots.add((p.file, p.line))
            r = subprocess.run(['git', 'apply', '--check', '-'], input=p.text, text=True,
                               cwd=tree, capture_output=True)
            self.assertEqual(r.returncode, 0, f'patch {i}: {r.stderr}')
        self.assertEqual(len(spots), len(layout.FILES) * layout.PLACES)


class Moved(unittest.TestCase):
    def test_moved_added_removed_and_names_defined_twice(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            a, b = Path(d) / 'a.map', Path(d) / 'b.map'
            a.write_text('ffff0010 T f\nffff0020 T g\nffff0030 t dup\nffff0040 t dup\n'
                         'ffff0050 D gone\n')
            b.write_text('ffff0010 T f\nffff0060 T g\nffff0070 t dup\nffff0040 t dup\n'
                         'ffff0080 d kloc_aa_layout_0_data\n')
            m = symbols.moved(a, b)
        self.assertEqual(m.to_json(), {'common': 2, 'moved': 1, 'added': 1, 'removed': 1})

    def test_no_map(self) -> None:
        with self.assertRaisesRegex(Exception, 'no System.map'):
            symbols.moved(Path('/nonexistent/a'), Path('/nonexistent/b'))


if __name__ == '__main__':
    unittest.main()
