# SPDX-License-Identifier: GPL-2.0
"""One revision, measured: its files written from git (checkout.py), the
package's series applied to kloc's copy of them (as for any KDIR), then its
arm64 KUnit kernel on the topologies asked, and its counted loopback boots
compared with each end's. A revision whose series does not apply, or whose
kernel does not build, is skipped for what it could not give, as git bisect
skip would; the reason is kept."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from kloc import paths, progress
from kloc.bench import counted as counted_runs
from kloc.bench import interleave, metrics
from kloc.bisect import checkout
from kloc.bisect.gitread import Repo
from kloc.errors import KlocError
from kloc.guests import guest
from kloc.kunitpy import runner
from kloc.qemu import topology
from kloc.review import review
from kloc.review.review import Excuses, Statuses
from kloc.trees import sources
from kloc.trees.sources import Tree


@dataclass(frozen=True)
class Settings:
    kdir: Path
    cache: Path
    out: Path               # OUT/bisect/<good>..<bad>
    topologies: tuple[str, ...]
    topology: str           # the counted loopback boots'
    counted: int            # boots a side; 0: no counted signals (BENCH=0)
    jobs: int
    timeout: int
    seconds: float
    alpha: float
    mde: float


@dataclass
class Measured:
    """What one revision gave: KUnit statuses per topology, the counted comparisons,
    and why a kind could not be measured."""
    sha: str
    statuses: Statuses = field(default_factory=dict)
    excuses: Excuses = field(default_factory=dict)
    kunit_dir: str = ''
    topologies: tuple[str, ...] = ()
    # 'vs_good' / 'vs_bad' -> figure -> verdict, and -> figure -> medians (medians())
    counted: dict[str, dict[str, str]] = field(default_factory=dict)
    figures: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)   # kind -> why
    attribution: str = ''   # the step's most contended lines (its comparison with GOOD)
    seconds: float = 0.0
    files: str = ''         # what checkout wrote


def src_dir(s: Settings, which: str) -> Path:
    """bisect's own copy of the KDIR's revisions: one for each end and one for steps."""
    key = hashlib.sha256(str(s.kdir.resolve()).encode()).hexdigest()[:12]
    return paths.cache_subdir(s.cache, 'bisect', key) / which


def materialize(repo: Repo, sha: str, s: Settings, which: str,
                m: Measured) -> Tree | None:
    """sha's files in src_dir(which), and kloc's copy of them with the series; None
    (every kind skipped, saying why) where the series does not apply."""
    src = src_dir(s, which)
    moved = checkout.checkout(repo, sha, src)
    files = ('as before' if not moved.written and not moved.removed and not moved.full
             else f'{moved.written:,} files written' + (' (a whole checkout)' if moved.full
                                                        else '')
             + (f', {moved.removed:,} removed' if moved.removed else '')
             + f' in {moved.seconds:.0f} s')
    m.files = '; '.join(x for x in (m.files, f'{which}: {files}') if x)
    try:
        return sources.user_tree(str(src), s.cache)
    except KlocError as e:
        why = f'the package\'s series does not apply: {e}'
        m.skipped = {'kunit': why, 'counted': why}
        return None


def kunit(tree: Tree, s: Settings, topologies: tuple[str, ...], out: Path,
          m: Measured) -> None:
    """KUnit on topologies, into m (skipped, saying why, where the kernel does not
    build). The runs are read as soon as they end, with the revision's own kunit.py."""
    try:
        runner.run(runner.Job(tree, out, topologies, s.jobs, s.timeout, s.cache,
                              parser=tree))
    except KlocError as e:
        m.skipped['kunit'] = str(e).splitlines()[0]
        return
    m.statuses, m.excuses = review.read_runs(out, tree)
    m.kunit_dir = str(out)
    m.topologies = topologies


def counted_ab(a: tuple[str, Tree], b: tuple[str, Tree], s: Settings,
               out: Path) -> counted_runs.CountedResult:
    """The counted loopback boots of b against a, as make review boots them (the store
    of counted boots hands on every boot counted before, after one check)."""
    topo = topology.get(s.topology)
    ga = guest.Guest(a[1], topo.arch, review.ALLOCATOR)
    gb = guest.Guest(b[1], topo.arch, review.ALLOCATOR)
    plan = interleave.prepare((a[0], ga), (b[0], gb), topo, s.seconds, 2, s.timeout, out,
                              {'bisect': f'{a[0]} {b[0]}'}, ('config_base', 'config_patched'))
    plan = counted_runs.with_plugin(plan, s.counted, s.jobs)
    return counted_runs.run(plan, s.alpha, s.mde)


def medians(diffs: list[metrics.Difference]) -> dict[str, dict[str, float]]:
    """Each figure: each side's median and its interval, and the change, b against a."""
    return {d.figure.name: {'a': d.a.median, 'a_lo': d.a.ci.lo, 'a_hi': d.a.ci.hi,
                            'b': d.b.median, 'b_lo': d.b.ci.lo, 'b_hi': d.b.ci.hi,
                            'level': d.a.ci.level, 'change_pct': d.change_pct,
                            'change_lo': d.change_ci.lo, 'change_hi': d.change_ci.hi}
            for d in diffs}


def counted_step(step: Tree, good: Tree, bad: Tree, s: Settings, out: Path,
                 m: Measured) -> dict[str, counted_runs.CountedResult]:
    """The step's counted boots against both ends' (skipped, saying why, where a guest
    does not build or a boot fails)."""
    results = {}
    try:
        results['vs_good'] = counted_ab(('good', good), ('step', step), s, out / 'vs-good')
        results['vs_bad'] = counted_ab(('step', step), ('bad', bad), s, out / 'vs-bad')
    except KlocError as e:
        m.skipped['counted'] = str(e).splitlines()[0]
        return {}
    for k, r in results.items():
        m.counted[k] = {d.figure.name: d.verdict for d in r.diffs}
        m.figures[k] = medians(r.diffs)
    m.attribution = results['vs_good'].attribution.get('step', '')
    return results


def timed(m: Measured, start: float) -> Measured:
    m.seconds = time.monotonic() - start
    progress.say(f'{m.sha[:12]}: measured in {m.seconds:.0f} s'
                 + ''.join(f'; {k} skipped: {v}' for k, v in m.skipped.items()))
    return m
