# SPDX-License-Identifier: GPL-2.0
"""Command line: python3 -m kloc COMMAND [options]."""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from kloc import defaults, paths, progress
from kloc.bench import compare, counted as counted_runs, interleave, plot, stats
from kloc.guests import guest
from kloc.kunit import junit, known, runner, suites, summary
from kloc.kcidb import record as kcidb_record
from kloc.lava import device as lava_device, export as lava_export, kcidb as lava_kcidb, \
    lab as lava_lab, local as lava_local, remote as lava_remote, session as lava_session
from kloc.mutants import mutants
from kloc.qemu import arches, release, topology
from kloc.review import fixcheck, patch_input, reporting, review
from kloc.series import changes, install, mail
from kloc.series.treefiles import Faults
from kloc.trees import archive, kernels
from kloc.atomicfile import write_text
from kloc.errors import KlocError, describe_os_error
from kloc.trees.sources import Tree, resolve, uncommitted
from kloc.paths import cache_dir, dropped_edits_dir


def _tree(args: argparse.Namespace) -> Tree:
    return resolve(args.kernel, args.kdir, cache_dir())


def _out(args: argparse.Namespace) -> Path:
    """OUT, made and marked as kloc's (for make clean): once the command's inputs are
    checked, before it writes results."""
    return paths.mark_out(Path(args.out))


def _topologies(args: argparse.Namespace) -> tuple[str, ...]:
    """TOPOLOGIES (checked by the parser), or every topology when it is empty."""
    return tuple(args.topologies.split(',')) if args.topologies else tuple(topology.TOPOLOGIES)


def cmd_tree(args: argparse.Namespace) -> int:
    print(_tree(args).path)
    return 0


def cmd_builddir(args: argparse.Namespace) -> int:
    print(runner.build_dir_for(_tree(args), cache_dir(), args.arch))
    return 0


def install_into(tree: Tree, args: argparse.Namespace) -> list[str]:
    """Install the series (explicitly, or before a command that builds the tree)."""
    return install.install(tree.path, tree.version, changes.load_series(),
                           force=args.force, save=dropped_edits_dir(),
                           faults=Faults.from_env(os.environ))


def cmd_install(args: argparse.Namespace) -> int:
    tree = _tree(args)
    written = install_into(tree, args)
    if written:
        progress.say(f'installed into Linux {tree.version} at {tree.path}: '
                     + ', '.join(written))
    else:
        progress.say(f'Linux {tree.version} at {tree.path} already carries this package; '
                     'nothing changed')
    return 0


def cmd_uninstall(args: argparse.Namespace) -> int:
    tree = _tree(args)
    restored = install.uninstall(tree.path, tree.version, changes.load_series(),
                                 force=args.force, save=dropped_edits_dir(),
                                 faults=Faults.from_env(os.environ))
    if restored:
        progress.say(f'restored {len(restored)} files in {tree.path}: ' + ', '.join(restored))
    else:
        progress.say(f'{tree.path} does not carry this package; nothing to do')
    return 0


def cmd_patches(args: argparse.Namespace) -> int:
    tree = _tree(args)
    plan = install.plan(tree.path, tree.version, changes.load_series())
    out = _out(args) / 'patches' / tree.label
    written = mail.export(plan, out, str(tree.version))
    for p in written:
        print(p)
    progress.say(f'{len(written)} patches for Linux {tree.version} in {out}; '
                 f'apply with: git am {out}/*.patch')
    return 0


def cmd_added_lines(args: argparse.Namespace) -> int:
    """Print PATH:LINE for every line the series adds to the tree."""
    tree = _tree(args)
    plan = install.plan(tree.path, tree.version, changes.load_series())
    for rel, line in install.added_lines(plan):
        print(f'{tree.path / rel}:{line}')
    return 0


def report(out: Path) -> int:
    kout = out / 'kunit'
    runs = runner.load_runs(kout)
    kout = paths.mark_out(out) / 'kunit'
    kout.mkdir(parents=True, exist_ok=True)
    write_text(kout / 'junit.xml', junit.to_xml(runs))
    text = summary.render(runs)
    write_text(kout / 'summary.txt', text)
    print(text, end='')
    print(f'Results: {kout}/<kernel>/<topology>.{{ktap,json,console}}, '
          f'JUnit: {kout / "junit.xml"}')
    return 0 if summary.ok(runs) else 1


