# SPDX-License-Identifier: GPL-2.0
"""The QEMU kloc runs: 10.0, from Debian's bookworm-backports, kept in the cache.

Debian 12 ships QEMU 7.2, whose icount live-locks Linux 6.1's secondary-CPU
bring-up (QEMU 8.1 fixed the round-robin scheduler's fairness under icount)
and whose plugin API (version 1) has no per-vCPU scoreboards. Debian's
bookworm-backports carries QEMU 10.0 built for Debian 12: its binaries run
here with the libraries QEMU 7.2's packages already brought in. kloc fetches
it as it fetches 7.x's kernel source (trees/archive.py): a private apt
configuration for the suite, `apt-get download` of qemu-system-x86,
qemu-system-arm, qemu-system-common and qemu-system-data, and their files
unpacked into $KLOC_CACHE/qemu/<version>/ (keeping no owner, no setuid
bit); the source package of the same version gives the plugin's files
(qemu/source.py: qemu-plugin.h, the API reference, cache.c), added by
fetch() to a release fetched before kloc kept them all. Nothing is
installed and /etc/apt is not touched.

Every QEMU kloc starts (kunit.py's, through tools/qemu-accel/; guests;
counted boots; lava-run's) is found on PATH: use() puts this QEMU's bin/
first, once per command. Where it cannot be had, kloc says so in one line
and runs on the system's QEMU; what needs 10.0 (counted boots of a kernel
that hangs under 7.2's icount) is then refused, not degraded.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kloc import filelock, paths, progress
from kloc.errors import KlocError
from kloc.qemu import arches, source
from kloc.trees import archive

SUITE = 'bookworm-backports'
SERIES = (10, 0)                    # the QEMU series kloc runs
# Each architecture's package and binary (qemu/arches.py), and what they share.
PACKAGES = tuple(a.qemu_package for a in arches.ARCHES.values()) + ('qemu-system-common',
                                                                    'qemu-system-data')
BINARIES = tuple(a.qemu_binary for a in arches.ARCHES.values())
DONE = 'source-version'             # written last: the folder is complete
# Debian's QEMU looks for its firmware and option ROMs in /usr/share/qemu (it
# is not built relocatable): each binary is started through a two-line script
# that puts this release's data folder first (-L), then the system's, whose
# seabios and ipxe files the data package's links point at.
WRAPPERS = 'kloc-bin'
OFF = 'KLOC_SYSTEM_QEMU'            # =1: run the system's QEMU (not fetched, not used)


class QemuReleaseError(KlocError):
    """QEMU 10.0 cannot be had."""


@dataclass(frozen=True)
class Release:
    version: str        # Debian's, e.g. 1:10.0.2+ds-2+deb13u1~bpo12+1
    root: Path          # $KLOC_CACHE/qemu/<version>

    @property
    def bin_dir(self) -> Path:
        """What goes on PATH: each binary started with this release's data folder."""
        return self.root / WRAPPERS

    @property
    def header_dir(self) -> Path:
        return self.root / 'include'

    @property
    def series(self) -> tuple[int, int]:
        return upstream_series(self.version)


