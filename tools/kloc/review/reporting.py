# SPDX-License-Identifier: GPL-2.0
"""The review as a mail body (under 72 columns), and as JSON (with KCIDB, kcidb.py)."""

from __future__ import annotations

import textwrap

from kloc.bench import tables
from kloc.guests import guest
from kloc.bench import counted as counted_runs
from kloc.bench.metrics import Difference
from kloc.its.figures import Boots, side_by_side
from kloc.its.model import SEED_RATES, SEED_REQUEST_MS, Implied
from kloc.kcidb.record import new_run_id
from kloc.qemu import topology
from kloc.review import kcidb
from kloc.review.review import ALLOCATOR, NO_TIMED, ReviewOptions, ReviewOutcome, StatusChange

WIDTH = 72
REVIEW_WORDS = kcidb.WORDS     # a better, a worse patched figure; the KCIDB record's too


def _wrap_command(cmd: list[str], images: dict[str, str]) -> list[str]:
    words = [images.get(w, w) for w in cmd]
    lines, cur = [], '  $'
    for w in words:
        if len(cur) + 1 + len(w) > WIDTH - 2:
            lines.append(cur + ' \\')
            cur = '     '
        cur += ' ' + w
    return lines + [cur]


def overall(diffs: list[Difference], changes: int, bench: bool = True,
            kunit: bool = True, lost: tuple[str, ...] = ()) -> str:
    """The verdict: the figures' (tables.verdict), then the KUnit status changes."""
    parts = [tables.verdict(diffs, lost)] if bench else []
    parts.append(f'{changes} KUnit status change{"s" if changes != 1 else ""}' if kunit
                 else 'KUnit not run')
    return ', '.join(parts)


def render(o: ReviewOutcome, opts: ReviewOptions) -> str:
    subject = 'A/A: the base kernel against itself' if opts.aa or not o.patch \
        else o.patch.subject
    # REVIEW_PACKAGE=1 on a patch that changes the tests: the first line says so
    # (the third stays the patch's subject).
    lines = [f'kloc review: {kcidb.PACKAGE_WARNING}' if o.package else 'kloc review', '']
    lines += textwrap.wrap(f'Patch: {subject}', WIDTH, subsequent_indent='  ')
    if o.patch and not opts.aa:
        lines.append(f'  {o.patch.path.name}, {o.patch.mails} mail(s), '
                     f'{len(o.patch.files)} file(s), sha256 {o.patch.sha256[:16]}')
    if o.package:
        lines.append('  The verdict is not the package\'s tests\' alone: the patch changes')
        for changed in o.package:
            lines += textwrap.wrap(str(changed), WIDTH, initial_indent='    ',
                                   subsequent_indent='      ')
    lines += [f'Base:    Linux {o.base.version} ({o.base.origin} tree)']
    if o.dirty:
        lines += textwrap.wrap('Base tree has uncommitted edits (reviewed as they are): '
                               + ', '.join(o.dirty), WIDTH, initial_indent='  ',
                               subsequent_indent='    ')
    lines += [
              f'Patched: Linux {o.patched.version}, base + the patch'
              if not opts.aa else 'Patched: the same kernel (A/A)', '']
    # First what a maintainer acts on: the verdict, the figures that carry it,
    # KUnit's status changes, the contended lines where a cache figure moved.
    verdict = overall(all_diffs(o), len(o.kunit_changes), opts.bench,
                      opts.kunit and not opts.aa, lost(o))
    lines += [f'Verdict: {verdict}{its_verdict(o)}.'] + _carrying(o) + ['']
    if opts.kunit and not opts.aa:
        lines += _status_changes(o) + ['']
    cache_moved = _cache_moved(o)
    if cache_moved:
        lines += ['Most contended cache lines (one thread per CPU, the last counted boot '
                  f'of each side), as {" and ".join(cache_moved)} moved:', '']
        assert o.counted is not None
        for label, table in o.counted.attribution.items():
            lines += [f'{label}:'] + table.splitlines() + ['']
    lines += ['Details', '']
    if opts.kunit and not opts.aa:
        lines.append(f'KUnit: every suite, on {len(opts.topologies)} topologies:')
        lines += textwrap.wrap(', '.join(opts.topologies), WIDTH, initial_indent='  ',
                               subsequent_indent='  ')
        for side in ('base', 'patched'):
            t = o.kunit_totals.get(side, {})
            lines.append(f'  {side:<8} ' + ', '.join(f'{v} {k.lower()}'
                                                     for k, v in sorted(t.items())))
        lines.append('')
    if opts.bench:
        lines += _bench_lines(o, opts, not cache_moved)
    elif o.bench_skipped:
        lines += textwrap.wrap(f'Loopback benchmark: not run: {o.bench_skipped}', WIDTH,
                               subsequent_indent='  ')
    else:
        lines += ['Loopback benchmark: not run (BENCH=0)']
    if o.its:
        lines += [''] + _its_lines(o, opts)
    lines = [line for block in lines for line in
             (textwrap.wrap(block, WIDTH, subsequent_indent='  ') if len(block) > WIDTH
              else [block])]
    return '\n'.join(lines) + '\n'