def cmd_kunit(args: argparse.Namespace) -> int:
    tree = _tree(args)
    names = _topologies(args)
    install_into(tree, args)
    cache = cache_dir()
    out = _out(args)
    job = runner.Job(tree, out / 'kunit' / tree.label, names, args.jobs,
                     args.timeout, cache)
    runner.run(job)
    return report(out)


def cmd_known_failures(args: argparse.Namespace) -> int:
    tree = _tree(args)
    fixcheck.entries_of(tree)       # nothing to check: say so before installing
    install_into(tree, args)
    checks = fixcheck.run(tree, cache_dir(), _out(args) / 'known-failures',
                          args.jobs, args.timeout)
    print(fixcheck.render(checks), end='')
    return 0 if all(c.ok for c in checks) else 1


def cmd_mutants(args: argparse.Namespace) -> int:
    tree = _tree(args)
    out = Path(args.out).resolve() / 'mutants' / tree.label
    dirty = install.edited_files(tree.path)
    managed = install.managed_files(tree.path)
    dirty += [f for f in uncommitted(tree.path) if f not in managed]
    if dirty and not args.force:
        raise mutants.MutantError(
            f'{tree.path} has uncommitted edits: {", ".join(dirty[:8])}'
            f'{" ..." if len(dirty) > 8 else ""}. The mutants are written against the '
            'tree as released plus this package; commit or stash the edits, or run with '
            'FORCE=1 to use the tree as it is')
    if dirty:
        progress.say(f'FORCE=1: the mutants run on a tree with edits to {", ".join(dirty)}')
    install_into(tree, args)
    _out(args)
    outcomes = mutants.run(tree, cache_dir(), out, args.jobs, args.timeout)
    text = mutants.render(outcomes)
    write_text(out / 'summary.txt', text)
    print(text, end='')
    good = mutants.ok(outcomes)
    caught = sum(o.verdict == 'caught' for o in outcomes if not o.pristine)
    tried = sum(not o.pristine for o in outcomes)
    pristine = ', '.join(f'{o.name} {o.verdict}' for o in outcomes if o.pristine)
    print(f'{"PASS" if good else "FAIL"}: {caught} of {tried} mutants caught; '
          f'{pristine}; logs in {out}')
    return 0 if good else 1


def cmd_guest(args: argparse.Namespace) -> int:
    """Build one guest and run the loopback kselftest in it once."""
    tree = _tree(args)
    g = guest.Guest(tree, args.arch, args.alloc)
    guest.check(g)
    topo = topology.get(args.topology)
    if topo.arch != args.arch:
        raise topology.TopologyError(f'topology {topo.name} is {topo.arch}, not {args.arch}')
    if args.counted:
        guest.check_counted(g, topo)
    out = _out(args) / 'guest' / g.name
    out.mkdir(parents=True, exist_ok=True)
    install_into(tree, args)
    guest.build(g, out)
    binary = guest.static_selftest(args.arch, tree.path / 'tools/testing/selftests', out)
    initrd = guest.initramfs(binary, ['-d', str(args.seconds), '-w', '0.5'],
                             out / 'initramfs.gz', args.arch)
    progress.say(f'{g.name}: booting on {topo.name} ({topo.about})')
    r = guest.run(g, initrd, topo, args.timeout, out / 'console.log')
    if not r.ok:
        print(f'{g.name}: FAILED RUN: {r.why}\n--- console tail ---\n{r.console_tail}')
        return 1
    print(f'{g.name} on {topo.name}: {r.seconds:.1f} s; ' + json.dumps(r.record))
    plugin = None
    if args.counted:
        plugin, initrd = counted_runs.setup(binary, out, args.arch)
    for k in range(1, args.counted + 1):
        progress.say(f'{g.name}: counted boot {k}/{args.counted} under the QEMU plugin')
        log = out / f'counted-{k}.log'
        c = guest.run(g, initrd, topo, args.timeout, log, plugin)
        if not c.ok:
            print(f'{g.name}: FAILED COUNTED BOOT: {c.why}\n--- console tail ---\n'
                  f'{c.console_tail}')
            return 1
        assert c.record is not None
        figures = c.record['counted']
        print(f'{g.name} counted boot {k}: {c.seconds:.1f} s ({c.seconds / r.seconds:.1f}x the '
              f'timed boot); ' + json.dumps(figures) + f'; counts in {c.record["counts_file"]}')
    return 0


