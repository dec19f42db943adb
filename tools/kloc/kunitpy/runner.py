# SPDX-License-Identifier: GPL-2.0
"""Build a tree's KUnit kernel once with kunit.py, and run it on every topology."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kloc import progress
from kloc.kunitpy import diagnostics, known, ktap, suites
from kloc.qemu import arches, topology
from kloc.atomicfile import write_text
from kloc.kunitpy.junit import KunitRun
from kloc.trees.sources import Tree
from kloc.paths import PACKAGE_ROOT, QEMU_CONFIGS, cache_subdir, write_state_file
from kloc.procs import disk_full_hint, run_logged, tail
from kloc.paths import cache_dir, trusted_file
from kloc.trees import buildstamp, sources
from kloc.errors import KlocError

KVM_PROBE_S = 60


class KunitError(KlocError):
    """The kernel did not build, or kunit.py could not run it."""


@dataclass(frozen=True)
class Job:
    tree: Tree
    out_dir: Path
    topologies: tuple[str, ...]
    jobs: int
    timeout: int
    cache: Path
    # The tree whose kunit.py parser reads the runs (default: tree). make review
    # reads the patched kernel's runs with the base's: a patch judges nothing.
    parser: Tree | None = None
    # The tree's buildstamp digest, where the caller has it (mutants: one walk for
    # every variant); else build() walks the tree.
    tree_digest: str = ''

    @property
    def parser_tree(self) -> Tree:
        return self.parser or self.tree

    @property
    def kunit_py(self) -> Path:
        return self.tree.path / 'tools' / 'testing' / 'kunit' / 'kunit.py'

    def build_dir(self, arch: str) -> Path:
        return build_dir_for(self.tree, self.cache, arch)

    def of_arch(self, arch: str) -> list[str]:
        """This job's topologies for one architecture, in order."""
        return [t for t in self.topologies if topology.get(t).arch == arch]

    def arches(self) -> list[str]:
        seen: list[str] = []
        for t in self.topologies:
            arch = topology.get(t).arch
            if arch not in seen:
                seen.append(arch)
        return seen


def build_dir_for(tree: Tree, cache: Path, arch: str = 'arm64') -> Path:
    """Beside the tree: every tree kloc builds is a copy in the cache (trees/workcopy.py)."""
    return tree.path.parent / f'build-{arch}'


def qemu_config(name: str) -> Path:
    path = QEMU_CONFIGS / f'{name}.py'
    if not path.is_file():
        raise KunitError(f'no kunit.py QEMU config for topology {name}: {path} is missing')
    return path


def _toolchain_args(arch: str) -> list[str]:
    cross = arches.get(arch).cross_prefix()
    args = [f'--cross_compile={cross}'] if cross else []
    cc = f'{cross}gcc'
    if shutil.which('ccache'):
        args.append(f'--make_options=CC=ccache {cc}')
    return args


# ccache's configuration, written by kloc: CCACHE_CONFIGPATH names it, so that
# ccache reads neither CCACHE_DIR/ccache.conf (a planted prefix_command would
# run as root) nor the system's /etc/ccache.conf (ccache(1), "Configuration").
CCACHE_CONFIG = 'ccache.kloc.conf'
CCACHE_CONFIG_TEXT = ('# Written by kloc (tools/kloc/kunitpy/runner.py) on every build; edits\n'
                      '# are lost. ccache reads this file instead of ccache.conf in CCACHE_DIR.\n'
                      'max_size = 8G\n')


def build_env(cache: Path) -> dict[str, str]:
    """The environment of kernel builds: ccache's cache and configuration in the cache.

    kloc sets CCACHE_DIR, CCACHE_CONFIGPATH and CCACHE_BASEDIR itself (and
    CCACHE_MAXSIZE unless set); other CCACHE_* variables of the user's own
    environment pass. The cache and its ccache/ are checked to be the user's
    alone (paths.cache_subdir); the configuration is written only in a cache
    that exists (a missing one is a configuration ccache reads as empty).
    """
    env = dict(os.environ)
    config = cache / CCACHE_CONFIG
    if cache.exists() or cache.is_symlink():
        cache_subdir(cache, 'ccache')
        write_state_file(config, CCACHE_CONFIG_TEXT)
    env['CCACHE_DIR'] = str(cache / 'ccache')
    env['CCACHE_CONFIGPATH'] = str(config)
    env['CCACHE_BASEDIR'] = str(cache)
    env.setdefault('CCACHE_MAXSIZE', '8G')
    env['KLOC_CACHE'] = str(cache)
    return env


