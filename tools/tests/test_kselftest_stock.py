# SPDX-License-Identifier: GPL-2.0
"""lo_counters the stock way, on a pristine tree, as tuxmake, KernelCI and LKFT run it.

For each supported kernel: a pristine tree in a temporary directory (the
key files, every file the series touches, scripts/subarch.include and all
of tools/testing/selftests), taken from $KDIR, from the cached Debian tree
(its saved originals where the package is installed: the cache is only
read) or from Debian's tarball. kloc makes its copy of it, the series applied
(kloc tree --kdir); then, in the copy, on this machine's kernel:

  make -C tools/testing/selftests TARGETS=lo_counters install
  ./run_kselftest.sh -c lo_counters            (from the install dir)
  make -C tools/testing/selftests gen_tar      (the default TARGETS)

must build, run the default run (no options) within the settings timeout
to a KTAP result (pass, or skip where no network namespace may be made),
and pack lo_counters; the tree itself must be byte for byte as it was, mtimes
and modes too. Skipped only when no tree can be found.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
from dataclasses import dataclass
from pathlib import Path

from kloc.guests import guest
from kloc.lava import export as lava_export
from kloc.qemu import topology
from kloc.series import planning
from kloc.paths import PACKAGE_ROOT
from kloc.trees import kernels, sources
from kloc.paths import cache_dir
from kloc.version import KernelVersion, tree_version

from .helpers import cli, debian_tree, installed_tree, tree_snapshot

TOOLS = Path(__file__).resolve().parents[1]
KSFT = 'tools/testing/selftests'
TARGET = 'lo_counters'
EXTRA = ('scripts/subarch.include',)
TARGETS_LINE = re.compile(r'^TARGETS \+= (\S+)$', re.M)
RESULT = re.compile(rf'^(not )?ok 1 selftests: {TARGET}: {TARGET}(.*)$', re.M)


@dataclass(frozen=True)
class Source:
    """Where a pristine tree of one kernel comes from."""
    kernel: str
    tree: Path | None = None        # a tree (pristine through its .kloc/ if installed)
    tarball: Path | None = None     # else Debian's linux-source tarball


def find_source(kernel: str) -> Source | None:
    cached = cache_dir() / 'trees' / f'linux-{kernel}' / 'src'
    if (cached / KSFT / 'Makefile').is_file():
        return Source(kernel, tree=cached)
    tarball = sources.tarball_path(kernel)
    if tarball.is_file():
        return Source(kernel, tarball=tarball)
    return None


def sources_to_test() -> list[Source]:
    kdir = os.environ.get('KDIR', '')
    if kdir:
        return [Source('KDIR', tree=Path(kdir).expanduser().resolve())]
    found = [find_source(k) for k in kernels.names()]
    return [s for s in found if s is not None]


def copy_pristine(tree: Path, dest: Path) -> None:
    """The parts of tree the test needs, as they were before the package."""
    files, read = planning.pristine_reader(tree)          # reads only
    version = tree_version(tree)
    added = {rel for rel, had in files.items() if not had}
    emptied: set[Path] = set()

    def ignore(where: str, names: list[str]) -> set[str]:
        rel_dir = Path(where).relative_to(tree)
        skip = {n for n in names if str(rel_dir / n) in added}
        if skip and len(skip) == len(names):
            emptied.add(dest / rel_dir)
        return skip
    shutil.copytree(tree / KSFT, dest / KSFT, symlinks=True, ignore=ignore)
    for d in sorted(emptied, reverse=True):
        while d != dest and d.is_dir() and not any(d.iterdir()):
            d.rmdir()
            d = d.parent
    for rel in set(sources.checked_files(version)) | set(EXTRA) | set(files):
        data = read(rel)
        if data is None:
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        target.write_bytes(data)
        if (tree / rel).exists():
            os.chmod(target, stat.S_IMODE((tree / rel).stat().st_mode))


def extract_pristine(tarball: Path, kernel: str, dest: Path) -> None:
    top = f'linux-source-{kernel}'
    version = KernelVersion.parse(kernel)
    parts = [KSFT, *EXTRA, *sources.checked_files(version)]
    dest.mkdir(parents=True)
    # The files the series adds are not in the tarball: tar names them and exits 2.
    r = subprocess.run(['tar', '-xJf', str(tarball), '-C', str(dest), '--strip-components=1',
                        '--ignore-failed-read', *[f'{top}/{p}' for p in parts]],
                       capture_output=True, text=True)
    for rel in ('Makefile', f'{KSFT}/Makefile', f'{KSFT}/lib.mk'):
        assert (dest / rel).is_file(), f'{tarball} has no {rel}: {r.stderr}'


snapshot = tree_snapshot


def make(ksft: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(['make', '-C', str(ksft), *args], capture_output=True, text=True)


def settings_timeout(path: Path) -> int:
    m = re.search(r'^timeout=(\d+)$', path.read_text(), re.M)
    assert m, f'{path} sets no timeout'
    return int(m.group(1))


class StockKselftest(unittest.TestCase):
    def setUp(self) -> None:
        for tool in ('make', 'cc', 'rsync', 'tar'):
            if shutil.which(tool) is None:
                self.fail(f'{tool} is missing; the stock kselftest build needs it '
                          '(tools/deps.sh installs it)')
        self.found = sources_to_test()
        if not self.found:
            self.skipTest(f'no kernel tree: none cached in {cache_dir()}/trees, no '
                          f'linux-source tarball in {sources.source_dir()}, no KDIR '
                          '(make tree, or make deps)')

    def test_stock_install_run_and_gen_tar_leave_kdir_alone(self) -> None:
        for src in self.found:
            with self.subTest(kernel=src.kernel), \
                    tempfile.TemporaryDirectory(prefix='kloc-ksft-stock-') as tmp:
                self.round_trip(src, Path(tmp))

    def round_trip(self, src: Source, tmp: Path) -> None:
        times: dict[str, float] = {}
        start = last = time.monotonic()

        def lap(what: str) -> None:
            nonlocal last
            now = time.monotonic()
            times[what] = now - last
            last = now
        root = tmp / 'linux'
        if src.tree is not None:
            copy_pristine(src.tree, root)
        else:
            assert src.tarball is not None
            extract_pristine(src.tarball, src.kernel, root)
        lap('copy')
        before = snapshot(root)
        # kloc's copy of the tree, the series applied; the tree itself is only read
        r = cli('tree', '--kdir', str(root), env={'KLOC_CACHE': str(tmp / 'cache')})
        self.assertEqual(r.returncode, 0, r.stderr)
        ksft = Path(r.stdout.strip()) / KSFT
        lap('copy, the series applied')
        self.check_installed(ksft)

        # make -C tools/testing/selftests TARGETS=lo_counters install
        inst = tmp / 'install'
        r = make(ksft, f'TARGETS={TARGET}', 'install', f'INSTALL_PATH={inst}',
                 f'O={tmp / "build"}')
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for name in (TARGET, 'config', 'settings'):
            self.assertTrue((inst / TARGET / name).is_file(), f'{name} is not installed')
        self.assertIn(f'{TARGET}:{TARGET}', (inst / 'kselftest-list.txt').read_text())
        lap('make install')

        # run_kselftest.sh -c lo_counters, from the install dir: the default run
        timeout = settings_timeout(inst / TARGET / 'settings')
        run_start = time.monotonic()
        r = subprocess.run(['./run_kselftest.sh', '-c', TARGET], cwd=inst,
                           capture_output=True, text=True, timeout=timeout + 30)
        secs = time.monotonic() - run_start
        lap('run_kselftest.sh')
        self.check_run(r, secs, timeout)
        if os.geteuid() == 0 and shutil.which('setpriv') and shutil.which('unshare'):
            self.check_as_user(inst, timeout)
            lap('run_kselftest.sh as an ordinary user')

        # gen_tar with the Makefile's own TARGETS: all but lo_counters skipped
        others = sorted(set(TARGETS_LINE.findall((ksft / 'Makefile').read_text())) - {TARGET})
        r = make(ksft, 'gen_tar', f'SKIP_TARGETS={" ".join(others)}', 'INSTALL_DEP_TARGETS=',
                 f'O={tmp / "tar-build"}')
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        tarball = tmp / 'tar-build/kselftest/kselftest_install/kselftest-packages/kselftest.tar.gz'
        with tarfile.open(tarball) as t:
            names = {n.lstrip('./') for n in t.getnames()}
        for name in (f'{TARGET}/{TARGET}', f'{TARGET}/config', f'{TARGET}/settings',
                     'run_kselftest.sh', 'kselftest-list.txt'):
            self.assertIn(name, names, f'gen_tar\'s {tarball.name} lacks {name}')
        lap('gen_tar')

        self.assertEqual(snapshot(root), before, 'the tree (KDIR) was written')
        print(f'\n{self.id()}: linux {tree_version(root)}: '
              f'{time.monotonic() - start:.1f} s (' +
              ', '.join(f'{k} {v:.1f} s' for k, v in times.items()) + ')', file=sys.stderr)

    def check_as_user(self, inst: Path, timeout: int) -> None:
        """As an ordinary user (nobody), the way tools/kselftest-host.sh runs it there:
        in a user namespace of its own, where the test may make its network namespace.
        Without one it can only skip."""
        script = (PACKAGE_ROOT / 'tools' / 'kselftest-host.sh').read_text()
        m = re.search(r'^\s*userns=\(([^)]+)\)$', script, re.M)
        assert m is not None, 'tools/kselftest-host.sh sets no user namespace command'
        userns = m.group(1).split()
        user = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups']
        with tempfile.TemporaryDirectory(prefix='kloc-ksft-user-') as d:
            os.chmod(d, 0o755)
            dest = Path(d) / 'install'
            shutil.copytree(inst, dest)
            for p in (dest, *dest.rglob('*')):
                p.chmod(p.stat().st_mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
                        | (0o111 if p.is_dir() or p.stat().st_mode & 0o100 else 0))
            os.chown(d, 65534, 65534)       # the user's output file, as kselftest-host.sh's

            def as_user(*wrap: str) -> tuple[subprocess.CompletedProcess[str], str, float]:
                # The runner reopens /dev/stdout: a file the user owns (not our pipe),
                # appended to, as kselftest-host.sh's.
                start = time.monotonic()
                out = Path(d) / f'{len(wrap)}.ktap'
                r = subprocess.run([*user, 'sh', '-c', f'{" ".join(wrap)} ./run_kselftest.sh '
                                    f'-c {TARGET} >>../{out.name} 2>&1'], cwd=dest,
                                   capture_output=True, text=True, timeout=timeout + 30)
                return r, out.read_text(), time.monotonic() - start
            _, plain, _ = as_user()
            self.assertIn(f'ok 1 selftests: {TARGET}: {TARGET} # SKIP', plain,
                          'an ordinary user without a user namespace can only skip')
            r, out, secs = as_user(*userns)
            self.check_run(subprocess.CompletedProcess(r.args, r.returncode, out, r.stderr),
                           secs, timeout)
            self.assertNotIn('# SKIP', out.splitlines()[-1],
                             f'{" ".join(userns)}: the test still skipped:\n{out}')

    def check_installed(self, ksft: Path) -> None:
        """The hook: lo_counters in TARGETS in sorted position; its .gitignore and config."""
        targets = TARGETS_LINE.findall((ksft / 'Makefile').read_text())
        self.assertEqual(targets.count(TARGET), 1, 'lo_counters is not in TARGETS once')
        i = targets.index(TARGET)
        self.assertLess(targets[i - 1], TARGET)
        self.assertLess(TARGET, targets[i + 1])
        ignored = (ksft / TARGET / '.gitignore').read_text().split('\n')
        self.assertIn(TARGET, ignored)
        keys = [ln.split('=')[0] for ln in (ksft / TARGET / 'config').read_text().split()]
        self.assertEqual(keys, sorted(keys), 'config is not sorted by key')

    def check_run(self, r: subprocess.CompletedProcess[str], secs: float, timeout: int) -> None:
        why = f'exit {r.returncode} in {secs:.1f} s:\n{r.stdout}{r.stderr}'
        self.assertEqual(r.returncode, 0, why)
        self.assertLess(secs, timeout, why)
        lines = r.stdout.splitlines()
        self.assertIn('TAP version 13', lines[:2], why)
        self.assertIn('1..1', lines, why)
        m = RESULT.search(r.stdout)
        assert m is not None, f'no KTAP result line for {TARGET}; {why}'
        # runner.sh: exit 0 is "ok", 4 (KSFT_SKIP) "ok ... # SKIP", others "not ok"
        self.assertIsNone(m.group(1), why)
        self.assertIn(m.group(2), ('', ' # SKIP'), why)
        inner = [ln[2:] for ln in lines if ln.startswith('# ')]
        self.assertIn('TAP version 13', inner, f'the test printed no KTAP; {why}')
        if not m.group(2):
            self.assertIn('1..3', inner, why)
            self.assertTrue(all(not ln.startswith('not ok') for ln in inner), why)


class StockInGuest(unittest.TestCase):
    """The guest's initramfs holds the stock install; with kloc.stock on its command
    line, /init runs it as CI systems do: run_kselftest.sh -c lo_counters."""

    def test_run_kselftest_in_the_guest(self) -> None:
        tree = debian_tree('6.12')
        built = [g for g in lava_export.guests(tree) if g.arch == 'x86_64']
        if not built:
            self.skipTest('no x86_64 guest of 6.12 is built (make guest)')
        installed_tree('6.12')
        g = built[0]
        with tempfile.TemporaryDirectory(prefix='kloc-ksft-guest-') as tmp:
            binary = guest.static_selftest('x86_64', tree.path / KSFT, Path(tmp))
            initrd = guest.initramfs(binary, [], Path(tmp) / 'initramfs.gz', 'x86_64')
            cmd = guest.qemu_command(g, initrd, topology.get('x86_64_2n'))
            k = cmd.index('-append') + 1
            cmd[k] += f' {guest.STOCK_FLAG}'
            timeout = settings_timeout(binary.parent / 'settings')
            start = time.monotonic()
            r = subprocess.run(cmd, capture_output=True, text=True, errors='replace',
                               timeout=timeout + 120, stdin=subprocess.DEVNULL)
            secs = time.monotonic() - start
        console = r.stdout.replace('\r', '')
        why = f'{secs:.0f} s; console:\n{console[-3000:]}'
        end = re.search(rf'^{guest.STOCK_END} (\d+)$', console, re.M)
        assert end is not None, f'run_kselftest.sh did not finish; {why}'
        self.assertEqual(end.group(1), '0', why)
        m = RESULT.search(console)
        assert m is not None, f'no KTAP result line for {TARGET}; {why}'
        self.assertIsNone(m.group(1), why)
        self.assertEqual(m.group(2).strip(), '', why)
        self.assertIn('# ok 3 ', console, why)
        self.assertNotIn('TIMEOUT', console, why)