def _runner(args: argparse.Namespace) -> interleave.Runner:
    """Where the timed runs boot: here, or as jobs of the LAVA lab of --lava-url."""
    if not args.lava_url:
        return interleave.run
    server = lava_remote.server(args.lava_url, os.environ.get('LAVA_TOKEN', ''),
                                args.lava_token_file)
    lava_remote.version(server)     # reachable, before anything is built
    return functools.partial(lava_lab.run, lab=lava_lab.Lab(server, args.artifacts_url))


def cmd_compare(args: argparse.Namespace) -> int:
    tree = _tree(args)
    out = Path(args.out).resolve() / 'compare' / f'{tree.label}-{args.arch}-{args.a}-{args.b}'
    opts = compare.CompareOptions(args.arch, args.topology or compare.default_topology(args.arch),
                                  args.a, args.b, args.runs, args.seconds, args.alpha,
                                  args.timeout, out, args.mde, args.counted, _runner(args))
    _check_counted(args.counted)
    for allocator in (args.a, args.b):      # SLAB on 6.8+: before anything is written
        guest.check(guest.Guest(tree, args.arch, allocator))
        if args.counted:
            guest.check_counted(guest.Guest(tree, args.arch, allocator),
                                topology.get(opts.topology))
    install_into(tree, args)
    _out(args)
    print(compare.run(tree, opts), end='')
    print(f'Files: {out}/compare.txt, compare.json, compare.svg; runs in {out}/runs.jsonl')
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    if args.aa == bool(args.patch):
        raise review.ReviewError('give PATCH=file.patch (or a series .mbox), or AA=1 for the '
                                 'base kernel against itself')
    if not args.bench and (args.no_kunit or args.aa):
        raise review.ReviewError('BENCH=0 leaves KUnit alone to run, and '
                                 + ('--no-kunit' if args.no_kunit else 'AA=1 has no KUnit')
                                 + ': nothing would be reviewed; drop BENCH=0')
    patch = patch_input.load(Path(args.patch)) if args.patch else None
    tree = _tree(args)
    names = _topologies(args)
    topology.get(args.bench_topology)
    name = f'aa-{args.tag}' if args.aa else \
        f'{Path(args.patch).stem[:40]}-{patch.sha256[:8] if patch else ""}'
    out = Path(args.out).resolve() / 'review' / name
    opts = review.ReviewOptions(names, args.bench_topology, args.runs, args.seconds, args.alpha,
                                args.timeout, args.jobs, out, kunit=not args.no_kunit,
                                bench=args.bench, aa=args.aa,
                                force=args.force, mde=args.mde, counted=args.counted,
                                runner=_runner(args), review_package=args.review_package)
    _check_counted(args.counted)
    if args.bench and args.counted:
        guest.check_counted(guest.Guest(tree, topology.get(args.bench_topology).arch,
                                        review.ALLOCATOR), topology.get(args.bench_topology))
    checked = review.check(tree, None if args.aa else patch, args.force,
                           args.review_package)
    guest.check_space(cache_dir())
    _out(args)
    outcome = review.run(tree, patch, opts, cache_dir(), checked)
    text = reporting.render(outcome, opts)
    write_text(out / 'report.txt', text)
    write_text(out / 'review.json', json.dumps(reporting.to_json(outcome, opts),
                                               indent=1) + '\n')
    files = 'report.txt, review.json'
    if opts.bench:
        write_text(out / 'review.svg', plot.render(reporting.all_diffs(outcome), 'base',
                                                   'patched', reporting.title(outcome, opts)))
        files += f', review.svg; runs in {out}/runs.jsonl'
    print(text, end='')
    print(f'\nFiles: {out}/' + files)
    return 0


def cmd_qemu(args: argparse.Namespace) -> int:
    """make deps: the QEMU every command runs, fetched once (KLOC_SYSTEM_QEMU=1: none)."""
    r = release.use(cache_dir(), fetch_missing=True)
    print(r.bin_dir if r else 'the system\'s QEMU')
    return 0


