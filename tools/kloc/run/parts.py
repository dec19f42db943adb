# SPDX-License-Identifier: GPL-2.0
"""The parts of make run, each the command a user would type for it alone, and how
its verdict is read back from what that command wrote.

- kunit: every suite on every topology of KERNEL (make kunit);
- mutants: each must be caught (make mutants);
- kselftest: the loopback kselftest on this machine's kernel (make kselftest);
- compare: SLUB against SLAB, always on Debian's 6.1, the newest kernel with SLAB,
  counted, at make compare's defaults (make compare KERNEL=6.1);
- its: the MSI workload in KERNEL's arm64 guest on each ITS topology, the ITS's table
  reads per interrupt (make guest ARCH=arm64 TOPOLOGY=...).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kloc.errors import KlocError
from kloc.guests import its_boot
from kloc.qemu import topology
from kloc.run import results
from kloc.trees import kernels


class RunError(KlocError):
    """make run's own files are not what it wrote."""


@dataclass(frozen=True)
class Part:
    name: str
    title: str
    argv: tuple[str, ...]           # after 'python3 -m kloc', or a script under tools/
    make: str                       # the command that reproduces it alone
    details: str                    # where its results are, relative to OUT
    verdict: Callable[[Path, str], str]     # (OUT, its output) -> one line
    script: bool = False            # argv[0] is a script in tools/, not a kloc command


@dataclass(frozen=True)
class Where:
    """The tree options of the run: KERNEL= or KDIR=, as given."""
    kernel: str
    kdir: str
    jobs: int
    timeout: int | None
    topologies: tuple[str, ...]

    def tree(self) -> tuple[str, ...]:
        return ('--kdir', self.kdir) if self.kdir else ('--kernel', self.kernel)

    def make_tree(self) -> str:
        return f'KDIR={self.kdir}' if self.kdir else f'KERNEL={self.kernel}'

    def common(self) -> tuple[str, ...]:
        timeout = ('--timeout', str(self.timeout)) if self.timeout else ()
        return ('--jobs', str(self.jobs)) + timeout


def _last(pattern: str) -> Callable[[Path, str], str]:
    """The last line of the output that matches pattern."""
    rx = re.compile(pattern)

    def read(out: Path, text: str) -> str:
        lines = [line for line in text.splitlines() if rx.search(line)]
        return lines[-1].strip() if lines else '(no verdict in its output)'
    return read


def _kselftest(out: Path, text: str) -> str:
    lines = [line for line in text.splitlines()
             if re.match(r'(not )?ok \d+ selftests: lo_counters', line)]
    return lines[-1] if lines else '(no result line: see the log)'


def _compare(out: Path, text: str) -> str:
    doc = results.compare(out)
    if doc is None:
        return '(no compare.json)'
    counted = doc.get('counted') or {}
    figures = counted.get('figures', []) if isinstance(counted, dict) else []
    moved = [f"{f['title']} {f['change_pct']:+.2f}%" if f.get('change_pct') is not None
             else f"{f['title']} {f['change_abs']['change_of_means']:+.3g}/packet"
             for f in figures
             if f.get('primary') and str(f.get('verdict', '')).startswith('slab ')]
    return f"{doc.get('verdict', '')}" + (f' ({"; ".join(moved)})' if moved else '')


def its_topologies(where: Where) -> tuple[str, ...]:
    """The ITS topologies of the run (TOPOLOGIES=, else every one kloc has)."""
    names = where.topologies or tuple(topology.TOPOLOGIES)
    return tuple(t.name for t in its_boot.topologies(names))


def _its(name: str) -> Callable[[Path, str], str]:
    """The ITS's remote table reads per interrupt on topology name, from the newest
    its-<name>.json make guest wrote."""
    def read(out: Path, text: str) -> str:
        doc: dict[str, Any] = next((i['figures'] for i in results.its(out)
                                    if i['topology'] == name), {})
        mean = doc.get('remote_per_interrupt_mean')
        if not isinstance(mean, (int, float)) or isinstance(mean, bool):
            return '(no ITS figures)'
        boots = doc.get('boots')
        n = len(boots) if isinstance(boots, list) else 0
        return (f'{mean:.3g} remote ITS table reads per interrupt (modelled cost: see the '
                f'log), {n} boots' + (', alike' if doc.get('agree') else ', which differ'))
    return read


def plan(where: Where) -> list[Part]:
    tree, mt = where.tree(), where.make_tree()
    topo = ('--topologies', ','.join(where.topologies)) if where.topologies else ()
    slab = kernels.with_slab()
    out = [
        Part('kunit', 'KUnit, every suite on every topology',
             ('kunit', *tree, *where.common(), *topo), f'make kunit {mt}', 'kunit/',
             _last(r'^(PASS|FAIL): ')),
        Part('mutants', 'mutants, each must be caught', ('mutants', *tree, *where.common()),
             f'make mutants {mt}', 'mutants/', _last(r'^(PASS|FAIL): ')),
        Part('kselftest', 'the loopback kselftest on this machine',
             ('kselftest-host.sh',), f'make kselftest {mt}', 'kselftest/', _kselftest,
             script=True),
        Part('compare', f'SLUB against SLAB on {slab}, counted (make compare\'s defaults)',
             ('compare', '--kernel', slab), f'make compare KERNEL={slab}',
             f'compare/linux-{slab}.*-x86_64-slub-slab/', _compare),
    ]
    for t in its_topologies(where):
        out.append(Part(f'its-{t}', f'the ITS interrupt path on {t}',
                        ('guest', *tree, '--arch', 'arm64', '--topology', t),
                        f'make guest {mt} ARCH=arm64 TOPOLOGY={t}',
                        f'guest/<tree>-arm64-slub/its-{t}.json', _its(t)))
    return out
