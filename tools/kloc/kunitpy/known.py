# SPDX-License-Identifier: GPL-2.0
"""Known upstream failures: cases a stock kernel fails because the kernel is wrong.

Each is written up (docs/) with a fix patch in `git format-patch` form,
and keyed by the kernel versions that carry it (from the release that
brought the bug, up to the one that fixed it, if any) and by its fix: a
tree that already has the fix (the fix reverse-applies, checked when its
kernel is built and recorded with each run) gets no excuse, whatever its
version. So a user's KDIR tree of any version in the range is explained,
and one with the fix is held to passing.

A run of a stock (Debian) tree must fail each of them where it is
declared to, and nothing else: an unexpected failure, or an unexpected
pass (the kernel may have the fix now: drop the entry), fails it. `make
known-failures` (tools/kloc/review/fixcheck.py) checks that each passes
with its fix.

A failing case is excused only when every expectation or assertion that
failed in it says what the entry's signature says: a known failure does
not hide a new one in the same case.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

from kloc.kunitpy.junit import KunitRun
from kloc.kunitpy.ktap import Result, Status
from kloc.paths import PACKAGE_ROOT
from kloc.version import KernelVersion, VersionError

_FAILED = re.compile(r'(?:EXPECTATION|ASSERTION) FAILED at ')
_BAD = (Status.FAIL, Status.CRASHED)


@dataclass(frozen=True, kw_only=True)
class KnownFailure:
    name: str
    since: str                      # the first release that carries it: '6.13'
    until: str = ''                 # the first release with its fix upstream; '': none yet
    cases: tuple[str, ...]          # fnmatch patterns of case paths (suite.case[.param])
    topologies: tuple[str, ...]     # where the stock kernel fails each pattern
    signature: str                  # a regex: what every failed check in the case says
    reason: str
    fix: str                        # the fix, relative to the package root
    doc: str                        # the write-up, relative to the package root

    def carried_by(self, version: KernelVersion) -> bool:
        """Whether a kernel of this version (without the fix) has the failure."""
        return KernelVersion.parse(self.since) <= version and \
            (not self.until or version < KernelVersion.parse(self.until))

    def range(self) -> str:
        return f'{self.since} to before {self.until}' if self.until else f'{self.since} on'

    def covers(self, version: KernelVersion, topology: str, path: str) -> bool:
        return (self.carried_by(version) and topology in self.topologies
                and any(fnmatch.fnmatchcase(path, c) for c in self.cases))

    def explains(self, leaf: Result) -> bool:
        """Whether every check that failed in the case is this failure."""
        failed = sum(1 for line in leaf.log if _FAILED.search(line))
        sig = re.compile(self.signature)
        matched = sum(1 for line in leaf.log if sig.search(line))
        return leaf.status == Status.FAIL and failed > 0 and matched == failed


# One bug, two entries: known.py holds one fix per entry, and the fix that uses
# its_alloc_pages_node() (6.13 on, b08e2f42e86b) does not apply before 6.13. The
# bug came with "irqchip/gic-v3-its: Move pending table allocation to init time"
# (the fixes' Fixes: tag), in 4.19; that commit id is not checked against mainline
# here (docs/mainline.md). Both entries judge the same case, the same way.
_PENDING_BACKPORT = KnownFailure(
    name='lpi-pending-tables-ignore-node',
    since='4.19',
    # not fixed upstream: 6.13 is where the mainline form of the fix begins to apply
    until='6.13',
    cases=('irq_gic_v3_its_placement.its_kunit_lpi_pending_tables_on_their_cpu_node',),
    # every two-node topology: the pending tables do not depend on the ITS's node
    topologies=('arm64_2n_its1', 'arm64_2n_its0', 'arm64_2n_itsnone'),
    # a pending table of a CPU, on another node than that CPU
    signature=r'LPI pending table of CPU \d+ page \d+ of \d+ \(pfn 0x[0-9a-f]+\) '
              r'is on node \d+, CPU \d+ on node \d+$',
    reason='allocate_lpi_tables() allocates every possible CPU\'s LPI pending table '
           'from the boot CPU with no node',
    fix='kunit/its/fixes/backport-6.1-6.12/'
        '0001-irqchip-gic-v3-its-Allocate-each-LPI-pending-table-o.patch',
    doc='docs/mainline.md')
_PENDING_613 = replace(
    _PENDING_BACKPORT, name='lpi-pending-tables-ignore-node-6.13', since='6.13', until='',
    reason=_PENDING_BACKPORT.reason + ' (its_alloc_pages())',
    fix='kunit/its/fixes/0001-irqchip-gic-v3-its-Allocate-each-LPI-pending-table-o.patch')


KNOWN: tuple[KnownFailure, ...] = (
    KnownFailure(
        name='itt-pool-ignores-node',
        # itt_alloc_pool() came with 6.13's ITS tables shared with a non-trusted
        # hypervisor (the fix's Fixes: tag); nothing upstream fixes it yet.
        since='6.13',
        # Only the case that creates devices on an ITS of each node in turn: it fails
        # whatever the pool holds. The per-node placement cases take two-page ITTs,
        # which no pool serves: their outcome no longer depends on which node's page
        # the boot or an earlier case left in the pool (issue 48).
        cases=('irq_gic_v3_its_placement.its_kunit_itts_on_their_its_node',),
        topologies=('arm64_2n_its1', 'arm64_2n_its0', 'arm64_2n_itsnone'),
        # ITTs smaller than a page (one page touched), on another node than their ITS
        signature=r'ITT .*page 1 of 1 \(pfn 0x[0-9a-f]+\) is on node \d+, '
                  r'the ITS on node \d+$',
        reason='itt_alloc_pool() takes ITTs smaller than a page from one gen_pool for '
               'every node, and gen_pool_alloc() ignores the node',
        fix='kunit/its/fixes/0001-irqchip-gic-v3-its-Allocate-small-ITTs-on-the-ITS-s-.patch',
        doc='docs/mainline.md'),
    _PENDING_BACKPORT,
    _PENDING_613,
)


def version_of(kernel_label: str) -> KernelVersion | None:
    """The version of a run's kernel label ('linux-7.2.13'); None if it is not one."""
    try:
        return KernelVersion.parse(kernel_label.removeprefix('linux-'))
    except VersionError:
        return None


