# SPDX-License-Identifier: GPL-2.0
"""The supported kernels: one declaration each.

Each is a Debian linux-source package; its hook patches are the series'
<X.Y>.patch files, the greatest X.Y not above the kernel (tools/kloc/series/changes.py).
make test, lint, the tree cache, the command line and the Makefile help
all take their lists from here; deps.sh lists the packages, and a tool
test checks that it says the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from kloc.version import KernelVersion


@dataclass(frozen=True)
class Kernel:
    series: str                 # '6.12': KERNEL=
    slab: bool                  # the SLAB allocator exists (gone in 6.8)
    in_make_test: bool = True   # make test runs KUnit on it
    # the arches of the topologies make test runs it on (make kunit runs all)
    make_test_arches: tuple[str, ...] = ('arm64', 'x86_64')

    @property
    def package(self) -> str:
        return f'linux-source-{self.series}'

    @property
    def version(self) -> KernelVersion:
        return KernelVersion.parse(self.series)


KERNELS = (
    Kernel('6.12', slab=False),
    # 6.1's x86_64 KUnit kernel runs the percpu suites only, which its arm64
    # topologies run too, and takes 9 minutes to build cold: make test leaves
    # it to make kunit KERNEL=6.1, to stay within its hour.
    Kernel('6.1', slab=True, make_test_arches=('arm64',)),
)
DEFAULT = '6.12'                # KERNEL= when none is given
OLDEST = KernelVersion(6, 1)    # KDIR trees must be at least this


def names() -> tuple[str, ...]:
    return tuple(k.series for k in KERNELS)


def get(series: str) -> Kernel | None:
    return next((k for k in KERNELS if k.series == series), None)


def with_slab() -> str:
    """The newest supported kernel that still has SLAB: make compare's default."""
    return next(k.series for k in KERNELS if k.slab)
