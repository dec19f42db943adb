# SPDX-License-Identifier: GPL-2.0
"""One handler per command, as kunit.py's are: read the parsed options, build the
command's request (its tree: kloc's copy of it, the series applied: trees/workcopy.py),
check it, call the one function that does the work, print what it returns."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from kloc import defaults, paths, progress
from kloc.bench import aa, compare, interleave, layout, metrics, plugin_cost, single
from kloc.bisect import report as bisect_report, run as bisect_run
from kloc.counting import plugin
from kloc.kunitpy import known, report as kunit_report, runner, suites
from kloc.lava import device as lava_device, lab as lava_lab, workflow as lava_workflow
from kloc.guests import guest as guest_mod
from kloc.mutants import mutants
from kloc.its.model import check_penalty
from kloc.qemu import arches, release, topology
from kloc.review import fixcheck, workflow as review_workflow
from kloc.run import main as run_main, parts as run_parts
from kloc.review.review import its_asked
from kloc.series import changes, mail, planning
from kloc.trees import archive, kernels
from kloc.atomicfile import write_text
from kloc.errors import KlocError
from kloc.trees.sources import Tree, resolve
from kloc.paths import cache_dir


def _tree(args: argparse.Namespace) -> Tree:
    return resolve(args.kernel, args.kdir, cache_dir())


def _source(t: Tree) -> Path:
    """The tree the copy is of: the series planned against it, as it is."""
    assert t.source is not None
    return t.source


def _out_dir(args: argparse.Namespace) -> Path:
    """OUT as an absolute path, for a request: the commands it runs (make -C, rsync)
    run in other folders."""
    return Path(args.out).resolve()


def _out(args: argparse.Namespace) -> Path:
    """OUT, made and marked as kloc's (for make clean): once the command's inputs are
    checked, before it writes results."""
    return paths.mark_out(Path(args.out))


def _lab(args: argparse.Namespace) -> interleave.Runner:
    return lava_lab.runner(args.lava_url, os.environ.get('LAVA_TOKEN', ''),
                           args.lava_token_file, args.artifacts_url)


def tree(args: argparse.Namespace) -> int:
    print(_tree(args).path)
    return 0


def builddir(args: argparse.Namespace) -> int:
    print(runner.build_dir_for(_tree(args), cache_dir(), args.arch))
    return 0


def patches(args: argparse.Namespace) -> int:
    """The series as mails for git am, planned against the tree as it is (no copy)."""
    t = resolve(args.kernel, args.kdir, cache_dir(), copy=False)
    plan = planning.plan(_source(t), t.version, changes.load_series())
    out = _out(args) / 'patches' / t.label
    written = mail.export(plan, out, str(t.version))
    for p in written:
        print(p)
    progress.say(f'{len(written)} patches for Linux {t.version} in {out}; '
                 f'apply with: git am {out}/*.patch')
    return 0


def added_lines(args: argparse.Namespace) -> int:
    """Print PATH:LINE for every line the series adds to the tree."""
    t = _tree(args)
    for rel, line in planning.added_lines(planning.plan(_source(t), t.version,
                                                        changes.load_series())):
        print(f'{t.path / rel}:{line}')
    return 0


def _report(out: Path) -> int:
    r = kunit_report.write(out)
    print(r.text, end='')
    return 0 if r.ok else 1


def kunit(args: argparse.Namespace) -> int:
    t = _tree(args)
    out = _out(args)
    runner.run(runner.Job(t, out / 'kunit' / t.label, args.topologies, args.jobs,
                          args.timeout, cache_dir()))
    return _report(out)


def report(args: argparse.Namespace) -> int:
    return _report(Path(args.out))


def known_failures(args: argparse.Namespace) -> int:
    t = _tree(args)
    fixcheck.entries_of(t)       # nothing to check: say so before installing
    checks = fixcheck.run(t, cache_dir(), _out(args) / 'known-failures', args.jobs,
                          args.timeout)
    print(fixcheck.render(checks), end='')
    return 0 if all(c.ok for c in checks) else 1


def run_mutants(args: argparse.Namespace) -> int:
    t = _tree(args)
    out = Path(args.out).resolve() / 'mutants' / t.label
    mutants.check_tree(t, args.force)
    _out(args)
    outcomes = mutants.run(t, cache_dir(), out, args.jobs, args.timeout)
    text = mutants.render(outcomes)
    write_text(out / 'summary.txt', text)
    write_text(out / 'mutants.json', json.dumps([dataclasses.asdict(o) for o in outcomes],
                                                indent=1) + '\n')
    print(text + mutants.verdict(outcomes, out), end='')
    return 0 if mutants.ok(outcomes) else 1


def guest(args: argparse.Namespace) -> int:
    """Build one guest and run the loopback kselftest in it once, then COUNTED times
    counted."""
    req = single.Request(tree=_tree(args), arch=args.arch, alloc=args.alloc,
                         topology=args.topology or compare.default_topology(args.arch),
                         seconds=args.seconds, its_remote_ns=check_penalty(args.its_remote_ns),
                         timeout=args.timeout, counted=args.counted, jobs=args.jobs,
                         out=_out_dir(args))
    g, topo = single.check(req)
    _out(args)
    return 0 if single.run(req, g, topo) else 1


def bench_plugin_cost(args: argparse.Namespace) -> int:
    """What counting costs (bench/plugin_cost.py): the x86_64 SLUB guest's boots with no
    plugin, kloc-count and cache.c, interleaved; the table, and the JSON beside it."""
    t = _tree(args)
    out = _out_dir(args) / 'bench-plugin-cost' / t.label
    _out(args)
    s = plugin_cost.prepare(guest_mod.Guest(t, 'x86_64', 'slub'), out)
    boots = plugin_cost.run(s, args.runs, args.timeout * guest_mod.COUNTED_SLOWDOWN)
    print(plugin_cost.table(boots), end='')
    print(f'Files: {plugin_cost.write(boots, s)}; the consoles in {out}/boots')
    return 0


def run_compare(args: argparse.Namespace) -> int:
    t = _tree(args)
    out = Path(args.out).resolve() / 'compare' / f'{t.label}-{args.arch}-{args.a}-{args.b}'
    opts = compare.CompareOptions(
        arch=args.arch, topology=args.topology or compare.default_topology(args.arch),
        a=args.a, b=args.b, runs=args.runs, seconds=args.seconds, alpha=args.alpha,
        timeout=args.timeout, out=out, mde=args.mde, counted=args.counted,
        jobs=args.jobs, runner=_lab(args))
    compare.check(t, opts)
    _out(args)
    print(compare.run(t, opts), end='')
    print(f'Files: {out}/compare.txt, compare.json, compare.svg; runs in {out}/runs.jsonl')
    return 0


def review(args: argparse.Namespace) -> int:
    patch = Path(args.patch) if args.patch else None
    review_workflow.check_what(patch, args.aa, args.bench, not args.no_kunit,
                               its_asked(args.its, args.arch))
    req = review_workflow.Request(
        tree=_tree(args), cache=cache_dir(), out=_out_dir(args), patch=patch, aa=args.aa,
        tag=args.tag,
        topologies=args.topologies, bench_topology=args.bench_topology, runs=args.runs,
        seconds=args.seconds, alpha=args.alpha, timeout=args.timeout, jobs=args.jobs,
        mde=args.mde, counted=args.counted, kunit=not args.no_kunit, bench=args.bench,
        force=args.force, review_package=args.review_package, runner=_lab(args),
        timed=args.timed,
        arch=args.arch, its=args.its, its_remote_ns=check_penalty(args.its_remote_ns))
    prepared = review_workflow.check(req)
    _out(args)
    print(review_workflow.run(prepared), end='')
    return 0


def bisect(args: argparse.Namespace) -> int:
    """make bisect: every refusal first, with nothing written; then the ends, the
    signals and the steps; bisect.json, report.txt and report.html."""
    for name, v in (('KDIR', args.kdir), ('GOOD', args.good), ('BAD', args.bad)):
        if not v:
            raise bisect_run.GitError(f'{name}= is empty: make bisect KDIR=<a git clone of '
                                      'Linux> GOOD=<revision> BAD=<revision>')
    if not args.bench and not args.kunit:
        raise bisect_run.GitError('BENCH=0 and KUNIT=0 leave no signal to bisect: drop one')
    req = bisect_run.Request(
        kdir=Path(args.kdir).expanduser().resolve(), good=args.good, bad=args.bad,
        settings_out=_out_dir(args), cache=cache_dir(), topologies=args.topologies,
        topology=args.bench_topology, counted=args.counted if args.bench else 0,
        jobs=args.jobs, timeout=args.timeout, seconds=args.seconds, alpha=args.alpha,
        mde=args.mde, kunit=args.kunit)
    if req.counted:
        metrics.check_counted(req.counted)
    checked = bisect_run.check(req)
    _out(args)
    start = time.monotonic()
    b = bisect_run.run(checked)
    secs = time.monotonic() - start
    text = bisect_report.render(b, args.good, args.bad, secs)
    out = checked.settings.out
    write_text(out / 'bisect.json', json.dumps(
        bisect_report.to_json(b, args.good, args.bad, secs), indent=1) + '\n')
    write_text(out / 'report.txt', text)
    write_text(out / 'report.html', bisect_report.to_html(
        text, f'kloc bisect {checked.good.short}..{checked.bad.short}'))
    print(text + f'\nFiles: {out}/bisect.json, report.txt, report.html')
    return 0


def qemu(args: argparse.Namespace) -> int:
    """make deps: the QEMU every command runs, fetched once (KLOC_SYSTEM_QEMU=1: none)."""
    r = release.use(cache_dir(), fetch_missing=True)
    print(r.bin_dir if r else 'the system\'s QEMU')
    return 0


def qemu_header(args: argparse.Namespace) -> int:
    """The plugin's Makefile and make deps: the folder with qemu-plugin.h (and cache.c)
    of the QEMU kloc runs, from Debian's qemu source of its version, fetched once. It
    runs no QEMU: it does not say which one runs."""
    release.use(cache_dir(), runs=False)
    print(plugin.header_dir())
    return 0


def lava(args: argparse.Namespace) -> int:
    """Write the LAVA jobs; with --run, run them here with lava-run and read them back."""
    req = lava_workflow.Request(
        tree=_tree(args), cache=cache_dir(), out=_out_dir(args), topologies=args.topologies,
        timeout=args.timeout, seconds=args.seconds, artifacts_url=args.artifacts_url,
        run=args.run, compare=args.compare, direct_boots=args.direct_boots,
        only=tuple(j for j in args.only.split(',') if j))
    lava_workflow.check(req)
    _out(args)
    r = lava_workflow.run(req)
    print(r.text, end='')
    return 0 if r.ok else 1


def out(args: argparse.Namespace) -> int:
    """Make OUT and mark it as kloc's (the scripts' make targets, before they write
    there), and print its path."""
    print(_out(args))
    return 0


def clean(args: argparse.Namespace) -> int:
    """Remove what kloc wrote in OUT: the folder, if kloc made it, else kloc's outputs
    in it; refuse a symlink, or a folder kloc did not mark."""
    if args.check:
        paths.check_out(args.out)
        return 0
    removed, kept = paths.clean_out(args.out)
    if not removed and not kept:
        progress.say(f'nothing to clean in OUT={defaults.shown(args.out)}')
    if removed:
        progress.say('removed ' + ', '.join(removed))
    if kept:
        progress.say(f'kept {", ".join(kept)} in OUT={defaults.shown(args.out)}: they were '
                     'there before kloc first wrote in it')
    return 0


def cache_path(args: argparse.Namespace) -> int:
    """For the scripts: the cache folder cache/PARTS..., made where missing and checked
    level by level as every kloc command checks it, and each --file there that exists
    a regular file of the user's that nobody else can write; its path, or the refusal."""
    for name in args.file:
        paths.plain_name(name, '--file takes a file name in the folder')
    path = paths.cache_subdir(cache_dir(), *args.parts)
    for name in args.file:
        if os.path.lexists(path / name):
            paths.trusted_file(path / name)
    print(path)
    return 0