def upstream_series(debian_version: str) -> tuple[int, int]:
    """(10, 0) of '1:10.0.2+ds-2+deb13u1~bpo12+1'; (0, 0) if it does not parse."""
    m = re.match(r'^(?:\d+:)?(\d+)\.(\d+)', debian_version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _folder(cache: Path, version: str) -> Path:
    return cache / 'qemu' / version.replace(':', '_')


def cached(cache: Path) -> Release | None:
    """The newest complete QEMU 10.0 in the cache (checked as the user's alone), or None."""
    base = cache / 'qemu'
    if not base.is_dir():
        return None
    found = []
    for d in base.iterdir():
        done = d / DONE
        if d.is_symlink() or not done.is_file():
            continue
        paths.trusted_dir(paths.cache_subdir(cache, 'qemu', d.name))
        version = paths.trusted_file(done).read_text().strip()
        if _folder(cache, version) == d and upstream_series(version) == SERIES:
            found.append(Release(version, d))
    for r in sorted(found, key=lambda r: r.version, reverse=True):
        if all(os.access(r.bin_dir / b, os.X_OK) for b in BINARIES):
            return r
    return None


def missing_source(r: Release) -> list[str]:
    """The files of FROM_SOURCE a release's include/ lacks (one fetched before kloc kept
    them all): the release runs, but what needs them wants fetch() first."""
    return [name for name in source.FROM_SOURCE.values()
            if not (r.header_dir / name).is_file()]


def fetch(cache: Path) -> Release:
    """QEMU 10.0 from bookworm-backports into the cache, once; the release (with the
    source files an earlier fetch did not keep added)."""
    have = cached(cache)
    if have and not missing_source(have):
        return have
    a = archive.Archive(SUITE, cache, with_sources=True)
    with filelock.exclusive(paths.cache_subdir(cache, 'qemu') / '.lock'):
        have = cached(cache)
        if have:
            if missing_source(have):
                try:
                    _complete_source(a, have)
                except KlocError as e:   # the release runs: only what needs them fails
                    progress.say(f'QEMU {have.version} in {have.root} lacks '
                                 f'{", ".join(missing_source(have))} from its source, and '
                                 f'they cannot be had now: {e}')
            return have
        with a.locked(), tempfile.TemporaryDirectory(prefix='.fetch-',
                                                     dir=cache / 'qemu') as tmp:
            archive.update(a)
            version = archive.candidate(a, PACKAGES[0])
            if upstream_series(version) != SERIES:
                raise QemuReleaseError(
                    f'Debian {SUITE} offers {PACKAGES[0]} {version or "in no version"}, '
                    f'not QEMU {SERIES[0]}.{SERIES[1]}; KLOC_SYSTEM_QEMU=1 runs on the '
                    'system\'s QEMU instead')
            progress.say(f'downloading QEMU {version} from Debian {SUITE} (apt-get '
                         'download: not installed)')
            work = Path(tmp)
            archive.download(a, [f'{p}={version}' for p in PACKAGES], work)
            unpacked = work / 'x'
            for deb in sorted(work.glob('*.deb')):
                archive.unpack_deb(deb, unpacked)
            _header(a, version, work, unpacked)
            _wrappers(unpacked, _folder(cache, version), version)
            (unpacked / DONE).write_text(version + '\n')
            dest = _folder(cache, version)
            shutil.rmtree(dest, ignore_errors=True)
            unpacked.rename(dest)
    r = Release(version, dest)
    check_runs(r)
    return r


def _wrappers(unpacked: Path, final: Path, version: str) -> None:
    """kloc-bin/<binary>: the binary of final (where unpacked will be) with its data."""
    (unpacked / WRAPPERS).mkdir()
    for b in BINARIES:
        if not os.access(unpacked / 'usr' / 'bin' / b, os.X_OK):
            raise QemuReleaseError(f'the packages of QEMU {version} hold no usr/bin/{b}')
        w = unpacked / WRAPPERS / b
        w.write_text(f'#!/bin/sh\n# QEMU {version}, written by kloc (qemu/release.py)\n'
                     f'exec {shlex.quote(str(final / "usr" / "bin" / b))} '
                     f'-L {shlex.quote(str(final / "usr" / "share" / "qemu"))} "$@"\n')
        w.chmod(0o755)


def _header(a: archive.Archive, version: str, work: Path, unpacked: Path) -> None:
    """FROM_SOURCE of the source package of exactly this version, into include/."""
    (unpacked / 'include').mkdir(parents=True)
    source.extract(a, version, work, unpacked / 'include')
    (unpacked / 'include' / source.DONE).write_text(version + '\n')


def _complete_source(a: archive.Archive, r: Release) -> None:
    """Add to a release (under the qemu lock) the FROM_SOURCE files it lacks: each
    written beside its final name, then renamed into place; the others are kept."""
    inc = r.header_dir
    paths.trusted_dir(inc)
    missing = set(missing_source(r))
    wanted = {rel: name for rel, name in source.FROM_SOURCE.items() if name in missing}
    for name in missing:
        if os.path.lexists(inc / name):
            raise QemuReleaseError(f'{inc / name} is there but is no regular file: '
                                   'refused; remove it, and kloc fetches it again')
    with a.locked(), tempfile.TemporaryDirectory(prefix='.fetch-', dir=inc) as tmp:
        archive.update(a)
        work = Path(tmp)
        got = work / 'got'
        got.mkdir()
        source.extract(a, r.version, work, got, wanted)
        for name in wanted.values():
            (got / name).rename(inc / name)


def version_of(text: str) -> tuple[int, int] | None:
    """(major, minor) from what `qemu-system-* --version` printed, or None."""
    m = re.search(r'version (\d+)\.(\d+)', text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check_runs(r: Release) -> None:
    """Each binary starts here and says it is this series (libraries found, data found)."""
    for b in BINARIES:
        exe = r.bin_dir / b
        try:
            out = subprocess.run([str(exe), '--version'], capture_output=True, text=True,
                                 timeout=60)
        except OSError as e:
            raise QemuReleaseError(f'{exe} does not start: {e}') from None
        if out.returncode or version_of(out.stdout) != SERIES:
            raise QemuReleaseError(
                f'{exe} --version exited {out.returncode}: '
                f'{" ".join((out.stdout + out.stderr).split())[-300:]}; a library it needs '
                f'may be missing (ldd {exe}); KLOC_SYSTEM_QEMU=1 runs on the system\'s QEMU')


_USED: list[Release | None] = []


def use(cache: Path, fetch_missing: bool = False, runs: bool = True) -> Release | None:
    """Put QEMU 10.0's bin/ first on PATH for this command and what it starts; None
    (and one line, once) where it is not in the cache, or KLOC_SYSTEM_QEMU=1. runs:
    the command runs QEMU; one that does not (kloc qemu-header, as make deps calls it
    before every target) does not say which QEMU runs: a newcomer read that line, on
    top of every target, as the QEMU that target would run."""
    if _USED:
        return _USED[0]
    r: Release | None = None
    if os.environ.get(OFF, '') == '1':
        if runs:
            progress.say(f'{OFF}=1: running on the system\'s QEMU')
    else:
        r = fetch(cache) if fetch_missing else cached(cache)
        if r is None:
            progress.say(f'QEMU {SERIES[0]}.{SERIES[1]} is not in {cache / "qemu"} (make deps '
                         'fetches it): running on the system\'s QEMU, and refusing what '
                         'needs it')
    if r is not None:
        os.environ['PATH'] = f'{r.bin_dir}{os.pathsep}{os.environ.get("PATH", "")}'
    _USED.append(r)
    return r


@contextlib.contextmanager
def using(cache: Path) -> Iterator[Release | None]:
    """use() for the with block alone: PATH and in_use() are as they were after it
    (a test that boots on QEMU 10.0 leaves the tests after it in its process alone)."""
    path = os.environ.get('PATH', '')
    before = list(_USED)
    _USED.clear()
    try:
        yield use(cache)
    finally:
        _USED[:] = before
        os.environ['PATH'] = path


def in_use() -> Release | None:
    """The release use() chose for this command (None: the system's QEMU)."""
    return _USED[0] if _USED else None
