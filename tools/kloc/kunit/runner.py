# SPDX-License-Identifier: GPL-2.0
"""Build a tree's KUnit kernel once with kunit.py, and run it on every topology."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kloc import progress
from kloc.kunit import diagnostics, ktap, suites
from kloc.qemu import arches, topology
from kloc.atomicfile import write_text
from kloc.kunit.junit import KunitRun
from kloc.trees.sources import Tree
from kloc.paths import PACKAGE_ROOT, QEMU_CONFIGS
from kloc.procs import disk_full_hint, run_logged, tail
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
    """Beside the tree for trees the cache owns; under cache/kdir/ for KDIR trees."""
    if tree.origin != 'kdir':
        return tree.path.parent / f'build-{arch}'
    key = hashlib.sha256(str(tree.path).encode()).hexdigest()[:8]
    return cache / 'kdir' / f'{tree.label}-{key}' / f'build-{arch}'


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


def build_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault('CCACHE_DIR', str(cache / 'ccache'))
    env.setdefault('CCACHE_MAXSIZE', '8G')
    env.setdefault('CCACHE_BASEDIR', str(cache))
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
    progress.say(f'{job.tree.label}: building the {arch} KUnit kernel in {build_dir} '
                 f'(log: {log})')
    start = time.monotonic()
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
    progress.say(f'{job.tree.label}: {arch} kernel built in {time.monotonic() - start:.0f} s')


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
    cmd = [f'qemu-system-{topo.qemu_arch}', '-accel', 'kvm', '-cpu', 'host', *machine,
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


def run_topology(job: Job, name: str) -> KunitRun:
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
    write_text(meta, json.dumps(
        {'kernel': job.tree.label, 'topology': name, 'seconds': round(seconds, 2),
         'kunit_py_exit': rc, 'kunit_dir': str(ktap.kunit_dir(job.tree.path)),
         'origin': job.tree.origin},
        indent=1) + '\n')
    result = load_run(meta)
    c = result.doc.counts()
    progress.say(f'{job.tree.label} {name}: ' + ', '.join(
        f'{v} {k.value.lower()}' for k, v in c.items() if v) + f' in {seconds:.1f} s'
        + ('' if result.doc.found else ' (no KTAP output: the kernel did not boot)'))
    return result


def load_run(meta: Path) -> KunitRun:
    """A run recorded as <topology>.meta.json and <topology>.console."""
    m = json.loads(meta.read_text())
    console = meta.with_name(f'{m["topology"]}.console')
    if 'kunit_dir' not in m:
        raise KunitError(f'{meta}: written by an older kloc, it does not say which tree\'s '
                         'kunit.py parser reads its console; run make kunit again')
    doc = ktap.parse(console.read_text(errors='replace') if console.exists() else '',
                     Path(m['kunit_dir']))
    if doc.found:
        doc.suites.append(check_topology(doc, topology.get(m['topology'])))
    return KunitRun(m['kernel'], m['topology'], doc, float(m['seconds']),
                    m.get('origin', 'kdir'))


def load_runs(kunit_out: Path) -> list[KunitRun]:
    """Every run recorded under OUT/kunit/<kernel>/, for merging."""
    return [load_run(meta) for meta in sorted(kunit_out.glob('*/*.meta.json'))]


def run(job: Job) -> list[KunitRun]:
    if job.out_dir.exists():
        shutil.rmtree(job.out_dir)
    job.out_dir.mkdir(parents=True)
    runs = []
    for arch in job.arches():
        build(job, arch)
        probe_kvm(job, arch)
        runs += [run_topology(job, t) for t in job.of_arch(arch)]
    return runs