def count_objects(build_dir: Path, since: float) -> str:
    """How many objects this build has written so far."""
    n = 0
    for root, _, files in os.walk(build_dir):
        for f in files:
            if f.endswith('.o') and os.stat(os.path.join(root, f)).st_mtime >= since:
                n += 1
    return f'{n} objects compiled so far'


def build(job: Job, arch: str) -> None:
    first = job.of_arch(arch)[0]
    build_dir = job.build_dir(arch)
    cmd = [sys.executable, str(job.kunit_py), 'build', f'--build_dir={build_dir}',
           f'--arch={arch}', f'--qemu_config={qemu_config(first)}',
           f'--jobs={job.jobs}'] + [f'--kunitconfig={k}' for k in suites.kunitconfigs(arch)]
    cmd += _toolchain_args(arch)
    log = job.out_dir / f'build-{arch}.log'
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    image = build_dir / arches.get(arch).kunit_image
    digest = job.tree_digest or buildstamp.tree_digest(job.tree.path)
    inputs = build_inputs(cmd, arch, first)
    if buildstamp.unchanged(build_dir, digest, inputs, image):
        write_text(log, f'kloc: {build_dir} reused: its last build was made from this '
                   'very tree, configuration and compiler (tools/kloc/trees/buildstamp.py)\n')
        progress.say(f'{job.tree.label}: {arch} KUnit kernel reused, nothing changed since '
                     f'its last build ({time.monotonic() - start:.1f} s to check)')
        return
    progress.say(f'{job.tree.label}: building the {arch} KUnit kernel in {build_dir} '
                 f'(log: {log})')
    buildstamp.begin(build_dir)
    since = time.time()
    rc = run_logged(cmd, log, f'{job.tree.label} {arch} build', cwd=job.tree.path,
                    env=build_env(job.cache), status=lambda: count_objects(build_dir, since))
    if rc != 0:
        raise KunitError(f'{job.tree.label}: the kernel did not build (kunit.py exited {rc}); '
                         f'{disk_full_hint(log)}last lines of {log}:\n{tail(log)}')
    warnings = suite_warnings(log.read_text(errors='replace'))
    if warnings:
        raise KunitError(f'{job.tree.label}: the kernel built, but modpost warns about the '
                         f'suites\' code (see {log}):\n' + '\n'.join(warnings))
    buildstamp.record(build_dir, digest, inputs, image)
    progress.say(f'{job.tree.label}: {arch} kernel built in {time.monotonic() - start:.0f} s')


def build_inputs(cmd: list[str], arch: str, first: str) -> list[str]:
    """What a KUnit build is made from besides the tree: kunit.py's command line, the
    .kunitconfigs and QEMU config it reads, and the compiler."""
    files = [*suites.kunitconfigs(arch), qemu_config(first)]
    return [*cmd, *(Path(f).read_text() for f in files),
            buildstamp.compiler(f'{arches.get(arch).cross_prefix()}gcc')]


def suite_warnings(build_log: str) -> list[str]:
    """modpost's warnings (section mismatches, say) that name a suite's function."""
    prefixes = suites.symbol_prefixes()
    return [line for line in build_log.splitlines()
            if line.startswith('WARNING: modpost:') and any(p in line for p in prefixes)]


def probe_kvm(job: Job, arch: str) -> None:
    """Boot the kernel once under KVM, where KVM exists, and record whether it ran.

    A /dev/kvm that lets a guest start but not boot is known to happen:
    only a kernel that reaches its reboot shows that KVM works.
    """
    topo = topology.get(job.of_arch(arch)[0])
    if not topology.kvm_possible(topo.qemu_arch) or \
            topology.kvm_proven(topo.qemu_arch, job.cache) is not None:
        return
    a = arches.get(arch)
    kernel = job.build_dir(arch) / a.kunit_image
    console, machine = a.console, list(a.machine)
    cmd = [topo.qemu_binary, '-accel', 'kvm', '-cpu', 'host', *machine,
           '-m', '512', '-smp', '2', '-nodefaults', '-nographic', '-no-reboot',
           '-serial', 'stdio', '-kernel', str(kernel), '-append',
           f'console={console} panic=-1 kunit.filter_glob=kloc-kvm-probe kunit_shutdown=reboot']
    progress.say(f'probing whether KVM boots a {arch} guest here (up to {KVM_PROBE_S} s)')
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors='replace',
                           timeout=KVM_PROBE_S, stdin=subprocess.DEVNULL)
        ok = r.returncode == 0 and 'Linux version' in r.stdout
    except subprocess.TimeoutExpired:
        ok = False
    path = topology.kvm_verdict_path(topo.qemu_arch, job.cache)
    write_text(path, json.dumps({'ok': ok, 'command': cmd}, indent=1) + '\n')
    progress.say(f'KVM {"works" if ok else "does not boot a guest"} here; '
                 f'{"using it" if ok else "using TCG"} (verdict in {path})')