def for_version(version: KernelVersion) -> list[KnownFailure]:
    """The known failures a kernel of this version carries, unless it has their fix."""
    return [k for k in KNOWN if k.carried_by(version)]


def for_kernel(series: str) -> list[KnownFailure]:
    """for_version() of a series such as '7.2'."""
    return for_version(KernelVersion.parse(series))


def carries_fix(k: KnownFailure, tree: Path) -> bool:
    """Whether the tree already has k's fix: the fix patch reverse-applies (GNU patch,
    --dry-run: nothing in the tree is written)."""
    r = subprocess.run(['patch', '-p1', '-R', '--dry-run', '--silent', '--force',
                        '-d', str(tree), '-i', str(PACKAGE_ROOT / k.fix)],
                       stdin=subprocess.DEVNULL, capture_output=True)
    return r.returncode == 0


def fixes_in(tree: Path, version: KernelVersion) -> tuple[str, ...]:
    """The names of the known failures of this version whose fix the tree has."""
    return tuple(k.name for k in for_version(version) if carries_fix(k, tree))


@dataclass
class Verdict:
    known: list[str] = field(default_factory=list)        # 'topology path (name)'
    unexpected: list[str] = field(default_factory=list)   # failures nothing explains
    # entries a stock (Debian) kernel no longer fails where declared
    fixed: list[str] = field(default_factory=list)
    # the same in other trees (KDIR, a review's patched tree): they may have the fix
    passing_elsewhere: list[str] = field(default_factory=list)
    # (kernel, topology, path) of each failing case a known failure explains: its name
    excused: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def excuse(self, run: KunitRun, path: str) -> str | None:
        """The name of the known failure that explains this case of the run, if any."""
        return self.excused.get((run.kernel, run.topology, path))

    @property
    def ok(self) -> bool:
        return not self.unexpected and not self.fixed


def excuse(run: KunitRun, path: str, leaf: Result,
           known: tuple[KnownFailure, ...] = KNOWN) -> KnownFailure | None:
    """The known failure that explains this failing case of the run, if any: none
    that the run's tree has the fix of."""
    version = version_of(run.kernel)
    if version is None:
        return None
    return next((k for k in known if k.name not in run.fixes
                 and k.covers(version, run.topology, path) and k.explains(leaf)), None)


def classify(runs: list[KunitRun], known: tuple[KnownFailure, ...] = KNOWN) -> Verdict:
    """Every failing case of the runs, known or not, and the entries that no longer fail."""
    v = Verdict()
    hit: set[tuple[str, str, str, str]] = set()   # (name, kernel, topology, pattern)
    for r in runs:
        for suite in r.doc.suites:
            for path, leaf in suite.leaves():
                if leaf.status not in _BAD:
                    continue
                k = excuse(r, path, leaf, known)
                if k is None:
                    v.unexpected.append(f'{r.kernel} {r.topology} {path}')
                    continue
                v.known.append(f'{r.kernel} {r.topology} {path} ({k.name})')
                v.excused[(r.kernel, r.topology, path)] = k.name
                hit.update((k.name, r.kernel, r.topology, c) for c in k.cases
                           if fnmatch.fnmatchcase(path, c))
    for r in runs:
        if not r.doc.found:
            continue
        version = version_of(r.kernel)
        for k in known:
            if version is None or not k.carried_by(version) or k.name in r.fixes \
                    or r.topology not in k.topologies:
                continue
            missing = [c for c in k.cases if (k.name, r.kernel, r.topology, c) not in hit]
            line = f'{k.name}: {r.kernel} {r.topology} passes {", ".join(missing)}'
            if missing:
                (v.fixed if r.origin == 'debian' else v.passing_elsewhere).append(line)
    return v
