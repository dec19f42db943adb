# SPDX-License-Identifier: GPL-2.0
"""tools/kloc's import graph: no cycles, and no arrow from a lower layer to a higher one."""

from __future__ import annotations

import ast
import sys
import unittest
from pathlib import Path

KLOC = Path(__file__).resolve().parents[1] / 'kloc'

# Each subpackage's layer; a module may import from its own layer or lower ones.
FOUNDATION = ('errors', 'paths', 'progress', 'atomicfile', 'filelock', 'defaults', 'procs',
              'version', 'digest')
LAYERS = {'series': 1, 'trees': 2, 'qemu': 3, 'counting': 3, 'its': 3, 'kunitpy': 4, 'guests': 5,
          'bench': 6, 'kcidb': 7, 'pages': 7, 'review': 8, 'mutants': 8, 'lava': 8, 'run': 8,
          # make bisect measures each revision as a review does
          'bisect': 9, 'cli': 10, '__main__': 10}
# The commands' layer: its subpackages may not import each other either.
SIBLINGS = 8


def module_name(path: Path) -> str:
    rel = path.relative_to(KLOC.parent).with_suffix('')
    parts = list(rel.parts)
    if parts[-1] == '__init__':
        parts.pop()
    return '.'.join(parts)


def layer(module: str) -> int:
    parts = module.split('.')
    top = parts[1] if len(parts) > 1 else ''
    if top in FOUNDATION or top == '':
        return 0
    return LAYERS[top]


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith('kloc'):
            for alias in node.names:
                full = f'{node.module}.{alias.name}'
                out.add(full if (KLOC.parent / full.replace('.', '/')).with_suffix('.py')
                        .exists() else node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            raise AssertionError(f'{path}: relative import; kloc uses absolute imports')
    return out


class LayoutTest(unittest.TestCase):
    def setUp(self) -> None:
        self.graph = {module_name(p): imports(p) for p in KLOC.rglob('*.py')}

    def test_every_subpackage_has_a_layer(self) -> None:
        for m in self.graph:
            layer(m)

    def test_no_upward_arrows(self) -> None:
        for m, deps in sorted(self.graph.items()):
            for d in sorted(deps):
                if d.split('.')[1:2] == m.split('.')[1:2]:
                    continue
                self.assertLessEqual(layer(d), layer(m) if layer(m) != SIBLINGS or
                                     layer(d) != SIBLINGS else -1,
                                     f'{m} imports {d}, a higher (or sibling) layer')

    def test_no_cycles(self) -> None:
        state: dict[str, int] = {}

        def visit(m: str, path: list[str]) -> None:
            if state.get(m) == 1:
                self.fail('import cycle: ' + ' -> '.join(path + [m]))
            if state.get(m) == 2:
                return
            state[m] = 1
            for d in sorted(self.graph.get(m, ())):
                if d in self.graph:
                    visit(d, path + [m])
            state[m] = 2
        for m in sorted(self.graph):
            visit(m, [])


def picture() -> str:
    """Each subpackage (layer) and the subpackages its modules import: the picture
    the layers keep. `python3 -m tests.test_layout --picture` prints it."""
    graph = {module_name(p): imports(p) for p in KLOC.rglob('*.py')}
    tops: dict[str, set[str]] = {}
    for m, deps in graph.items():
        top = m.split('.')[1] if '.' in m else 'kloc'
        tops.setdefault(top, set()).update(
            d.split('.')[1] for d in deps if '.' in d and d.split('.')[1] != top)
    tops.pop('kloc', None)

    def rank(item: tuple[str, set[str]]) -> tuple[int, str]:
        return layer('kloc.' + item[0]), item[0]
    return '\n'.join(f'{t} ({layer("kloc." + t)}) -> {", ".join(sorted(ds)) or "-"}'
                     for t, ds in sorted(tops.items(), key=rank))


if __name__ == '__main__':
    if sys.argv[1:] == ['--picture']:
        print(picture())
    else:
        unittest.main()