def deps_lines() -> str:
    """tools/deps.sh's 'package probe' lines that the registries declare: each
    installed kernel's linux-source, each arch's QEMU and, where this machine
    cross-compiles for it, its compiler."""
    lines = [f'{k.package} /usr/src/{k.package}.tar.xz' for k in kernels.KERNELS
             if not k.suite]
    for a in arches.ARCHES.values():
        lines.append(f'{a.qemu_package} qemu-system-{a.qemu}')
        if a.cross_prefix():
            lines.append(f'{a.cross_package} {a.cross_prefix()}gcc')
    return '\n'.join(lines)


def registry(args: argparse.Namespace) -> int:
    """One fact of the registries, as words for a shell script."""
    what = args.what
    if what == 'make-test-topologies':
        k = kernels.get(args.arch)
        if k is None:
            raise KlocError(f'{args.arch} is not a declared kernel: '
                            + ', '.join(kernels.names()))
        print(','.join(t for t in topology.TOPOLOGIES
                       if topology.get(t).arch in k.make_test_arches))
        return 0
    facts: dict[str, Callable[[], str]] = {
        'kernels': lambda: ' '.join(kernels.names()),
        'default': lambda: kernels.DEFAULT,
        'newest': lambda: kernels.NEWEST,
        'alpha': lambda: defaults.value('alpha', 'review'),
        'review-counted': lambda: defaults.value('counted', 'review'),
        'known-failures': lambda: ' '.join(k.name for k in known.for_kernel(args.arch)),
        'make-test-kernels': lambda: ' '.join(k.series for k in kernels.KERNELS
                                              if k.in_make_test),
        'packages': lambda: ' '.join(k.package for k in kernels.KERNELS),
        'cross': lambda: arches.get(args.arch).cross_prefix(),
        'lava-dictionary': lambda: lava_device.DICTIONARY.rstrip('\n'),
        'lint-objects': lambda: ' '.join(suites.lint_objects()),
        'deps': deps_lines,
        'cache': lambda: str(paths.cache_path()),
    }
    print(facts[what]())
    return 0


