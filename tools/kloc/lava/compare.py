# SPDX-License-Identifier: GPL-2.0
"""LAVA's results against direct runs of the same kernels.

- KUnit: the statuses of every case of a LAVA job against make kunit's run
  of the same kernel on the same topology (OUT/kunit/<kernel>/), which must
  be the same build: the consoles' "Linux version" banners are compared.
- The kselftest: the statuses against those of direct boots of the same
  guest kernel and initramfs (guests/guest.py's run, QEMU started by kloc),
  and each primary packets/s figure against their spread: whether it lies
  in the direct boots' range widened by that range's width on each side
  (at least 10% of their median), since a single LAVA run is one more draw.
  A timed figure is reported, never a pass or a failure: one TCG run on a
  shared host can fall anywhere (1-thread packets/s from 18k to 47k within
  one review), and a test with a timing threshold fails by chance.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from kloc import progress
from kloc.digest import sha256_file
from kloc.bench import metrics
from kloc.guests import guest
from kloc.kunitpy import ktap, runner
from kloc.lava import results
from kloc.qemu import topology

# The figures a LAVA run must match a direct one in (the primary timed ones with a unit).
FIGURES = ('pps_single', 'pps_total')
MIN_WIDTH = 0.10        # of the median: the least widening of the direct runs' range
_TAP = re.compile(r'^(not ok|ok) \d+ (?:- )?(.*?)(?:\s+#\s*(SKIP)\b.*)?\s*$')
_EXIT = re.compile(r'KLOC-RESULT-END (\d+)')
KSFT_EXIT = {'0': 'PASS', '4': 'SKIP'}


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    detail: str
    gating: bool = True     # False: reported (a timed figure), never a failure


def leaf_statuses(doc: ktap.Document) -> dict[str, str]:
    return {path: leaf.status.value for s in doc.suites for path, leaf in s.leaves()}


def kunit(lava: results.LavaKunit, direct_dir: Path) -> Check:
    topo = lava.run.topology
    what = f'KUnit {lava.run.kernel} {topo}'
    meta = direct_dir / f'{topo}.meta.json'
    if not meta.is_file():
        return Check(what, False, f'no direct run ({meta} is missing: make kunit writes it)')
    direct = runner.load_run(meta)
    console = meta.with_name(f'{topo}.console').read_text(errors='replace')
    a, b = leaf_statuses(direct.doc), leaf_statuses(lava.run.doc)
    differ = [f'{k}: direct {a.get(k, "absent")}, LAVA {b.get(k, "absent")}'
              for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    problems = list(lava.problems) + differ
    if results.linux_version(console) != lava.log.linux_version():
        problems.insert(0, 'not the same kernel build: direct '
                        f'"{results.linux_version(console)}", LAVA '
                        f'"{lava.log.linux_version()}"')
    if not a:
        problems.append('the direct run has no results')
    counts = ', '.join(f'{n} {s.lower()}' for s, n in sorted(_count(b).items()))
    detail = f'{len(b)} cases ({counts}): the same statuses as the direct run' \
        if not problems else '; '.join(problems)
    return Check(what, not problems, detail)


def _count(statuses: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in statuses.values():
        out[s] = out.get(s, 0) + 1
    return out


def tap_statuses(console: str) -> dict[str, str]:
    """A direct boot's TAP statuses and exit status, read without LAVA's patterns."""
    out: dict[str, str] = {}
    for line in console.splitlines():
        m = _TAP.match(line.strip('\r'))
        if m:
            out[results.stable_name(m.group(2))] = 'SKIP' if m.group(3) else \
                ('PASS' if m.group(1) == 'ok' else 'FAIL')
    m = _EXIT.search(console)
    if m:
        out[results.EXIT_STATUS] = KSFT_EXIT.get(m.group(1), 'FAIL')
    return out


@dataclass
class DirectBoot:
    run: guest.RunResult
    statuses: dict[str, str]
    figures: dict[str, float]


def direct_boots(g: guest.Guest, initrd: Path, topo: str, timeout: int, n: int,
                 out: Path, first: int = 1) -> list[DirectBoot]:
    """n boots of the guest as make guest boots it (the console of each in out/),
    numbered from first."""
    boots = []
    for k in range(first, first + n):
        console = out / f'direct-{k}.console'
        r = guest.run(g, initrd, topology.get(topo), timeout, console)
        text = console.read_text(errors='replace')
        figures = metrics.extract(r.record) if r.ok and r.record else {}
        progress.say(f'direct boot {k} of {g.name} on {topo}: '
                     + (f'{figures.get("pps_single", 0):.0f} packets/s with 1 thread, '
                        f'{figures.get("pps_total", 0):.0f} with all CPUs' if r.ok else r.why))
        boots.append(DirectBoot(r, tap_statuses(text), figures))
    return boots


def spread(xs: list[float]) -> tuple[float, float]:
    """The range a further run is expected in: the runs' range, widened on each side by
    its width, and by at least MIN_WIDTH of their median."""
    lo, hi = min(xs), max(xs)
    w = max(hi - lo, MIN_WIDTH * statistics.median(xs))
    return lo - w, hi + w


def selftest(lava: results.LavaSelftest, boots: list[DirectBoot], kernel_sha256: str,
             kernel_now: Path) -> list[Check]:
    what = f'kselftest {lava.guest} {lava.topology}'
    checks = []
    now = sha256_file(kernel_now) if kernel_now.is_file() else ''
    same = now == kernel_sha256
    good = [b for b in boots if b.run.ok]
    bad = [b.run.why for b in boots if not b.run.ok]
    differ = sorted({f'{k}: direct {b.statuses.get(k, "absent")}, LAVA '
                     f'{lava.statuses.get(k, "absent")}'
                     for b in boots for k in set(b.statuses) | set(lava.statuses)
                     if b.statuses.get(k) != lava.statuses.get(k)})
    problems = ([] if same else [f'{kernel_now} is no longer the kernel LAVA booted']) + \
        ([lava.why] if lava.why else []) + bad + differ
    checks.append(Check(f'{what} statuses', not problems,
                        '; '.join(problems) if problems else
                        f'{len(lava.statuses)} results, the same in LAVA and {len(boots)} '
                        'direct boots'))
    for name in FIGURES:
        xs = [b.figures[name] for b in good if name in b.figures]
        fig = lava.figures.get(name)
        if fig is None or len(xs) < 2:
            checks.append(Check(f'{what} {name}', False,
                                f'LAVA measured {"nothing" if fig is None else fig.value}; '
                                f'{len(xs)} good direct boots (2 needed)'))
            continue
        lo, hi = spread(xs)
        direct = ', '.join(f'{x:.0f}' for x in xs)
        checks.append(Check(f'{what} {name}', lo <= fig.value <= hi,
                            f'LAVA {fig.value:.0f} {fig.unit}; direct {direct} '
                            f'(expected {lo:.0f} to {hi:.0f})', gating=False))
    return checks


def render(checks: list[Check]) -> str:
    lines = [f'{"ok  " if c.ok else "FAIL" if c.gating else "note"} {c.what}: {c.detail}'
             for c in checks]
    good = sum(c.ok for c in checks)
    return '\n'.join(lines + [f'{good} of {len(checks)} LAVA checks agree with direct '
                              'runs']) + '\n'
