# SPDX-License-Identifier: GPL-2.0
"""Shared helpers for the tool tests."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
import unittest
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kloc.bench import metrics
from kloc.counting.errors import CountingError
from kloc.kunitpy import ktap
from kloc.trees import kernels, sources
from kloc.paths import cache_dir
from kloc.version import KernelVersion, tree_version

from .run import ROOT_ONLY

T = TypeVar('T', bound=Callable[..., Any])

DATA = Path(__file__).resolve().parent / 'data'
REGEN = os.environ.get('KLOC_REGEN_GOLDEN') == '1'


def review_2008() -> tuple[list[metrics.Difference], dict[str, Any]]:
    """The counted figures of the real review of the 2008 layout (data/README), and the
    file's content (its contended-lines tables)."""
    doc = json.loads((DATA / 'review-2008-counted.json').read_text())
    side: dict[str, list[dict[str, object]]] = {'a': [], 'b': []}
    for boot in doc['boots']:
        side[boot['side']].append({'counted': boot['counted']})
    return metrics.compare(side['a'], side['b'], 0.05, kind='counted'), doc


def debian_tree(kernel: str) -> sources.Tree:
    """The cached Debian tree; extracted on first use. Skips if the package is absent."""
    if not sources.tarball_path(kernel).exists():
        raise unittest.SkipTest(f'linux-source-{kernel} is not installed (make deps)')
    return sources.debian_tree(kernel, cache_dir())


def installed_tree(kernel: str) -> sources.Tree:
    """The cached Debian tree carrying the package: kloc's copy of it, refreshed here,
    the series applied (trees/workcopy.py), not assumed from an earlier command."""
    return debian_tree(kernel)


TOOLS = Path(__file__).resolve().parents[1]


def pristine_tree(dest: Path, kernel: str = '6.12') -> tuple[Path, KernelVersion]:
    """A small tree: the key files of a kernel tree and every file the series touches,
    as Debian's tree has them (the extracted tree, which kloc never writes)."""
    tree = debian_tree(kernel)
    assert tree.source is not None
    for rel in set(sources.checked_files(tree.version)):
        data = (tree.source / rel).read_bytes() if (tree.source / rel).is_file() else None
        if data is None:
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes(data)
    return dest, tree.version


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A kloc command line, run from the package's tools/."""
    return subprocess.run([sys.executable, '-m', 'kloc', *args], cwd=TOOLS,
                          env=dict(os.environ, PYTHONPATH=str(TOOLS), **(env or {})),
                          capture_output=True, text=True)


def carry(tree: Path, version: KernelVersion | None = None) -> None:
    """Apply the package's series to a test's own tree in place, as kloc's copy of a
    tree carries it (trees/workcopy.py: the files written, .kloc/ recording them)."""
    from kloc.series import changes
    from kloc.trees import workcopy
    workcopy.apply_series(tree, tree, version or tree_version(tree), changes.load_series())


@functools.cache
def stock_parser() -> Path:
    """kunit.py's parser, from the default kernel's tree, for reading golden logs."""
    return ktap.kunit_dir(debian_tree(kernels.DEFAULT).path)


def mini_tree(tree: sources.Tree, dest: Path, files: list[str]) -> Path:
    """A copy of the tree's Makefile and the given files that it has: enough for the
    series."""
    for rel in ['Makefile'] + files:
        src = tree.path / rel
        if not src.is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    return dest


def golden(test: unittest.TestCase, name: str, actual: str) -> None:
    """Compare with tests/data/<name>; KLOC_REGEN_GOLDEN=1 rewrites it."""
    path = DATA / name
    if REGEN:
        path.write_text(actual)
    test.assertEqual(path.read_text(), actual, f'{name} differs; KLOC_REGEN_GOLDEN=1 '
                     'rewrites it, then review the diff')