def cmd_lava(args: argparse.Namespace) -> int:
    """Write the LAVA jobs; with --run, run them here with lava-run and read them back."""
    tree = _tree(args)
    names = _topologies(args)
    if args.run:
        lava_local.lava_run()       # missing: say so before anything is written
    out = _out(args)
    lava_dir = out / 'lava' / tree.label
    kunit_timeout = args.timeout or int(defaults.value('timeout', 'kunit'))
    guest_timeout = args.timeout or int(defaults.value('timeout', 'guest'))
    lava_export.write(lava_export.Request(tree, cache_dir(), lava_dir, names, kunit_timeout,
                                          guest_timeout, args.seconds, args.artifacts_url))
    if not args.run:
        print(f'LAVA jobs: {lava_dir}/jobs/*.yaml; images: {lava_dir}/artifacts; device '
              f'dictionary: {lava_dir}/device (docs/lava.md); make lava RUN=1 runs them here')
        return 0
    opts = lava_session.Options(lava_dir, cache_dir(),
                                out / 'kunit' / tree.label if args.compare else None,
                                args.direct_boots if args.compare else 0, guest_timeout,
                                tuple(j for j in args.only.split(',') if j))
    o = lava_session.run(tree, opts)
    write_text(lava_dir / 'junit.xml', junit.to_xml(o.junit_runs()))
    write_text(lava_dir / 'kcidb.json', json.dumps(
        lava_kcidb.submission(tree, o, kcidb_record.new_run_id()), indent=1) + '\n')
    text = lava_session.render(o)
    write_text(lava_dir / 'summary.txt', text)
    print(text, end='')
    print(f'{"PASS" if o.ok else "FAIL"}: {len(o.kunit)} KUnit and {len(o.selftests)} '
          f'kselftest LAVA jobs; JUnit: {lava_dir}/junit.xml, KCIDB: {lava_dir}/kcidb.json, '
          f'logs: {lava_dir}/results/')
    return 0 if o.ok else 1


def cmd_report(args: argparse.Namespace) -> int:
    return report(Path(args.out))


def cmd_out(args: argparse.Namespace) -> int:
    """Make OUT and mark it as kloc's (the scripts' make targets, before they write
    there), and print its path."""
    print(_out(args))
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
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


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


class _Parser(argparse.ArgumentParser):
    """Usage errors on one line, exit 2, like every other kloc error."""

    def error(self, message: str) -> NoReturn:
        # A value refused by its type (defaults.number, boolean, one_line; TOPOLOGIES)
        # names its Make variable: the option's name adds nothing.
        m = re.match(r'argument --[\w-]+: ([A-Z_]+=.*)', message, re.DOTALL)
        if m:
            message = m.group(1)
        self.exit(2, f'{self.prog}: error: {message} (see --help)\n')


PRIMARY_FIGURES = 3     # tested together, with Holm (bench.metrics)


def _check_power(runs: int, alpha: float) -> None:
    """Refuse a RUNS with which no difference can ever be significant."""
    need = stats.min_runs(alpha, PRIMARY_FIGURES)
    if runs < need:
        p = stats.smallest_p(runs, runs)
        raise defaults.OptionError(
            f'RUNS={runs} can never give a significant difference: with {runs} runs a side '
            f'the smallest two-sided Mann-Whitney p is {p:.3g}, {PRIMARY_FIGURES * p:.3g} '
            f'after Holm over the {PRIMARY_FIGURES} primary figures, above ALPHA={alpha:g}; '
            f'use RUNS={need} or more')


def _check_counted(counted: int) -> None:
    """Refuse a COUNTED with which Welch's test can never be significant."""
    if counted == 1:
        raise defaults.OptionError('COUNTED=1 gives no spread to test: use COUNTED=3 (or 2 '
                                   'and more), or 0 for no counted boots')


def option(sp: argparse.ArgumentParser, command: str, dest: str) -> None:
    """A numeric option shared by several commands, from the one table of defaults."""
    o = defaults.BY_DEST[dest]
    sp.add_argument(f'--{dest}', type=defaults.number(dest, command),
                    default=(int if o.integer else float)(defaults.value(dest, command)),
                    help=f'{o.about} (make: {o.make}=)')


def _topologies_type(text: str) -> str:
    """TOPOLOGIES: comma-separated topology names, each once; empty for all of them."""
    names = text.split(',')
    known = ', '.join(topology.TOPOLOGIES)
    given = f'TOPOLOGIES={defaults.shown(text)}'
    fix = f'give one or more of {known}, comma-separated, or TOPOLOGIES= (nothing) for all'
    if not text:
        return text
    if not any(names):
        raise argparse.ArgumentTypeError(f'{given} names no topology: {fix}')
    if '' in names:
        raise argparse.ArgumentTypeError(f'{given} has an empty name between commas: {fix}')
    for n in names:
        if n not in topology.TOPOLOGIES:
            raise argparse.ArgumentTypeError(f'{given} names {defaults.shown(n)}, which is '
                                             f'not a topology: {fix}')
        if names.count(n) > 1:
            raise argparse.ArgumentTypeError(f'{given} names {n} twice: {fix}')
    return text


