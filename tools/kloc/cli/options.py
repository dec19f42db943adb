# SPDX-License-Identifier: GPL-2.0
"""The command line's options, each declared once: the shared ones (the tree, OUT,
the numbers of defaults.py, yes-or-no flags, TOPOLOGIES, the LAVA lab) and each
command's own."""

from __future__ import annotations

import argparse
from collections.abc import Callable
import os
import re
from typing import NoReturn

from kloc import defaults
from kloc.guests import guest
from kloc.its import model
from kloc.qemu import arches, topology
from kloc.trees import archive, kernels


class Parser(argparse.ArgumentParser):
    """Usage errors on one line, exit 2, like every other kloc error."""

    def error(self, message: str) -> NoReturn:
        # A value refused by its type (defaults.number, boolean, one_line; TOPOLOGIES)
        # names its Make variable: the option's name adds nothing.
        m = re.match(r'argument --[\w-]+: ([A-Z_]+=.*)', message, re.DOTALL)
        if m:
            message = m.group(1)
        self.exit(2, f'{self.prog}: error: {message} (see --help)\n')


def number(sp: argparse.ArgumentParser, command: str, dest: str) -> None:
    """A numeric option shared by several commands, from the one table of defaults."""
    o = defaults.BY_DEST[dest]
    sp.add_argument(f'--{dest}', type=defaults.number(dest, command),
                    default=(int if o.integer else float)(defaults.value(dest, command)),
                    help=f'{o.about} (make: {o.make}=)')


def _topologies_type(text: str) -> tuple[str, ...]:
    try:
        return topology.parse_names(text)
    except topology.TopologyError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _boolean(sp: argparse.ArgumentParser, flag: str, make: str, text: str,
             default: str = '') -> None:
    """A yes-or-no option: --flag alone is yes; --flag 1, 0 or '' as make passes
    NAME=; anything else is refused (defaults.boolean)."""
    sp.add_argument(f'--{flag}', nargs='?', const=True, default=default,
                    type=defaults.boolean(make, text), metavar='1|0',
                    help=f'{text} (make: {make}=1)')


def _auto_boolean(make: str) -> Callable[[str], bool | str]:
    """A yes, no or automatic option: 1, 0, or nothing (kloc decides)."""
    def parse(value: str) -> bool | str:
        if value == '':
            return ''
        if value in ('0', '1'):
            return value == '1'
        raise argparse.ArgumentTypeError(f'{make}={defaults.shown(value)} is not 0 or 1: '
                                         f'give {make}=1, {make}=0, or nothing for the '
                                         'default')
    return parse


def tree(sp: argparse.ArgumentParser, kernel: str) -> None:
    sp.add_argument('--kernel', default=os.environ.get('KERNEL') or kernel,
                    help='Debian linux-source version: ' + ' or '.join(kernels.names())
                    + f' (default {kernel})')
    sp.add_argument('--kdir', default=os.environ.get('KDIR', ''),
                    type=defaults.one_line('KDIR'),
                    help='your own kernel tree (wins over --kernel)')
    _boolean(sp, 'force', 'FORCE', 'run the mutants on a tree with uncommitted edits',
             os.environ.get('FORCE', ''))


def out(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--out', default='out', type=defaults.one_line('OUT', empty=False),
                    help='where results go (make: OUT=)')


def topologies(sp: argparse.ArgumentParser) -> None:
    """TOPOLOGIES=, parsed into names (topology.parse_names): all of them when empty."""
    sp.add_argument('--topologies', default='', type=_topologies_type,
                    help='KUnit topologies, comma-separated; default: all of '
                    + ','.join(topology.TOPOLOGIES))


def _artifacts_url(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--artifacts-url', default='',
                    help='where a LAVA lab\'s workers fetch the images (OUT/.../artifacts, '
                    'published); default: file:// URLs, for a worker on this machine '
                    '(make: LAVA_ARTIFACTS_URL=)')