def extract_ktap(console: str) -> str:
    """The KTAP part of a console log, without printk timestamps."""
    lines = [ktap.TIMESTAMP.sub('', x) for x in console.splitlines()]
    for i, line in enumerate(lines):
        if ktap.HEADER.match(line):
            return '\n'.join(lines[i:]) + '\n'
    return ''


def _diagnostics(doc: ktap.Document, key: str) -> list[int]:
    """Every value of one key in the suites' "kloc:" lines (see diagnostics.py)."""
    return diagnostics.integers((line for s in doc.suites for _, leaf in s.leaves()
                                 for line in leaf.log), key)


def _expect(name: str, seen: list[int], want: int, what: str) -> ktap.Result:
    case = ktap.Result(name, log=[f'expected {what} {want}, the kernel reported {seen}'])
    if not seen:
        case.status, case.reason = ktap.Status.SKIP, f'no suite reported the {what}'
    elif all(n == want for n in seen):
        case.status = ktap.Status.PASS
    else:
        case.status = ktap.Status.FAIL
        case.reason = f'{what} {seen}, the topology says {want}'
    return case


def check_topology(doc: ktap.Document, topo: topology.Topology) -> ktap.Result:
    """Did the kernel see the machine the topology describes?"""
    cases = [_expect('online_nodes', _diagnostics(doc, diagnostics.ONLINE_NODES),
                     len(topo.nodes), 'online nodes')]
    if topo.arch == 'arm64':
        cases.append(_expect('its_numa_node_from_dtb',
                             _diagnostics(doc, diagnostics.ITS_NUMA_NODE),
                             -1 if topo.its_node is None else topo.its_node,
                             'ITS numa_node'))
    bad = any(c.status == ktap.Status.FAIL for c in cases)
    return ktap.Result('kloc_topology', status=ktap.Status.FAIL if bad else ktap.Status.PASS,
                       children=cases)


# qemu-system-<arch> for kunit.py exec: drops the accelerators 7.x's kunit.py
# asks for, so that the QEMU config's (the boot probe's choice) is the one used.
QEMU_ACCEL_SHIM = PACKAGE_ROOT / 'tools' / 'qemu-accel'


def exec_env(cache: Path) -> dict[str, str]:
    """kunit.py exec's environment: the build's, with the QEMU wrapper first on PATH."""
    env = build_env(cache)
    path = env.get('PATH', os.defpath)
    env['KLOC_QEMU_PATH'] = path
    env['PATH'] = f'{QEMU_ACCEL_SHIM}{os.pathsep}{path}'
    return env


def run_topology(job: Job, name: str, fixes: tuple[str, ...] = ()) -> KunitRun:
    """fixes: the known failures whose fix the tree has (known.fixes_in())."""
    topo = topology.get(name)
    out = job.out_dir
    build_dir = job.build_dir(topo.arch)
    cmd = [sys.executable, str(job.kunit_py), 'exec', f'--build_dir={build_dir}',
           f'--arch={topo.arch}', f'--qemu_config={qemu_config(name)}',
           f'--timeout={job.timeout}',
           f'--json={out / (name + ".json")}']
    progress.say(f'{job.tree.label}: running on {name} ({topo.about})')
    start = time.monotonic()
    rc = run_logged(cmd, out / f'{name}.log', f'{job.tree.label} {name}',
                    cwd=job.tree.path, env=exec_env(job.cache))
    seconds = time.monotonic() - start
    console_src = build_dir / 'test.log'
    console = console_src.read_text(errors='replace') if console_src.exists() else ''
    write_text(out / f'{name}.console', console)
    write_text(out / f'{name}.ktap', extract_ktap(console))
    meta = out / f'{name}.meta.json'
    remember_parser(job.parser_tree.path, job.cache)
    write_text(meta, json.dumps(
        {'kernel': job.tree.label, 'topology': name, 'seconds': round(seconds, 2),
         'kunit_py_exit': rc, 'kunit_dir': str(ktap.kunit_dir(job.parser_tree.path)),
         'origin': job.tree.origin, 'fixes': list(fixes)},
        indent=1) + '\n')
    result = load_run(meta, job.parser_tree)
    c = result.doc.counts()
    progress.say(f'{job.tree.label} {name}: ' + ', '.join(
        f'{v} {k.value.lower()}' for k, v in c.items() if v) + f' in {seconds:.1f} s'
        + ('' if result.doc.found else ' (no KTAP output: the kernel did not boot)'))
    return result