def _boolean(sp: argparse.ArgumentParser, flag: str, make: str, text: str,
             default: str = '') -> None:
    """A yes-or-no option: --flag alone is yes; --flag 1, 0 or '' as make passes
    NAME=; anything else is refused (defaults.boolean)."""
    sp.add_argument(f'--{flag}', nargs='?', const=True, default=default,
                    type=defaults.boolean(make, text), metavar='1|0',
                    help=f'{text} (make: {make}=1)')


def cmd_registry(args: argparse.Namespace) -> int:
    """One fact of the registries, as words for a shell script."""
    if args.what == 'kernels':
        print(' '.join(kernels.names()))
    elif args.what == 'default':
        print(kernels.DEFAULT)
    elif args.what == 'newest':
        print(kernels.NEWEST)
    elif args.what == 'alpha':
        print(defaults.value('alpha', 'review'))
    elif args.what == 'known-failures':
        print(' '.join(k.name for k in known.for_kernel(args.arch)))
    elif args.what == 'make-test-kernels':
        print(' '.join(k.series for k in kernels.KERNELS if k.in_make_test))
    elif args.what == 'make-test-topologies':
        k = kernels.get(args.arch)
        if k is None:
            raise KlocError(f'{args.arch} is not a declared kernel: '
                            + ', '.join(kernels.names()))
        print(','.join(t for t in topology.TOPOLOGIES
                       if topology.get(t).arch in k.make_test_arches))
    elif args.what == 'packages':
        print(' '.join(k.package for k in kernels.KERNELS))
    elif args.what == 'cross':
        print(arches.get(args.arch).cross_prefix())
    elif args.what == 'lava-dictionary':
        print(lava_device.DICTIONARY, end='')
    else:
        print(' '.join(suites.lint_objects()))
    return 0


def cmd_fetch_source(args: argparse.Namespace) -> int:
    """Debian's linux-source-X.Y of sid or experimental, unpacked into the cache (never
    installed): print its tarball's path."""
    series, suite = args.series, args.suite
    if not series:
        series, suite = archive.newest(cache_dir(), args.major)
    print(archive.fetch_source(cache_dir(), series, suite or 'sid'))
    return 0


def cmd_defaults(args: argparse.Namespace) -> int:
    print(defaults.table(), end='')
    return 0


def _tree_opts(sp: argparse.ArgumentParser, kernel: str) -> None:
    sp.add_argument('--kernel', default=os.environ.get('KERNEL') or kernel,
                    help='Debian linux-source version: ' + ' or '.join(kernels.names())
                    + f' (default {kernel})')
    sp.add_argument('--kdir', default=os.environ.get('KDIR', ''),
                    type=defaults.one_line('KDIR'),
                    help='your own kernel tree (wins over --kernel)')
    _boolean(sp, 'force', 'FORCE', 'overwrite or restore files edited by hand (their copies '
             'are saved under KLOC_CACHE/dropped-edits)', os.environ.get('FORCE', ''))


def _out_opt(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--out', default='out', type=defaults.one_line('OUT', empty=False),
                    help='where results go (make: OUT=)')


def _kunit_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--topologies', default='', type=_topologies_type,
                    help='comma-separated; default: all of ' + ','.join(topology.TOPOLOGIES))


def _builddir_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--arch', default='arm64', choices=sorted(arches.ARCHES))


def _guest_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--arch', default='x86_64', choices=sorted(arches.ARCHES))
    sp.add_argument('--alloc', default='slub', choices=guest.ALLOCATORS)
    sp.add_argument('--topology', default='x86_64_2n')


def _compare_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--arch', default='x86_64', choices=sorted(arches.ARCHES))
    sp.add_argument('--topology', default='', help='default: the arch\'s 2-node topology')
    sp.add_argument('--a', default='slub', choices=guest.ALLOCATORS)
    sp.add_argument('--b', default='slab', choices=guest.ALLOCATORS)
    sp.set_defaults(kernel=os.environ.get('KERNEL', kernels.with_slab()))
    _lab_opts(sp)


