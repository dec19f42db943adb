# SPDX-License-Identifier: GPL-2.0
"""The docs that restate the code, checked against it: the targets of the Makefile,
make help and the README's table; the guest, compare and bench-aa defaults in the
README; the subpackages and modules docs/layout.md names."""

from __future__ import annotations

import os
import re
import subprocess
import unittest
from pathlib import Path

from kloc.bench.compare import default_topology
from kloc import cli, defaults

ROOT = Path(__file__).resolve().parents[2]
KLOC = ROOT / 'tools' / 'kloc'


def phony() -> set[str]:
    text = (ROOT / 'Makefile').read_text().replace('\\\n', ' ')
    m = re.search(r'^\.PHONY:(.*)$', text, re.MULTILINE)
    assert m, 'the Makefile has no .PHONY line'
    return set(m.group(1).split()) - {'help'}    # the listing itself


def make_help() -> set[str]:
    r = subprocess.run(['make', '-s', '-C', str(ROOT), 'help'], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, MAKEFLAGS=''))
    assert r.returncode == 0, r.stderr
    return set(re.findall(r'^  make ([\w-]+)', r.stdout, re.MULTILINE))


def readme_targets(readme: str) -> set[str]:
    table = readme.split('## Targets', 1)[1].split('\n\n', 2)[1]
    return set(re.findall(r'^\| `make ([\w-]+)`', table, re.MULTILINE))


class Targets(unittest.TestCase):
    def test_makefile_help_and_readme_name_the_same_targets(self) -> None:
        targets = phony()
        self.assertGreater(len(targets), 15)
        self.assertEqual(make_help(), targets, 'make help against the .PHONY targets')
        self.assertEqual(readme_targets((ROOT / 'README.md').read_text()), targets,
                         'README.md\'s targets table against the .PHONY targets')


class Defaults(unittest.TestCase):
    def test_the_makefile_repeats_no_default(self) -> None:
        """A variable the Makefile passes on is empty unless set, so kloc's default
        (defaults.py, the parser) applies; OUT and JOBS, which make itself uses, are
        the parser's and defaults.py's."""
        text = (ROOT / 'Makefile').read_text()
        given = dict(re.findall(r'^(\w+)\s*\?=[ \t]*(.*)$', text, re.MULTILINE))
        for o in defaults.OPTIONS:
            if o.make != 'JOBS':
                self.assertEqual(given.get(o.make, ''), '', o.make)
        for var in ('ARCH', 'ALLOC', 'TOPOLOGY', 'KERNEL', 'COUNTED', 'BENCH'):
            self.assertEqual(given.get(var, ''), '', var)
        self.assertEqual(given['OUT'], cli.parser().parse_args(['report']).out)
        self.assertEqual(given['JOBS'], '$(shell nproc)')
        self.assertEqual(defaults.BY_DEST['jobs'].default('kunit'), 'nproc')

    def test_guest_defaults_in_the_readme(self) -> None:
        """ARCH, ALLOC, TOPOLOGY: the README's row shows make guest's parsed defaults
        (TOPOLOGY: the arch's 2-node topology, for x86_64 and for arm64)."""
        args = cli.parser().parse_args(['guest'])
        arm = cli.parser().parse_args(['guest', '--arch', 'arm64'])
        row = f'| `ARCH`, `ALLOC`, `TOPOLOGY` | `{args.arch}`, `{args.alloc}`, ' \
              f'`{args.topology or default_topology(args.arch)}` (arm64: ' \
              f'`{arm.topology or default_topology(arm.arch)}`) |'
        self.assertIn(row, (ROOT / 'README.md').read_text())

    def test_bench_aa_defaults_in_the_readme(self) -> None:
        script = (ROOT / 'tools' / 'bench-aa.sh').read_text()
        shown = {'REPEATS': 'REPEATS', 'RUNS': 'AA_RUNS', 'SECONDS_': 'AA_SECONDS'}
        readme = (ROOT / 'README.md').read_text()
        for var, make in shown.items():
            m = re.search(rf'^{var}=\$\{{\w+:-(\d+)\}}$', script, re.MULTILINE)
            assert m, f'bench-aa.sh sets no default for {var}'
            self.assertIn(f'`{make}` ({m.group(1)})', readme, make)


class Layout(unittest.TestCase):
    """docs/layout.md names every subpackage of tools/kloc, and each module it names
    in parentheses exists in the subpackage it describes."""

    def setUp(self) -> None:
        text = (ROOT / 'docs' / 'layout.md').read_text()
        block = text.split('```', 2)[1]
        self.sections: dict[str, str] = {}
        name = ''
        for line in block.splitlines():
            m = re.match(r'^  (\w+)/\s', line)
            if m:
                name = m.group(1)
                self.sections[name] = line
            elif name and line.startswith(' ' * 10):
                self.sections[name] += ' ' + line.strip()
            else:
                name = ''

    def test_every_subpackage(self) -> None:
        packages = {p.parent.name for p in KLOC.glob('*/__init__.py')}
        self.assertEqual(set(self.sections), packages)

    def test_named_modules_exist(self) -> None:
        named = 0
        for package, text in self.sections.items():
            for group in re.findall(r'\(([a-z_, ]+)\)', text):
                for module in (m.strip() for m in group.split(',')):
                    named += 1
                    self.assertTrue((KLOC / package / f'{module}.py').is_file(),
                                    f'docs/layout.md names {package}/{module}.py')
        self.assertGreater(named, 20)


if __name__ == '__main__':
    unittest.main()
