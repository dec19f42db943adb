# SPDX-License-Identifier: GPL-2.0
"""Command line: python3 -m kloc COMMAND [options].

The commands' table, the parser it builds, and main(): the handlers are in
handlers.py, the options in options.py."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from kloc import defaults
from kloc.bench import metrics
from kloc.cli import handlers as h, options as o
from kloc.qemu import release
from kloc.trees import kernels
from kloc.errors import KlocError, describe_os_error
from kloc.paths import cache_dir

Adder = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True, kw_only=True)
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
    Command(name='tree', fn=h.tree, out=False,
            help="print the path of kloc's copy of the tree (refreshed, the series applied)"),
    Command(name='builddir', fn=h.builddir, help='print the KUnit build dir', out=False,
            extra=o.builddir),
    Command(name='added-lines', fn=h.added_lines,
            help='PATH:LINE of each line the series adds', out=False),
    Command(name='patches', fn=h.patches, help='export the series for git am'),
    Command(name='kunit', fn=h.kunit, help='KUnit on every topology',
            numbers=('jobs', 'timeout'), extra=o.topologies, qemu=True),
    Command(name='mutants', fn=h.run_mutants, help='each mutant must be caught',
            numbers=('jobs', 'timeout'), qemu=True),
    Command(name='guest', fn=h.guest, help='one guest, the kselftest once',
            numbers=('seconds', 'timeout', 'counted', 'jobs'), extra=o.guest_opts, qemu=True),
    Command(name='compare', fn=h.run_compare, help='SLUB against SLAB guests, interleaved',
            numbers=('runs', 'seconds', 'alpha', 'mde', 'counted', 'jobs', 'timeout'),
            extra=o.compare, qemu=True),
    # patches are posted against mainline: review takes the newest kernel
    Command(name='review', fn=h.review, help='a patched kernel against its base',
            kernel=kernels.NEWEST,
            numbers=('runs', 'seconds', 'alpha', 'mde', 'counted', 'jobs', 'timeout'),
            extra=o.review, qemu=True),
    Command(name='bisect', fn=h.bisect,
            help='the first commit between GOOD and BAD that breaks a KUnit case or moves a '
            'counted figure, each; the tree only read', tree=False,
            numbers=('seconds', 'alpha', 'mde', 'counted', 'jobs', 'timeout'), extra=o.bisect,
            qemu=True),
    Command(name='known-failures', fn=h.known_failures,
            help='each known upstream failure fails on the stock kernel and passes with its '
            'fix', numbers=('jobs', 'timeout'), qemu=True),
    Command(name='lava', fn=h.lava,
            help='LAVA jobs for the KUnit kernels and the guest kselftest', extra=o.lava,
            qemu=True),
    Command(name='report', fn=h.report, help='merge the KUnit results; the summary',
            tree=False),
    Command(name='registry', fn=h.registry,
            help='the declared kernels, arches and suites, for scripts', tree=False,
            out=False, extra=o.registry),
    Command(name='cache-path', fn=h.cache_path,
            help='a folder of the cache, made and checked as kloc checks it, for scripts',
            tree=False, out=False, extra=o.cache_path),
    Command(name='fetch-source', fn=h.fetch_source,
            help='Debian\'s linux-source-X.Y of sid or experimental, unpacked into the '
            'cache, not installed', tree=False, out=False, extra=o.fetch_source),
    Command(name='qemu', fn=h.qemu,
            help=f'fetch QEMU {release.SERIES[0]}.{release.SERIES[1]} from Debian '
            f'{release.SUITE} into the cache (not installed); print its bin dir',
            tree=False, out=False),
    Command(name='qemu-header', fn=h.qemu_header,
            help='print the folder with qemu-plugin.h of the QEMU kloc runs (10.0\'s, or '
            'the system\'s under KLOC_SYSTEM_QEMU=1), from Debian\'s qemu source, fetched '
            'once', tree=False, out=False),
    Command(name='run', fn=h.run_all,
            help='the whole mission: KUnit, the mutants, the kselftest, SLUB against SLAB, '
            'the ITS interrupt path; one screen and OUT/run.json', numbers=('jobs',),
            extra=o.run, qemu=True),
    Command(name='html-report', fn=h.html_report,
            help='run.json and report.html in OUT from make test\'s phases', tree=False,
            extra=o.html_report, qemu=True),
    Command(name='layout-patch', fn=h.layout_patch, kernel=kernels.NEWEST,
            help='write layout-only patch INDEX (code and data nothing uses, for make '
            'bench-aa\'s A/A\' reviews) against the tree, into OUT/bench-aa; print its path',
            extra=o.layout_patch),
    Command(name='aa-report', fn=h.aa_report,
            help='make bench-aa\'s findings from its A/A reviews in OUT/bench-aa',
            tree=False, numbers=('alpha',)),
    Command(name='bench-plugin-cost', fn=h.bench_plugin_cost,
            help='boots with no plugin, kloc-count and cache.c, interleaved: wall time and '
            'peak RSS of each', numbers=('runs', 'timeout'), qemu=True),
    Command(name='defaults', fn=h.show_defaults,
            help='every option\'s default, as make help shows them', tree=False, out=False),
    Command(name='out', fn=h.out,
            help='make OUT, marked as kloc\'s for make clean; print its path', tree=False),
    Command(name='clean', fn=h.clean,
            help='remove what kloc wrote in OUT (all of it, if kloc made it); refuse a '
            'symlink or a folder kloc did not mark', tree=False, extra=o.clean),
)


def parser() -> argparse.ArgumentParser:
    """Every command, its own options and the shared ones, each built once."""
    p = o.Parser(prog='kloc', description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest='command', required=True)
    for c in COMMANDS:
        sp = sub.add_parser(c.name, help=c.help)
        if c.tree:
            o.tree(sp, c.kernel)
        if c.out:
            o.out(sp)
        for dest in c.numbers:
            o.number(sp, c.name, dest)
        if c.extra:
            c.extra(sp)
        sp.set_defaults(fn=c.fn, qemu=c.qemu)
    return p


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        defaults.check(args.command, vars(args))
        if args.command in ('compare', 'review'):
            metrics.check_power(args.runs, args.alpha)
    except KlocError as e:
        print(f'kloc {args.command}: error: {e}', file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        if args.qemu:
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