def _lab_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--lava-url', default=os.environ.get('LAVA_URL', ''),
                    help='run the timed runs as jobs of this LAVA server (make: LAVA_URL=); '
                    'the token from --lava-token-file or $LAVA_TOKEN')
    sp.add_argument('--lava-token-file', default=os.environ.get('LAVA_TOKEN_FILE', ''),
                    help='a file holding the LAVA token (make: LAVA_TOKEN_FILE=)')
    sp.add_argument('--artifacts-url', default='',
                    help='with --lava-url: where OUT/.../lava-artifacts is published for the '
                    'workers (default: file:// URLs, for a worker on this machine; make: '
                    'LAVA_ARTIFACTS_URL=)')


def _review_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--patch', default='', help='a -p1 diff, git format-patch mail or mbox')
    _boolean(sp, 'aa', 'AA', 'review the base kernel against itself (A/A)')
    sp.add_argument('--tag', default='0', help='names an A/A review\'s output dir')
    sp.add_argument('--topologies', default='', type=_topologies_type,
                    help='KUnit topologies; default: all of ' + ','.join(topology.TOPOLOGIES))
    sp.add_argument('--bench-topology', default='x86_64_2n')
    sp.add_argument('--no-kunit', action='store_true', help='the loopback A/B only')
    _boolean(sp, 'bench', 'BENCH', 'the loopback A/B; BENCH=0: KUnit only, no guest is '
             'built or booted', default='1')
    _boolean(sp, 'review-package', 'REVIEW_PACKAGE', 'review a patch that changes the '
             'package\'s tests or hooks, or KUnit (the report says so first)')
    _lab_opts(sp)


def _lava_opts(sp: argparse.ArgumentParser) -> None:
    _kunit_opts(sp)
    sp.add_argument('--timeout', type=defaults.number('timeout', 'lava'), default=None,
                    help='seconds a job\'s test may take (default: '
                    f'{defaults.value("timeout", "kunit")} for KUnit, '
                    f'{defaults.value("timeout", "guest")} for the kselftest; make: TIMEOUT=)')
    sp.add_argument('--seconds', type=defaults.number('seconds', 'lava'),
                    default=float(defaults.value('seconds', 'guest')),
                    help='each kselftest phase\'s measuring time (make: SECONDS=)')
    sp.add_argument('--artifacts-url', default='',
                    help='where artifacts/ is published for a lab (default: file:// URLs; '
                    'make: LAVA_ARTIFACTS_URL=)')
    _boolean(sp, 'run', 'RUN', 'run the jobs here with lava-run and read the results back')
    sp.add_argument('--compare', action='store_true',
                    help='with --run: compare with make kunit\'s runs in OUT/kunit and with '
                    'direct boots of the guests')
    sp.add_argument('--direct-boots', type=int, default=3,
                    help='with --compare: direct boots of each guest (default 3)')
    sp.add_argument('--only', default='', help='with --run: these jobs only (comma-separated '
                    'names: kunit-x86_64_2n, kselftest-x86_64-slub)')


def _fetch_source_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--series', default='', help='e.g. 7.2 (default: the newest of --major)')
    sp.add_argument('--major', type=int, default=7)
    sp.add_argument('--suite', default='', choices=('',) + archive.SUITES,
                    help='where --series comes from (default sid)')


def _registry_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('what', choices=('kernels', 'default', 'newest', 'alpha', 'make-test-kernels',
                                     'make-test-topologies', 'known-failures',
                                     'packages', 'cross', 'lint-objects', 'lava-dictionary'))
    sp.add_argument('arch', nargs='?', default='arm64',
                    help='the arch (cross), or the kernel (make-test-topologies, '
                    'known-failures)')


def _clean_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--check', action='store_true',
                    help='only say whether make clean may remove OUT (exit 2 if not)')


Adder = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    name: str
    fn: Callable[[argparse.Namespace], int]
    help: str
    tree: bool = True                       # --kernel, --kdir, --force
    kernel: str = kernels.DEFAULT           # --kernel's default
    out: bool = True                        # --out
    numbers: tuple[str, ...] = ()           # options of defaults.py
    extra: Adder | None = None
    qemu: bool = False                      # starts QEMU: 10.0 first on PATH


