# SPDX-License-Identifier: GPL-2.0
"""The supported kernels: one declaration each.

Each is a Debian linux-source package; its hook patches are the series'
<X.Y>.patch files, the greatest X.Y not above the kernel (tools/kloc/series/changes.py).
make test, lint, the tree cache, the command line and the Makefile help
all take their lists from here; deps.sh installs the packages of the
machine's own release, and a tool test checks that it says the same.
Mainline kernels come from another suite of the archive (suite=): they are
downloaded into the cache on first use, never installed
(tools/kloc/trees/archive.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from kloc.version import KernelVersion


# SLAB was deprecated in 6.5 and removed in 6.8 (SLUB alone since).
SLAB_REMOVED = KernelVersion(6, 8)


def has_slab(version: KernelVersion) -> bool:
    """Whether a kernel of this version still has the SLAB allocator."""
    return version < SLAB_REMOVED


@dataclass(frozen=True, kw_only=True)
class Kernel:
    series: str                 # '6.12': KERNEL=
    in_make_test: bool = True   # make test runs KUnit on it (KERNELS= adds the others)
    # the arches of the topologies make test runs it on (make kunit runs all)
    make_test_arches: tuple[str, ...] = ('arm64',)
    suite: str = ''             # Debian suite it comes from; '': installed by deps.sh

    @property
    def package(self) -> str:
        return f'linux-source-{self.series}'

    @property
    def version(self) -> KernelVersion:
        return KernelVersion.parse(self.series)

    @property
    def slab(self) -> bool:
        return has_slab(self.version)


# Newest first: make review's default is the first (patches are posted
# against mainline).
#
# make test runs KUnit on the default kernel alone, on its arm64 topologies,
# where both the ITS and the percpu suites run: each kernel is a 9 to 13 minute
# build cold, and with the default kernel's two guests the three arm64 KUnit
# kernels took make test to about 79 minutes cold (docs/measurements.md).
# make test KERNELS="7.2 6.12 6.1" runs the whole matrix, 7.2's known failures
# against their fix included; make kunit runs every topology of one kernel.
KERNELS = (
    Kernel(series='7.2', in_make_test=False, suite='sid'),   # mainline
    Kernel(series='6.12'),
    Kernel(series='6.1', in_make_test=False),
)
DEFAULT = '6.12'                # KERNEL= when none is given (make review: NEWEST)
NEWEST = KERNELS[0].series
OLDEST = KernelVersion(6, 1)    # KDIR trees must be at least this


def names() -> tuple[str, ...]:
    return tuple(k.series for k in KERNELS)


def get(series: str) -> Kernel | None:
    return next((k for k in KERNELS if k.series == series), None)


def with_slab() -> str:
    """The newest supported kernel that still has SLAB: make compare's default."""
    return next(k.series for k in KERNELS if k.slab)