def tree_snapshot(root: Path) -> dict[str, str]:
    """Every directory, file (mode and content hash) and link (its target) under
    root: two snapshots are equal when the trees are byte for byte."""
    out = {}
    for dirpath, dirs, names in os.walk(root):
        for n in dirs:
            out[str((Path(dirpath) / n).relative_to(root)) + '/'] = 'dir'
        for n in names:
            p = Path(dirpath) / n
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[str(p.relative_to(root))] = 'link ' + os.readlink(p)
            else:
                out[str(p.relative_to(root))] = f'{stat.S_IMODE(st.st_mode):o} ' + \
                    hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@dataclass(frozen=True)
class BootResult:
    output: str             # console and QEMU's stderr
    returncode: int         # -9 when killed at the timeout
    seconds: float
    peak_rss_kib: int       # QEMU's peak resident memory (the plugin's is inside it)
    timed_out: bool


def boot(cmd: list[str], timeout: float) -> BootResult:
    """Run QEMU to its exit (or kill it at the timeout); its output, time and peak RSS."""
    start = time.monotonic()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise CountingError(f'{cmd[0]} not found; run "make deps"') from None
    chunks: list[bytes] = []
    assert p.stdout is not None
    out = p.stdout
    reader = threading.Thread(target=lambda: chunks.append(out.read()), daemon=True)
    reader.start()
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        p.kill()
    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    out.close()
    return BootResult(b''.join(chunks).decode(errors='replace'), p.returncode,
                      time.monotonic() - start, int(usage.ru_maxrss), killed.is_set())


def root_only(why: str) -> Callable[[T], T]:
    """A test class or method that needs root: skipped, saying so in the words
    tests.run looks for (run.ROOT_ONLY), where this is not root. make test, run as
    root, runs the tool tests as an ordinary user and then, as root, those."""
    return unittest.skipUnless(os.geteuid() == 0, f'{ROOT_ONLY}: {why}')


def require_root(test: unittest.TestCase, why: str) -> None:
    """root_only, inside a test or its set-up."""
    if os.geteuid() != 0:
        test.skipTest(f'{ROOT_ONLY}: {why}')


# The last commit with the plugin in one file (kloc-count.c): what the split into
# counting and model (kloc-count.c, kloc-model.c) must count alike.
ONE_FILE_PLUGIN = '94ffc32c6eb07e8aa741a01295291052c839dc06'


def but_version(counts: dict[str, Any]) -> dict[str, Any]:
    """A plugin's JSON without its version: what the one-file plugin's must equal, every
    other key and value, whatever the version the plugin has come to since."""
    return {k: v for k, v in counts.items() if k != 'version'}


def one_file_plugin(dest: Path, inc: Path, target: str) -> Path:
    """The plugin as it was in one file (ONE_FILE_PLUGIN), its sources taken from git
    and built into dest with the qemu-plugin.h in inc: make's target (kloc-count.so,
    fake-qemu), its path."""
    src = dest / 'src'
    for name in ('kloc-count.c', 'kloc-marker.h', 'kloc-test.h', 'Makefile',
                 'tests/fake-qemu.c'):
        r = subprocess.run(['git', '-C', str(TOOLS), 'show',
                            f'{ONE_FILE_PLUGIN}:tools/qemu-plugin/{name}'],
                           capture_output=True, check=False)
        if r.returncode:
            shallow = subprocess.run(['git', '-C', str(TOOLS), 'rev-parse',
                                      '--is-shallow-repository'], capture_output=True,
                                     text=True, check=False).stdout.strip() == 'true'
            why = (f'the one-file plugin ({ONE_FILE_PLUGIN[:12]}) is not in this git '
                   f'checkout: {r.stderr.decode().strip()}; clone with its history')
            if shallow:         # cut off on purpose (--depth): nothing to compare with
                raise unittest.SkipTest(f'{why} (this clone is shallow)')
            raise AssertionError(why)
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(r.stdout)
    subprocess.run(['make', '-s', '-C', str(src), f'O={dest}', f'QEMU_PLUGIN_INCLUDE={inc}',
                    str(dest / target)], check=True)
    return dest / target