COMMANDS = (
    Command('tree', cmd_tree, 'extract (or check) the kernel tree; print its path', out=False),
    Command('builddir', cmd_builddir, 'print the KUnit build dir', out=False,
            extra=_builddir_opts),
    Command('install', cmd_install, 'install the package into the tree', out=False),
    Command('uninstall', cmd_uninstall, 'restore the tree byte for byte', out=False),
    Command('added-lines', cmd_added_lines, 'PATH:LINE of each line the series adds',
            out=False),
    Command('patches', cmd_patches, 'export the series for git am'),
    Command('kunit', cmd_kunit, 'KUnit on every topology', numbers=('jobs', 'timeout'),
            extra=_kunit_opts, qemu=True),
    Command('mutants', cmd_mutants, 'each mutant must be caught', numbers=('jobs', 'timeout'),
            qemu=True),
    Command('guest', cmd_guest, 'one guest, the kselftest once',
            numbers=('seconds', 'timeout', 'counted'), extra=_guest_opts, qemu=True),
    Command('compare', cmd_compare, 'SLUB against SLAB guests, interleaved',
            numbers=('runs', 'seconds', 'alpha', 'mde', 'counted', 'timeout'),
            extra=_compare_opts, qemu=True),
    # patches are posted against mainline: review takes the newest kernel
    Command('review', cmd_review, 'a patched kernel against its base',
            kernel=kernels.NEWEST,
            numbers=('runs', 'seconds', 'alpha', 'mde', 'counted', 'jobs', 'timeout'),
            extra=_review_opts, qemu=True),
    Command('known-failures', cmd_known_failures, 'each known upstream failure fails on '
            'the stock kernel and passes with its fix', numbers=('jobs', 'timeout'),
            qemu=True),
    Command('lava', cmd_lava, 'LAVA jobs for the KUnit kernels and the guest kselftest',
            extra=_lava_opts, qemu=True),
    Command('report', cmd_report, 'merge the KUnit results; the summary', tree=False),
    Command('registry', cmd_registry, 'the declared kernels, arches and suites, for scripts',
            tree=False, out=False, extra=_registry_opts),
    Command('fetch-source', cmd_fetch_source, 'Debian\'s linux-source-X.Y of sid or '
            'experimental, unpacked into the cache, not installed', tree=False, out=False,
            extra=_fetch_source_opts),
    Command('qemu', cmd_qemu, f'fetch QEMU {release.SERIES[0]}.{release.SERIES[1]} from '
            f'Debian {release.SUITE} into the cache (not installed); print its bin dir',
            tree=False, out=False),
    Command('defaults', cmd_defaults, 'every option\'s default, as make help shows them',
            tree=False, out=False),
    Command('out', cmd_out, 'make OUT, marked as kloc\'s for make clean; print its path',
            tree=False),
    Command('clean', cmd_clean, 'remove what kloc wrote in OUT (all of it, if kloc made '
            'it); refuse a symlink or a folder kloc did not mark', tree=False,
            extra=_clean_opts),
)


def parser() -> argparse.ArgumentParser:
    """Every command, its own options and the shared ones, each built once."""
    p = _Parser(prog='kloc', description=__doc__)
    sub = p.add_subparsers(dest='command', required=True)
    for c in COMMANDS:
        sp = sub.add_parser(c.name, help=c.help)
        if c.tree:
            _tree_opts(sp, c.kernel)
        if c.out:
            _out_opt(sp)
        for dest in c.numbers:
            option(sp, c.name, dest)
        if c.extra:
            c.extra(sp)
        sp.set_defaults(fn=c.fn)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    try:
        defaults.check(args.command, vars(args))
        if args.command in ('compare', 'review'):
            _check_power(args.runs, args.alpha)
    except KlocError as e:
        print(f'kloc {args.command}: error: {e}', file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        if any(c.qemu for c in COMMANDS if c.name == args.command):
            release.use(cache_dir())
        rc: int = args.fn(args)
        return rc
    except KlocError as e:
        print(f'kloc {args.command}: error: {e}', file=sys.stderr)
        return 2
    except OSError as e:
        print(f'kloc {args.command}: error: {describe_os_error(e)}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f'kloc {args.command}: interrupted; finished results are kept (compare and '
              'review resume from their runs.jsonl when run again)', file=sys.stderr)
        return 130
    except subprocess.CalledProcessError as e:
        print(f'kloc {args.command}: error: {" ".join(map(str, e.cmd))} exited '
              f'{e.returncode}', file=sys.stderr)
        return 2
