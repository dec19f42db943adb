# SPDX-License-Identifier: GPL-2.0
"""Building the kloc-count plugin against the qemu-plugin.h of the QEMU kloc runs.

The header comes from Debian's qemu source package of exactly that version:
QEMU 10.0's, fetched with it (qemu/release.py), or the installed QEMU's
(qemu/system.py); the plugin is built once per
source, header and compiler into the cache, and refused when QEMU changed.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kloc.counting.errors import CountingError, run_tool
from kloc.paths import PACKAGE_ROOT, cache_dir
from kloc.qemu import release, source, system
from kloc.trees import archive

PLUGIN_DIR = PACKAGE_ROOT / 'tools' / 'qemu-plugin'
MARKER_H = PLUGIN_DIR / 'kloc-marker.h'
PLUGIN_SOURCES = ('kloc-count.c', 'kloc-model.c', 'kloc-count.h', 'kloc-marker.h', 'Makefile')
PLUGIN_NAME = 'kloc-count'


def c_define(source: Path, name: str, value: str, shape: str, why: str) -> str:
    """The value a C file #defines as name (the group of the value regex): facts the
    C declares, read from it. shape and why go into the error: what is expected, and
    what needs it."""
    try:
        text = source.read_text()
    except OSError as e:
        raise CountingError(f'{source}: cannot read it ({e.strerror}); {why}') from None
    m = re.search(rf'^#define\s+{re.escape(name)}\s+{value}', text, re.M)
    if not m:
        raise CountingError(f'{source} has no "#define {name} {shape}": {why}')
    return m.group(1)


# The version kloc-count.c's JSON reports, as the C declares it.
PLUGIN_VERSION = c_define(PLUGIN_DIR / 'kloc-count.c', 'KLOC_COUNT_VERSION', r'"([^"]+)"$',
                          '"x.y"', 'the counted runs are keyed by the plugin version')


def header_dir() -> Path:
    """The directory with qemu-plugin.h of the QEMU this command runs: QEMU 10.0's,
    fetched with it (qemu/release.py), or the installed QEMU's (fetched once)."""
    r = release.in_use()
    if r is not None:
        return r.header_dir
    try:
        return system.header_dir(cache_dir())
    except (system.SystemQemuError, archive.ArchiveError, source.QemuSourceError) as e:
        raise CountingError(f'no qemu-plugin.h for the installed QEMU: {e}') from None


def header_api_version(header: Path) -> int:
    """The QEMU_PLUGIN_VERSION a qemu-plugin.h defines: the API a plugin built with it has."""
    m = re.search(r'^#define QEMU_PLUGIN_VERSION (\d+)', header.read_text(), re.M)
    if not m:
        raise CountingError(f'{header} defines no QEMU_PLUGIN_VERSION')
    return int(m.group(1))


def installed_qemu_source() -> str:
    """The Debian source version of the QEMU this command runs (qemu/release.py), or
    the one the installed qemu-system-* packages were built from."""
    r = release.in_use()
    return r.version if r is not None else system.installed_version()


@dataclass(frozen=True)
class Plugin:
    path: Path              # the .so
    header_version: str     # Debian source version of the qemu-plugin.h it was built with
    api: int                # QEMU_PLUGIN_VERSION of that header
    built: bool             # built now (False: taken from the cache)


def build_plugin(cache: Path | None = None, cc: str = 'gcc') -> Plugin:
    """Build the plugin (-Wall -Wextra -Werror) into the cache, once per source and header."""
    inc = header_dir()
    header = inc / 'qemu-plugin.h'
    version_file = inc / 'source-version'
    header_version = version_file.read_text().strip() if version_file.exists() else 'unknown'
    key = hashlib.sha256()
    for f in [PLUGIN_DIR / s for s in PLUGIN_SOURCES] + [header]:
        key.update(f.read_bytes())
    key.update(header_version.encode())
    key.update(run_tool([cc, '--version'], 'the C compiler').encode())
    out = (cache or cache_dir()) / 'qemu-plugin' / key.hexdigest()[:16]
    so = out / f'{PLUGIN_NAME}.so'
    api = header_api_version(header)
    if so.exists():
        return Plugin(so, header_version, api, False)
    build_into(out, so, lambda tmp: run_tool(
        ['make', '-s', '-C', str(PLUGIN_DIR), f'O={tmp}', f'CC={cc}',
         f'QEMU_PLUGIN_INCLUDE={inc}'], 'building the kloc-count plugin'))
    return Plugin(so, header_version, api, True)


def build_into(out: Path, so: Path, build: Callable[[Path], object]) -> None:
    """build(tmp) into a new folder beside out, then renamed to out (so, in it, is
    what it builds): a build cut short leaves nothing, and of two at once the
    first rename wins."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix='.build-', dir=out.parent))
    try:
        build(tmp)
        try:
            tmp.rename(out)
        except OSError:
            if not so.exists():   # not a concurrent build that won
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_plugin_matches_qemu(plugin: Plugin) -> None:
    """The Python side of the API check: built for the QEMU that is installed now."""
    installed = installed_qemu_source()
    if plugin.header_version != installed:
        raise CountingError(f'{plugin.path} was built against qemu-plugin.h of QEMU '
                            f'{plugin.header_version}, but QEMU {installed} is installed: '
                            'build it again (kloc.counting.plugin.build_plugin)')
