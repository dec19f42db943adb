# SPDX-License-Identifier: GPL-2.0
"""The suites: one declaration each, for the runner, the mutants and lint.

Adding a suite is one Suite(...) here plus its files: the change directory
listed in kunit/series, its .kunitconfig (KUnit) and its mutants/<X.Y>/.
A tool test checks that the declarations and the files agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kloc.paths import PACKAGE_ROOT


@dataclass(frozen=True, kw_only=True)
class Suite:
    name: str
    kind: str                       # 'kunit' or 'kselftest'
    arches: tuple[str, ...]         # the kernels that carry it
    dir: str                        # relative to the package
    changes: tuple[str, ...]        # its change directories, in kunit/series order
    lint_objects: tuple[str, ...]   # built with W=1 C=2 by make lint (arm64)
    mutant_topology: str            # where its mutants run
    symbol_prefix: str = ''         # of its C functions, for build-warning checks

    @property
    def path(self) -> Path:
        return PACKAGE_ROOT / self.dir

    @property
    def kunitconfig(self) -> Path | None:
        return self.path / '.kunitconfig' if self.kind == 'kunit' else None

    @property
    def mutants(self) -> Path:
        return self.path / 'mutants'

    @property
    def mutant_kind(self) -> str:
        """How its mutants are caught: by KUnit, or by the kselftest in a guest."""
        return 'kunit' if self.kind == 'kunit' else 'guest'


SUITES = (
    Suite(name='its', kind='kunit', arches=('arm64',), dir='kunit/its',
          changes=('kunit/its/0001-seam', 'kunit/its/0002-kunit'),
          lint_objects=('drivers/irqchip/irq-gic-v3-its.o',), mutant_topology='arm64_2n_its1',
          symbol_prefix='its_kunit_'),
    Suite(name='percpu', kind='kunit', arches=('arm64', 'x86_64'), dir='kunit/percpu',
          changes=('kunit/percpu/0001-kunit',), lint_objects=('mm/tests/percpu_locality_kunit.o',),
          mutant_topology='arm64_2n_its1', symbol_prefix='pcpu_kunit_'),
    Suite(name='lo_counters', kind='kselftest', arches=('arm64', 'x86_64'),
          dir='selftests/lo_counters', changes=('selftests/lo_counters/change',),
          lint_objects=(), mutant_topology='x86_64_2n'),
)


def kunitconfigs(arch: str) -> tuple[Path, ...]:
    """The .kunitconfig of every KUnit suite an arch's kernel carries."""
    return tuple(c for s in SUITES if s.kind == 'kunit' and arch in s.arches
                 for c in (s.kunitconfig,) if c is not None)


def lint_objects() -> tuple[str, ...]:
    return tuple(o for s in SUITES for o in s.lint_objects)


def mutant_topology(kind: str) -> str:
    """The topology the mutants of one kind run on (one per kind)."""
    return next(s.mutant_topology for s in SUITES if s.mutant_kind == kind)


def symbol_prefixes() -> tuple[str, ...]:
    """The prefixes of the KUnit suites' C functions."""
    return tuple(s.symbol_prefix for s in SUITES if s.symbol_prefix)
