# SPDX-License-Identifier: GPL-2.0
"""make review: a patch (or AA=1, the base against itself) checked, run and written
up as report.txt, review.json and, with the loopback A/B, review.svg."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from kloc.atomicfile import write_text
from kloc.bench import interleave, metrics, plot
from kloc.guests import guest
from kloc.its import model
from kloc.qemu import topology
from kloc.review import patch_input, reporting, review
from kloc.pages import html as pages_html
from kloc.review.errors import ReviewError
from kloc.trees.sources import Tree
from kloc.paths import require_absolute_out


@dataclass(frozen=True)
class Request:
    tree: Tree
    cache: Path
    out: Path                       # OUT; the review goes to OUT/review/<name>
    patch: Path | None              # PATCH=
    aa: bool                        # AA=1: the base against itself, instead of a patch
    tag: str                        # names an A/A review's folder
    topologies: tuple[str, ...]     # KUnit topologies
    bench_topology: str
    runs: int
    seconds: float
    alpha: float
    timeout: int
    jobs: int
    mde: float
    counted: int
    kunit: bool
    bench: bool
    force: bool
    review_package: bool
    runner: interleave.Runner = interleave.run
    timed: bool = False             # TIMED=1: timed runs beside the counted boots
    arch: str = ''                  # ARCH=arm64: the ITS interrupt path as well
    its: bool | str = ''            # ITS=1 or 0: boot the MSI workload or not; '': auto
    its_remote_ns: float = model.PENALTY_NS     # ITS_REMOTE_NS=

    def __post_init__(self) -> None:
        require_absolute_out(self.out)


@dataclass(frozen=True)
class Prepared:
    request: Request
    patch: patch_input.PatchInfo | None
    options: review.ReviewOptions
    checked: review.Checked


def check_what(patch: Path | None, aa: bool, bench: bool, kunit: bool,
               its: bool = False) -> None:
    """What is reviewed, and how, makes sense: first, before the tree is looked at.
    its: the MSI workload was asked for (ITS=1 or ARCH=arm64)."""
    if aa == (patch is not None):
        raise ReviewError('give PATCH=file.patch (or a series .mbox), or AA=1 for the '
                          'base kernel against itself')
    if not bench and (not kunit or aa) and not (its and not aa):
        raise ReviewError('BENCH=0 leaves KUnit alone to run, and '
                          + ('--no-kunit' if not kunit else 'AA=1 has no KUnit')
                          + ': nothing would be reviewed; drop BENCH=0 (or, for a patch, '
                          'give ITS=1: the ITS interrupt path alone)')
    if patch is not None:
        patch_input.load(patch)     # a directory, a FIFO, no patch: refused here


def timed_runs(timed: bool, counted: int, runner: interleave.Runner) -> bool:
    """Whether a review boots timed runs: with TIMED=1, where no counted boots are
    (COUNTED=0: the timed runs judge), and for a LAVA lab (whose boots are timed
    ones); not beside counted boots, which judge."""
    return timed or not counted or runner is not interleave.run


def check(req: Request) -> Prepared:
    """Every refusal, before anything is built or written: the combination of
    options, the patch as posted against the base, counted boots on this QEMU."""
    check_what(req.patch, req.aa, req.bench, req.kunit, review.its_asked(req.its, req.arch))
    metrics.check_counted(req.counted)
    patch = patch_input.load(req.patch) if req.patch else None
    topo = topology.get(req.bench_topology)
    name = f'{req.patch.stem[:40]}-{patch.sha256[:8]}' if req.patch and patch \
        else f'aa-{req.tag}'
    opts = review.ReviewOptions(
        topologies=req.topologies, bench_topology=req.bench_topology, runs=req.runs,
        seconds=req.seconds, alpha=req.alpha, timeout=req.timeout, jobs=req.jobs,
        out=req.out / 'review' / name, kunit=req.kunit, bench=req.bench,
        aa=patch is None, force=req.force, mde=req.mde, counted=req.counted,
        runner=req.runner, review_package=req.review_package,
        timed=timed_runs(req.timed, req.counted, req.runner),
        its_topologies=review.its_topologies(patch, req.arch, req.its, req.topologies),
        its_penalty_ns=req.its_remote_ns)
    if req.bench and req.counted:
        guest.check_counted(guest.Guest(req.tree, topo.arch, review.ALLOCATOR), topo)
    checked = review.check(req.tree, patch, req.force, req.review_package)
    guest.check_space(req.cache)
    return Prepared(req, patch, opts, checked)


def run(p: Prepared) -> str:
    """Run (or resume) the review; write its files; return the report and where they are."""
    opts = p.options
    outcome = review.run(p.request.tree, p.patch, opts, p.request.cache, p.checked)
    if outcome.bench_skipped:           # reported as not run, with its reason
        opts = dataclasses.replace(opts, bench=False)
    text = reporting.render(outcome, opts)
    write_text(opts.out / 'report.txt', text)
    doc = reporting.to_json(outcome, opts)
    write_text(opts.out / 'review.json', json.dumps(doc, indent=1) + '\n')
    files = 'report.txt, review.json, report.html'
    if opts.bench:
        write_text(opts.out / 'review.svg', plot.render(
            reporting.all_diffs(outcome), 'base', 'patched', reporting.title(outcome, opts)))
        files += f', review.svg; runs in {opts.out}/runs.jsonl'
    write_text(opts.out / 'report.html', pages_html.render_review(
        doc, opts.out / 'review.svg' if opts.bench else None))
    return text + f'\nFiles: {opts.out}/' + files + '\n'
