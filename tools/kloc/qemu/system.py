# SPDX-License-Identifier: GPL-2.0
"""The installed QEMU's plugin header, for runs on the system's QEMU.

kloc runs its own QEMU 10.0 (qemu/release.py), with the header of the same
version; the system's QEMU runs under KLOC_SYSTEM_QEMU=1, where 10.0 cannot
be had, and in the tests that check the plugin against QEMU 7.2's API. Its
version is the Debian source version the installed qemu-system-* packages
were built from (all must agree). The files of that version's source
(qemu/source.py) are fetched once into $KLOC_CACHE/qemu-src/<version>/ by a
private apt configuration for the system's release, Sources only: its
codename, -updates and -security suites, the first that holds the version.
No deb-src entry, no root: /etc/apt is not touched.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from kloc import filelock, paths, progress
from kloc.errors import KlocError
from kloc.qemu import arches, source
from kloc.trees import archive

FOLDER = 'qemu-src'
NEEDED = (source.HEADER, source.CACHE_PLUGIN, source.DONE)
OS_RELEASE = Path('/etc/os-release')


class SystemQemuError(KlocError):
    """The installed QEMU's header cannot be had."""


def installed_version() -> str:
    """The Debian source version of the installed qemu-system-* packages."""
    found: dict[str, str] = {}
    for pkg in sorted({a.qemu_package for a in arches.ARCHES.values()}):
        try:
            r = subprocess.run(['dpkg-query', '-W', '-f=${db:Status-Abbrev} '
                                '${source:Package} ${source:Version}', pkg],
                               capture_output=True, text=True)
        except FileNotFoundError:
            raise SystemQemuError('dpkg-query is missing: the installed QEMU\'s header '
                                  'comes from Debian\'s qemu source package') from None
        fields = r.stdout.split()
        if r.returncode or len(fields) != 3 or not fields[0].startswith('ii'):
            continue
        if fields[1] != 'qemu':
            raise SystemQemuError(f'{pkg} is built from the source package {fields[1]}, '
                                  'not Debian\'s qemu: no header for it')
        found[pkg] = fields[2]
    if not found:
        raise SystemQemuError('no qemu-system-x86 or qemu-system-arm package is installed '
                              '(make deps installs them)')
    if len(set(found.values())) > 1:
        raise SystemQemuError(f'the installed QEMU packages come from different qemu '
                              f'sources ({", ".join(f"{p} {v}" for p, v in found.items())}): '
                              f'upgrade them together, apt-get install {" ".join(found)}')
    return next(iter(found.values()))


def suites() -> list[str]:
    """The system release's suites, in the order they are searched."""
    try:
        text = OS_RELEASE.read_text()
    except OSError as e:
        raise SystemQemuError(f'{OS_RELEASE}: {e.strerror}: the system\'s Debian release '
                              'is not known') from None
    m = re.search(r'^VERSION_CODENAME="?([a-z]+)"?$', text, re.M)
    if not m:
        raise SystemQemuError(f'{OS_RELEASE} names no VERSION_CODENAME: the system\'s '
                              'Debian release is not known')
    return [m.group(1), f'{m.group(1)}-updates', f'{m.group(1)}-security']


def _complete(d: Path, version: str) -> bool:
    if not all((d / name).is_file() for name in NEEDED):
        return False
    for name in NEEDED:
        paths.trusted_file(d / name)
    return (d / source.DONE).read_text().strip() == version


def header_dir(cache: Path) -> Path:
    """The folder with qemu-plugin.h and cache.c of the installed QEMU's source,
    fetched once."""
    version = installed_version()
    d = paths.cache_subdir(cache, FOLDER, version.replace(':', '_'))
    if _complete(d, version):
        return d
    with filelock.exclusive(paths.cache_subdir(cache, FOLDER) / '.lock'):
        if _complete(d, version):
            return d
        offered: dict[str, list[str]] = {}
        for suite in suites():
            a = archive.Archive(suite, cache, with_sources=True, binaries=False)
            with a.locked():
                archive.update(a)
                offered[suite] = archive.source_versions(a, 'qemu')
                if version not in offered[suite]:
                    continue
                with tempfile.TemporaryDirectory(prefix='.fetch-', dir=d.parent) as tmp:
                    work = Path(tmp)
                    got = work / 'got'
                    got.mkdir()
                    source.extract(a, version, work, got)
                    (got / source.DONE).write_text(version + '\n')
                    for name in (*source.FROM_SOURCE.values(), source.DONE):   # DONE last
                        (got / name).rename(d / name)
                progress.say(f'qemu-plugin.h and cache.c of Debian qemu {version} '
                             f'({suite}) in {d}')
                return d
    raise SystemQemuError(
        f'Debian {", ".join(offered)} offer the qemu source '
        f'{", ".join(sorted({v for vs in offered.values() for v in vs})) or "in no version"}'
        f', not {version}, the one the installed QEMU was built from: upgrade QEMU '
        '(apt-get update, then make deps)')