def fetch_source(args: argparse.Namespace) -> int:
    """Debian's linux-source-X.Y of sid or experimental, unpacked into the cache (never
    installed): print its tarball's path."""
    series, suite = args.series, args.suite
    if not series:
        series, suite = archive.newest(cache_dir(), args.major)
    print(archive.fetch_source(cache_dir(), series, suite or 'sid'))
    return 0


def run_all(args: argparse.Namespace) -> int:
    """make run: every part of the mission (run/parts.py), each as its own command; one
    screen at the end, and OUT/run.json."""
    where = run_parts.Where(kernel=args.kernel, kdir=args.kdir, jobs=args.jobs,
                            timeout=args.timeout, topologies=args.topologies)
    out = _out(args).resolve()
    outcomes = run_main.run(where, out, cache_dir())
    print(run_main.screen(outcomes, out), end='')
    return 0 if all(o.ok for o in outcomes) else 1


def html_report(args: argparse.Namespace) -> int:
    """make test's report: run.json and report.html in OUT from its phases and what they
    wrote there."""
    out = _out(args).resolve()
    doc = run_main.document(args.title, args.label, run_main.phases(Path(args.phases)), out)
    print(run_main.write(out, doc).with_name('report.html'))
    return 0


def layout_patch(args: argparse.Namespace) -> int:
    """make bench-aa: layout-only patch INDEX against the tree, in OUT/bench-aa."""
    p = layout.make(_tree(args).path, args.index)
    dest = _out_dir(args) / 'bench-aa' / f'layout-{p.index}.patch'
    write_text(dest, p.text)
    print(dest)
    return 0


def aa_report(args: argparse.Namespace) -> int:
    """make bench-aa's findings from its A/A reviews in OUT/bench-aa: printed, and
    written to OUT/bench-aa/report.txt."""
    root = _out_dir(args) / 'bench-aa'
    text = aa.report(aa.collect(root), args.alpha)
    write_text(root / 'report.txt', text)
    print(text, end='')
    print(f'Report: {root}/report.txt')
    return 0


def show_defaults(args: argparse.Namespace) -> int:
    print(defaults.table(), end='')
    return 0