# The verdicts of a figure that moved significantly, of interest or not.
MOVED = ('higher', 'lower', 'small')


def _carrying(o: ReviewOutcome) -> list[str]:
    """The judged figures that moved (significant), else every judged primary figure:
    one line each, base -> patched, the change and Holm's p."""
    judged = [d for d in tables.judged(all_diffs(o)) if d.figure.primary]
    moved = [d for d in judged if d.verdict in MOVED]
    out = []
    for d in moved or judged:
        if d.absolute is not None:
            change = f'{d.absolute.change:+.2g}/packet'
        else:
            change = f'{d.change_pct:+.2f}%'
        p = 'p < 0.0001' if d.p_adjusted < 1e-4 else f'p {d.p_adjusted:.2g}'
        out.append(f'  {d.figure.short[:23]:<23} {d.a.median:>7.4g} -> {d.b.median:<7.4g} '
                   f'{change}, {p}')
    return out


def _runs(c: StatusChange) -> list[str]:
    """Each side's statuses, run by run, where the suite ran again."""
    return [f'    {side}: {", ".join(runs)}' for side, runs in c.runs.items()]


def _status_changes(o: ReviewOutcome) -> list[str]:
    lines = ['KUnit status changes: none'] if not o.kunit_changes else \
        [f'KUnit status changes ({len(o.kunit_changes)}):']
    for c in o.kunit_changes:
        flaky = ' (flaky on the patched kernel only)' if c.flaky == 'patched' else ''
        lines.append(f'  {c.topology}: {c.base} -> {c.patched}{flaky}')
        lines += textwrap.wrap(c.case, WIDTH, initial_indent='    ',
                               subsequent_indent='      ')
        lines += _runs(c) if c.flaky else []
    if o.kunit_flaky:
        lines += [f'Flaky on the base kernel, not the patch\'s ({len(o.kunit_flaky)}):']
        for c in o.kunit_flaky:
            lines += [f'  {c.topology}:'] + textwrap.wrap(
                c.case, WIDTH, initial_indent='    ', subsequent_indent='      ') + _runs(c)
    if o.kunit_known_moved:
        names = sorted({c.case.split('.')[1] if '.' in c.case else c.case
                        for c in o.kunit_known_moved})
        lines += textwrap.wrap(
            f'Known upstream failures that moved between cases, excused on both sides '
            f'(not changes): {len(o.kunit_known_moved)}, in {", ".join(names)}', WIDTH,
            subsequent_indent='  ')
    return lines


# The counted figures of cache-line sharing: where one moved, the contended lines lead.
CACHE_FIGURES = ('fcontended_pkt_all', 'fsharing_pkt_all')


def _cache_moved(o: ReviewOutcome) -> list[str]:
    if not o.counted:
        return []
    return [d.figure.short for d in o.counted.diffs
            if d.figure.name in CACHE_FIGURES and d.verdict in MOVED]


