# SPDX-License-Identifier: GPL-2.0
"""What make run's parts measured, gathered from OUT into run.json's 'results': the
KUnit matrix with each failure's console excerpt, the mutants and what caught them,
the comparison's figures (and its plot), the ITS's reads per interrupt by table.

Everything here is read from files under OUT, which kloc does not trust: each is
read as data (JSON, the KTAP parser), never run, and what does not parse is left
out with a note in its place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kloc.errors import KlocError
from kloc.kunitpy import known, runner
from kloc.kunitpy.ktap import Status
from kloc.trees import kernels

EXCERPT = 12            # console lines kept of each failure
MOST_FAILURES = 60      # failures listed in full; the JUnit file has them all


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def kunit(out: Path) -> dict[str, object]:
    """kernel x topology x suite: each suite's counts by status, and each failure."""
    try:
        runs = runner.load_runs(out / 'kunit')
    except KlocError as e:
        return {'error': str(e), 'matrix': [], 'failures': []}
    verdict = known.classify(runs)
    matrix, failures = [], []
    for r in sorted(runs, key=lambda r: (r.kernel, r.topology)):
        suites = []
        for s in r.doc.suites:
            counts = {st.value: 0 for st in Status}
            for path, leaf in s.leaves():
                counts[leaf.status.value] += 1
                if leaf.status in (Status.FAIL, Status.CRASHED):
                    failures.append({
                        'kernel': r.kernel, 'topology': r.topology, 'case': path,
                        'status': leaf.status.value,
                        'known': verdict.excuse(r, path),
                        'excerpt': [line[:160] for line in leaf.log[-EXCERPT:]]})
            suites.append({'suite': s.name, 'counts': counts})
        matrix.append({'kernel': r.kernel, 'topology': r.topology, 'booted': r.doc.found,
                       'seconds': r.seconds, 'suites': suites})
    return {'matrix': matrix, 'failures_total': len(failures),
            'failures': failures[:MOST_FAILURES], 'ok': verdict.ok}


def mutants(out: Path) -> list[dict[str, object]]:
    """Each mutant of each kernel make mutants ran: its verdict and what caught it."""
    found = []
    for f in sorted((out / 'mutants').glob('*/mutants.json')):
        doc = _json(f)
        if isinstance(doc, list):
            found += [dict(m, kernel=f.parent.name) for m in doc if isinstance(m, dict)]
    return found


def compare_dir(out: Path) -> Path | None:
    """The folder of the SLUB/SLAB comparison make run ran (OUT/compare/<tree>-...)."""
    found = sorted((out / 'compare').glob(f'linux-{kernels.with_slab()}*-x86_64-slub-slab'))
    return found[-1] if found else None


def compare(out: Path) -> dict[str, Any] | None:
    """compare.json of that comparison, with where its plot and folder are."""
    d = compare_dir(out)
    doc = _json(d / 'compare.json') if d else None
    if not isinstance(doc, dict):
        return None
    assert d is not None
    svg = d / 'compare.svg'
    doc['svg_file'] = str(svg) if svg.is_file() else None
    doc['folder'] = str(d)
    return doc


def its(out: Path) -> list[dict[str, Any]]:
    """The newest MSI-workload figures of each ITS topology (make guest ARCH=arm64)."""
    newest: dict[str, tuple[float, Path]] = {}
    for f in (out / 'guest').glob('*-arm64-slub/its-*.json'):
        t = f.stem.removeprefix('its-')
        m = f.stat().st_mtime
        if t not in newest or m > newest[t][0]:
            newest[t] = (m, f)
    found: list[dict[str, Any]] = []
    for t, (_, f) in sorted(newest.items()):
        doc = _json(f)
        if isinstance(doc, dict):
            found.append({'topology': t, 'guest': f.parent.name, 'figures': doc})
    return found


def gather(out: Path) -> dict[str, object]:
    return {'kunit': kunit(out), 'mutants': mutants(out), 'compare': compare(out),
            'its': its(out)}