# A run's <topology>.meta.json, as run_topology writes it: a file under OUT,
# which kloc does not trust (docs/design.md, "Trust boundaries"). It is read
# whole only when it is a regular file this small, and every field is checked.
META_MAX = 1 << 16
ORIGINS = ('debian', 'kdir', 'review', 'mutant')
KNOWN_NAMES = frozenset(k.name for k in known.KNOWN)
_LABEL = re.compile(r'linux-[0-9]{1,4}\.[0-9]{1,4}(?:\.[0-9]{1,6})?', re.ASCII)
_SERIES_DIR = re.compile(r'linux-[0-9]{1,4}\.[0-9]{1,4}', re.ASCII)
# The cache's record of the trees whose kunit.py parser kloc read runs with, one
# file per tree (named by the hash of its path): see remember_parser().
PARSER_TREES = 'kunit-trees'


def _damaged(meta: Path, why: str) -> KunitError:
    return KunitError(f'{meta} is damaged ({why}); it is a result of make kunit: run make '
                      'kunit again to write it anew, or remove it')


def read_meta(meta: Path) -> dict[str, Any]:
    """A run's meta.json, every field checked; KunitError naming the file when it is not
    one run_topology could have written."""
    fd = os.open(meta, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)   # a FIFO: no wait
    with os.fdopen(fd, 'rb') as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _damaged(meta, 'not a regular file')
        data = f.read(META_MAX + 1)
    if len(data) > META_MAX:
        raise _damaged(meta, f'over {META_MAX} bytes')
    try:
        m = json.loads(data.decode('utf-8'))
    except ValueError:          # not UTF-8, not JSON
        raise _damaged(meta, 'not JSON') from None
    if not isinstance(m, dict):
        raise _damaged(meta, f'a JSON {type(m).__name__}, not an object')
    topo = meta.name.removesuffix('.meta.json')

    def want(key: str, ok: bool, what: str) -> None:
        if not ok:
            shown = json.dumps(m.get(key))
            raise _damaged(meta, f'"{key}": {shown[:40]}{"..." if len(shown) > 40 else ""} '
                           f'is not {what}')
    kernel = m.get('kernel')
    want('kernel', isinstance(kernel, str) and bool(_LABEL.fullmatch(kernel)),
         'a kernel label such as linux-6.12.57')
    want('topology', m.get('topology') == topo and topo in topology.TOPOLOGIES,
         f'the topology its name says ({topo})')
    seconds = m.get('seconds')
    want('seconds', isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
         and math.isfinite(seconds) and seconds >= 0, 'a number of seconds')
    if 'kunit_py_exit' in m:
        want('kunit_py_exit', isinstance(m['kunit_py_exit'], int)
             and not isinstance(m['kunit_py_exit'], bool), 'an exit code')
    if 'origin' in m:
        want('origin', m['origin'] in ORIGINS, 'one of ' + ', '.join(ORIGINS))
    if 'fixes' in m:
        fixes = m['fixes']
        want('fixes', isinstance(fixes, list) and all(
            isinstance(f, str) and f in KNOWN_NAMES for f in fixes),
            'a list of known failures\' names')
    if 'kunit_dir' in m:
        want('kunit_dir', isinstance(m['kunit_dir'], str) and '\0' not in m['kunit_dir']
             and os.path.isabs(m['kunit_dir']), 'an absolute path')
    return m


def _tree_key(tree: Path) -> str:
    return hashlib.sha256(os.fsencode(os.path.abspath(tree))).hexdigest()


def remember_parser(tree: Path, cache: Path) -> None:
    """Record in the cache (the user's alone, paths.py) that kloc resolved this tree
    itself and reads runs with its kunit.py parser: a meta.json naming its kunit_dir
    is read with that parser later (make report), and no other directory's."""
    record = cache_subdir(cache, PARSER_TREES) / f'{_tree_key(tree)}.json'
    write_state_file(record, json.dumps({'tree': os.path.abspath(tree)}) + '\n')


def _remembered(tree: Path, cache: Path) -> bool:
    """Whether remember_parser() recorded tree in the cache."""
    record = cache / PARSER_TREES / f'{_tree_key(tree)}.json'
    if not os.path.lexists(record):
        return False
    cache_subdir(cache, PARSER_TREES)       # the user's alone, or CacheTrustError
    try:
        return bool(json.loads(trusted_file(record).read_text()) ==
                    {'tree': os.path.abspath(tree)})
    except ValueError:
        return False