def its_verdict(o: ReviewOutcome) -> str:
    """The ITS's remote reads per interrupt where they change, for the verdict."""
    parts = []
    for topo, sides in sorted(o.its.items()):
        b, p = sides.get('base'), sides.get('patched')
        if not isinstance(b, Boots) or not isinstance(p, Boots):
            parts.append(f'ITS on {topo}: no figures')
        else:
            if b.remotes() != p.remotes() or not (b.agree and p.agree):
                parts.append(f'ITS remote reads per interrupt on {topo} {b.remotes()} -> '
                             f'{p.remotes()}' + ('' if b.agree and p.agree else ' (by boot)'))
            rb, rp = b.redist_remote(), p.redist_remote()
            if rb is not None and rp is not None and rb != rp:
                parts.append(f'remote redistributor LPI-table accesses per interrupt on '
                             f'{topo} {rb:,.5g} -> {rp:,.5g} (QEMU\'s code as a model)')
            cb, cp = (sorted({f.cmd.remote for f in x.boots}) for x in (b, p))
            if cb != cp:
                parts.append(f'ITS remote command reads on {topo} '
                             f'{",".join(map(str, cb))} -> {",".join(map(str, cp))}')
    if o.its and not parts:
        parts.append('ITS table and command reads unchanged')
    return ''.join(f', {x}' for x in parts)


def _its_lines(o: ReviewOutcome, opts: ReviewOptions) -> list[str]:
    lines = ['ITS interrupt path: the MSI workload (tools/guest/its-msi.c,',
             f'  virtio-rng) in arm64 guests, {opts.its_boots} boots a side per topology.',
             '  Each boot\'s counts are exact (QEMU\'s ITS caches no translation, so',
             '  they are upper bounds of a real ITS\'s table traffic). Where a kernel',
             '  asks for no node, a table can land on another node from boot to',
             '  boot: then each distinct local/remote pair is shown.']
    for topo, sides in sorted(o.its.items()):
        b, p = sides.get('base'), sides.get('patched')
        if isinstance(b, Boots) and isinstance(p, Boots):
            lines += side_by_side(topo, b, p)
            means = '' if b.agree and p.agree else ' (means over the boots)'
            what = f'patched - base on {topo}{means}'
            lines += Implied(p.remote - b.remote, opts.its_penalty_ns).lines(what)
        else:
            for side, why in sides.items():
                if isinstance(why, str):
                    lines.append(f'  {topo}, {side}: FAILED: {why.splitlines()[0]}')
    return lines


def _bench_lines(o: ReviewOutcome, opts: ReviewOptions, attribution: bool = True) -> list[str]:
    frags = ' + '.join(p.name for p in guest.fragments(
        ALLOCATOR, topology.get(opts.bench_topology).arch))
    lines = ['Loopback benchmark: selftests/lo_counters in a guest',
             f'  config: tinyconfig + {frags}',
             f'  topology: {opts.bench_topology}']
    if o.layout:
        lines += textwrap.wrap(
            f'layout: {o.layout["moved"]:,} of the {o.layout["common"]:,} symbols both '
            f'System.maps name moved, {o.layout["added"]:,} added, '
            f'{o.layout["removed"]:,} removed (each moved symbol perturbs a seed\'s '
            'counts: docs/counting.md)', WIDTH - 2, initial_indent='  ',
            subsequent_indent='    ')
    if opts.timed:
        lines += [f'  {opts.runs} timed runs a side, base and patched interleaved, on '
                  f'{o.key.get("runner", "this machine")};',
                  f'  failed runs (not counted): {o.failed_runs.get("base", 0)} base, '
                  f'{o.failed_runs.get("patched", 0)} patched']
    else:
        lines += textwrap.wrap(f'timed runs: none ({NO_TIMED})', WIDTH - 2,
                               initial_indent='  ', subsequent_indent='    ')
    lines += ['  QEMU (each run boots a fresh guest):']
    if o.qemu:
        lines += [f'  {o.qemu.get("version", "")}', f'  {o.qemu.get("binary", "")}']
    images = {}
    for w in o.qemu_command:
        if w.endswith(('bzImage', '/Image')):
            images[w] = '<bzImage>' if w.endswith('bzImage') else '<Image>'
        elif w.endswith('initramfs.gz'):
            images[w] = '<initramfs>'
    lines += _wrap_command(o.qemu_command, images)
    if opts.timed:
        lines += [''] + tables.render(o.diffs, 'base', 'patched', opts.alpha,
                                      REVIEW_WORDS).splitlines()
    if o.counted:
        lines += [''] + counted_runs.report(o.counted, 'base', 'patched', opts.alpha,
                                            attribution).splitlines()
    return lines