def builddir(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--arch', default='arm64', choices=sorted(arches.ARCHES))


def guest_opts(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--arch', default='x86_64', choices=sorted(arches.ARCHES))
    sp.add_argument('--alloc', default='slub', choices=guest.ALLOCATORS)
    sp.add_argument('--topology', default='',
                    help='default: the arch\'s 2-node topology (arm64: arm64_2n_its1)')
    its_remote_ns(sp)


def its_remote_ns(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--its-remote-ns', type=float, default=model.PENALTY_NS,
                    help='the latency model\'s extra ns per remote ITS table read '
                    f'(default {model.PENALTY_NS:g}; docs/review.md) (make: ITS_REMOTE_NS=)')


def compare(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--arch', default='x86_64', choices=sorted(arches.ARCHES))
    sp.add_argument('--topology', default='', help='default: the arch\'s 2-node topology')
    sp.add_argument('--a', default='slub', choices=guest.ALLOCATORS)
    sp.add_argument('--b', default='slab', choices=guest.ALLOCATORS)
    sp.set_defaults(kernel=os.environ.get('KERNEL', kernels.with_slab()))
    _lab(sp)


def _lab(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--lava-url', default=os.environ.get('LAVA_URL', ''),
                    help='run the timed runs as jobs of this LAVA server (make: LAVA_URL=); '
                    'the token from --lava-token-file or $LAVA_TOKEN')
    sp.add_argument('--lava-token-file', default=os.environ.get('LAVA_TOKEN_FILE', ''),
                    help='a file holding the LAVA token (make: LAVA_TOKEN_FILE=)')
    _artifacts_url(sp)


def review(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--patch', default='', help='a -p1 diff, git format-patch mail or mbox')
    _boolean(sp, 'aa', 'AA', 'review the base kernel against itself (A/A)')
    sp.add_argument('--tag', default='0', help='names an A/A review\'s output dir')
    topologies(sp)
    sp.add_argument('--bench-topology', default='x86_64_2n')
    sp.add_argument('--no-kunit', action='store_true', help='the loopback A/B only')
    _boolean(sp, 'bench', 'BENCH', 'the loopback A/B; BENCH=0: KUnit only, no guest is '
             'built or booted', default='1')
    _boolean(sp, 'review-package', 'REVIEW_PACKAGE', 'review a patch that changes the '
             'package\'s tests or hooks, or KUnit (the report says so first)')
    _boolean(sp, 'timed', 'TIMED', 'boot the timed runs (RUNS a side) beside the counted '
             'boots, shown and not judged; without it they run only where no counted boots '
             'are (COUNTED=0) or for a LAVA lab')
    sp.add_argument('--arch', default='', choices=('',) + tuple(sorted(arches.ARCHES)),
                    help='arm64: the ITS interrupt path as well (make: ARCH=)')
    sp.add_argument('--its', default='', type=_auto_boolean('ITS'), metavar='1|0',
                    help='the MSI workload in arm64 guests of both kernels on the ITS '
                    'topologies; default: for a patch to the ITS driver, or ARCH=arm64 '
                    '(make: ITS=1 or ITS=0)')
    its_remote_ns(sp)
    _lab(sp)


def bisect(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--kdir', default=os.environ.get('KDIR', ''), type=defaults.one_line('KDIR'),
                    help='a git clone of Linux, only read (make: KDIR=)')
    sp.add_argument('--good', default='', type=defaults.one_line('GOOD'),
                    help='the last revision known good (make: GOOD=)')
    sp.add_argument('--bad', default='', type=defaults.one_line('BAD'),
                    help='the first revision known bad (make: BAD=)')
    topologies(sp)
    sp.add_argument('--bench-topology', default='x86_64_2n',
                    help='where the counted loopback boots run (make: TOPOLOGY=)')
    _boolean(sp, 'bench', 'BENCH', 'the counted loopback figures as signals; BENCH=0: KUnit '
             'only, no guest is built or booted', default='1')
    _boolean(sp, 'kunit', 'KUNIT', 'KUnit cases as signals; KUNIT=0: the counted figures '
             'only', default='1')


def run(sp: argparse.ArgumentParser) -> None:
    topologies(sp)
    sp.add_argument('--timeout', type=defaults.number('timeout', 'run'), default=None,
                    help='seconds a boot may take (default: each part\'s own; make: TIMEOUT=)')


def html_report(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--phases', required=True, help='the phases, one JSON line each')
    sp.add_argument('--title', default='make test')
    sp.add_argument('--label', default='', help='what ran, e.g. the kernels')


def lava(sp: argparse.ArgumentParser) -> None:
    topologies(sp)
    sp.add_argument('--timeout', type=defaults.number('timeout', 'lava'), default=None,
                    help='seconds a job\'s test may take (default: '
                    f'{defaults.value("timeout", "kunit")} for KUnit, '
                    f'{defaults.value("timeout", "guest")} for the kselftest; make: TIMEOUT=)')
    sp.add_argument('--seconds', type=defaults.number('seconds', 'lava'),
                    default=float(defaults.value('seconds', 'guest')),
                    help='each kselftest phase\'s measuring time (make: SECONDS=)')
    _artifacts_url(sp)
    _boolean(sp, 'run', 'RUN', 'run the jobs here with lava-run and read the results back')
    sp.add_argument('--compare', action='store_true',
                    help='with --run: compare with make kunit\'s runs in OUT/kunit and with '
                    'direct boots of the guests')
    sp.add_argument('--direct-boots', type=int, default=3,
                    help='with --compare: direct boots of each guest (default 3)')
    sp.add_argument('--only', default='', help='with --run: these jobs only (comma-separated '
                    'names: kunit-x86_64_2n, kselftest-x86_64-slub)')


def fetch_source(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--series', default='', help='e.g. 7.2 (default: the newest of --major)')
    sp.add_argument('--major', type=int, default=7)
    sp.add_argument('--suite', default='', choices=('',) + archive.SUITES,
                    help='where --series comes from (default sid)')


REGISTRY_FACTS = ('kernels', 'default', 'newest', 'alpha', 'review-counted', 'make-test-kernels',
                  'make-test-topologies', 'known-failures', 'packages', 'cross',
                  'lint-objects', 'lava-dictionary', 'deps', 'cache')


def cache_path(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('parts', nargs='*', help='the folder under the cache, level by level')
    sp.add_argument('--file', action='append', default=[],
                    help='a file in that folder to check where it exists (repeat)')


def registry(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('what', choices=REGISTRY_FACTS)
    sp.add_argument('arch', nargs='?', default='arm64',
                    help='the arch (cross), or the kernel (make-test-topologies, '
                    'known-failures)')


def layout_patch(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('index', type=int, help='which patch: 0, 1, ... (they rotate over '
                    'files and places)')


def clean(sp: argparse.ArgumentParser) -> None:
    sp.add_argument('--check', action='store_true',
                    help='only say whether make clean may remove OUT (exit 2 if not)')