def _extracted(tree: Path, cache: Path) -> bool:
    """Whether tree is kloc's copy of a Debian tree it extracted into the cache
    (trees/linux-X.Y/src, the copy of trees/linux-X.Y/stock, whose stamp says so)."""
    series = tree.parent.name
    if tree != cache / 'trees' / series / 'src' or not _SERIES_DIR.fullmatch(series) or \
            not (tree.parent / sources.STOCK / sources.STAMP).is_file():
        return False
    cache_subdir(cache, 'trees', series)    # the user's alone, or CacheTrustError
    return True


def parser_dir(meta: Path, recorded: str | None, tree: Tree | None = None) -> Path:
    """The kunit.py directory whose parser reads a run: the tree's the caller resolved,
    else the one its meta.json records, but only where that is the kunit.py of a tree
    kloc resolved itself: a Debian tree it extracted into its cache, or a tree it
    recorded there (remember_parser). A result file never names code kloc runs."""
    if tree is not None:
        return ktap.kunit_dir(tree.path)
    if recorded is None:
        raise KunitError(f'{meta}: written by an older kloc, it does not say which tree\'s '
                         'kunit.py parser reads its console; run make kunit again')
    claimed = Path(os.path.abspath(recorded))
    root = claimed.parent.parent.parent
    if claimed == ktap.kunit_dir(root):
        cache = cache_dir()
        if _extracted(root, cache) or _remembered(root, cache):
            return ktap.kunit_dir(root)
    raise KunitError(f'{meta}: its kunit_dir {claimed} is not the kunit.py of a kernel tree '
                     'kloc used itself, and kloc runs no code a result file names; run make '
                     'kunit again (with the same KERNEL= or KDIR=) to write the run anew')


def load_run(meta: Path, tree: Tree | None = None) -> KunitRun:
    """A run recorded as <topology>.meta.json and <topology>.console.

    tree: the tree whose kunit.py parser reads it, where the caller resolved
    it; else the recorded one, if kloc resolved it itself (parser_dir).
    """
    m = read_meta(meta)
    where = parser_dir(meta, m.get('kunit_dir'), tree)
    console = meta.with_name(f'{m["topology"]}.console')
    doc = ktap.parse(console.read_text(errors='replace') if console.is_file() else '', where)
    if doc.found:
        doc.suites.append(check_topology(doc, topology.get(m['topology'])))
    return KunitRun(m['kernel'], m['topology'], doc, float(m['seconds']),
                    m.get('origin', 'kdir'), tuple(m.get('fixes', ())))


def load_runs(kunit_out: Path) -> list[KunitRun]:
    """Every run recorded under OUT/kunit/<kernel>/, for merging (not those of a run
    still under way or that failed, in OUT/kunit/.<kernel>.new/)."""
    return [load_run(meta) for meta in sorted(kunit_out.glob('*/*.meta.json'))
            if not meta.parent.name.startswith('.')]


def _beside(out_dir: Path, what: str) -> Path:
    """A hidden folder beside out_dir: .<name>.new (the run under way), .<name>.old."""
    return out_dir.with_name(f'.{out_dir.name}.{what}')


def run(job: Job) -> list[KunitRun]:
    """Build and run job's kernel on its topologies; its results replace the earlier
    ones in job.out_dir only once every topology has run: until then they are written
    in .<name>.new beside it (kept after a failure, for its logs), and the earlier
    results stay where they were."""
    if not job.topologies:
        raise KunitError(f'{job.tree.label}: no topology to run; the earlier results in '
                         f'{job.out_dir} are kept')
    new, old = _beside(job.out_dir, 'new'), _beside(job.out_dir, 'old')
    for leftover in (new, old):     # of a run that failed or was stopped
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover)
        elif os.path.lexists(leftover):
            leftover.unlink()
    new.mkdir(parents=True)
    # one walk of the tree for every arch's build (none of them writes it)
    trial = dataclasses.replace(job, out_dir=new, tree_digest=job.tree_digest or
                                buildstamp.tree_digest(job.tree.path))
    runs = []
    fixes = known.fixes_in(job.tree.path, job.tree.version)
    for arch in trial.arches():
        build(trial, arch)
        probe_kvm(trial, arch)
        runs += [run_topology(trial, t, fixes) for t in trial.of_arch(arch)]
    if os.path.lexists(job.out_dir):
        os.rename(job.out_dir, old)
    os.rename(new, job.out_dir)
    if os.path.lexists(old):
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        else:
            old.unlink()
    return runs