def title(o: ReviewOutcome, opts: ReviewOptions) -> str:
    """The plot's title: the patch's subject, cut to fit."""
    subject = 'A/A' if opts.aa or not o.patch else o.patch.subject
    return f'review: {subject[:53]}'


def lost(o: ReviewOutcome) -> tuple[str, ...]:
    """The counted figures some boots lacked (metrics.lost)."""
    return o.counted.lost if o.counted else ()


def all_diffs(o: ReviewOutcome) -> list[Difference]:
    """The timed figures, then the counted ones."""
    return o.diffs + (o.counted.diffs if o.counted else [])


def _loopback_json(o: ReviewOutcome, opts: ReviewOptions) -> dict[str, object] | None:
    """review.json's loopback A/B: its figures, why it did not run, or null (BENCH=0)."""
    if o.bench_skipped:
        return {'skipped': o.bench_skipped}
    if not opts.bench:
        return None
    return {'topology': opts.bench_topology, 'runs_per_side': opts.runs if opts.timed else 0,
            'timed': 'run' if opts.timed else f'not run: {NO_TIMED}',
            'failed_runs': o.failed_runs, 'qemu_command': o.qemu_command, 'qemu': o.qemu,
            'layout': o.layout or None,
            'key': o.key, 'figures': tables.to_json(o.diffs, 'base', 'patched', opts.alpha)}


def to_json(o: ReviewOutcome, opts: ReviewOptions,
            run_id: str | None = None) -> dict[str, object]:
    """run_id: the KCIDB ids' part for this report; a new one (new_run_id()) if None."""
    return {
        # first: REVIEW_PACKAGE=1 on a patch that changes the tests (else null)
        'review_package': kcidb.package_notice(o) if o.package else None,
        'patch': None if not o.patch or opts.aa else {
            'file': str(o.patch.path), 'subject': o.patch.subject, 'sha256': o.patch.sha256,
            'files': list(o.patch.files), 'mails': o.patch.mails},
        'aa': opts.aa,
        'base': {'version': str(o.base.version), 'tree': str(o.base.path),
                 'origin': o.base.origin, 'uncommitted_files': o.dirty},
        'patched': {'version': str(o.patched.version), 'tree': str(o.patched.path),
                    'reused_cached_tree': o.reused},
        'kunit': {'topologies': list(opts.topologies), 'totals': o.kunit_totals,
                  'changes': [c.__dict__ for c in o.kunit_changes],
                  'flaky_on_base': [c.__dict__ for c in o.kunit_flaky],
                  'known_moved': [c.__dict__ for c in o.kunit_known_moved]}
        if opts.kunit else None,
        'loopback': _loopback_json(o, opts),
        'counted': None if not o.counted else {
            'runs_per_side': o.counted.runs, 'results_file': str(o.counted.store.path),
            'figures': tables.to_json(o.counted.diffs, 'base', 'patched', opts.alpha),
            'contended_lines': o.counted.attribution},
        'its': None if not o.its else {
            'model': {'penalty_ns': opts.its_penalty_ns, 'seed_rates': list(SEED_RATES),
                      'seed_request_ms': SEED_REQUEST_MS},
            'topologies': {t: {side: f.to_json() if isinstance(f, Boots)
                               else {'failed': f} for side, f in sides.items()}
                           for t, sides in o.its.items()}},
        'verdict': overall(all_diffs(o), len(o.kunit_changes), opts.bench,
                           opts.kunit and not opts.aa, lost(o)) + its_verdict(o),
        'kcidb': kcidb.submission(o, opts, run_id or new_run_id()),
    }
