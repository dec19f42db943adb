# SPDX-License-Identifier: GPL-2.0
"""Debian's packages from suites this machine does not use (sid, experimental, backports).

Mainline kernels (7.x) are in Debian's sid and experimental, not in the
stable release the machine runs. They are fetched without changing the
system: a private apt configuration under $KLOC_CACHE/apt/<suite>/ (its
own sources list, lists and archive cache; apt reads no other sources and
no dpkg status), `apt-get update` and `apt-get download` with it, then
the package's files (dpkg-deb --fsys-tarfile, untarred keeping no owner,
no setuid bit) into $KLOC_CACHE/debian/<package>_<version>/.
Nothing is installed, pinned or added to /etc/apt; the tarball is that
directory's usr/src/linux-source-X.Y.tar.xz, as linux-source-X.Y installs
it. The archive's keyring checks the lists, as for the system's apt.
A source package's files (qemu/source.py) come by name and SHA-256 from
the suite's Sources index (a deb-src line in the private list), none in /etc/apt.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from kloc import filelock, paths, progress
from kloc.errors import KlocError
from kloc.version import KernelVersion

MIRROR = 'http://deb.debian.org/debian'
SECURITY_MIRROR = 'http://deb.debian.org/debian-security'    # the -security suites
KEYRING = Path('/usr/share/keyrings/debian-archive-keyring.gpg')
SUITES = ('sid', 'experimental')
SOURCE = re.compile(r'^linux-source-(\d+\.\d+)$')
# Every tar -x of kloc: files are the user's, with the user's umask, whoever
# the archive says owns them and whatever modes it gives (root's tar would keep
# both, setuid bits included).
TAR_SAFE = ('--no-same-owner', '--no-same-permissions')


class ArchiveError(KlocError):
    """A package cannot be had from the archive."""


@dataclass(frozen=True)
class Archive:
    suite: str
    cache: Path             # $KLOC_CACHE
    with_sources: bool = False  # its Sources index too (source_file())
    binaries: bool = True       # its Packages index (candidate(), download())

    @property
    def root(self) -> Path:
        return self.cache / 'apt' / self.suite

    @property
    def mirror(self) -> str:
        """Where the suite is: KLOC_DEBIAN_MIRROR, or Debian's (its security archive for a
        -security suite, which KLOC_DEBIAN_MIRROR does not name)."""
        if self.suite.endswith('-security'):
            return SECURITY_MIRROR
        return os.environ.get('KLOC_DEBIAN_MIRROR', MIRROR)

    def options(self) -> list[str]:
        """apt's -o options: this suite's files only, the system's none."""
        r = self.root
        return ['-o', f'Dir::Etc::SourceList={r / "sources.list"}',
                '-o', 'Dir::Etc::SourceParts=/dev/null',
                '-o', f'Dir::State::Lists={r / "lists"}',
                '-o', f'Dir::Cache={r / "cache"}',
                '-o', 'Dir::State::status=/dev/null',
                '-o', 'APT::Sandbox::User=root']

    def locked(self) -> AbstractContextManager[None]:
        """Hold the suite's private apt for one command's update, queries and download.

        apt-get takes its own lock on the lists and fails, rather than waits,
        when another kloc command (or tool test) is updating the same suite.
        """
        return filelock.exclusive(paths.cache_subdir(self.cache, 'apt', self.suite) / '.lock')

    def configure(self) -> None:
        for d in ('lists/partial', 'cache/archives/partial'):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        signed = f' [signed-by={KEYRING}]' if KEYRING.is_file() else ''
        kinds = [k for k, on in (('deb', self.binaries), ('deb-src', self.with_sources)) if on]
        (self.root / 'sources.list').write_text(''.join(
            f'{kind}{signed} {self.mirror} {self.suite} main\n' for kind in kinds))


def _apt(a: Archive, *args: str, cwd: Path | None = None, keep_stderr: bool = False) -> str:
    cmd = ['apt-get' if args[0] in ('update', 'download') else 'apt-cache', *a.options(),
           *args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    except FileNotFoundError:
        raise ArchiveError('apt-get is missing: packages from Debian\'s archive need '
                           'Debian\'s apt') from None
    if r.returncode:
        raise ArchiveError(f'{" ".join([cmd[0], *args])} ({a.suite}) failed: '
                           f'{" ".join(r.stderr.split())[-800:]}; check the network and '
                           'the mirror (KLOC_DEBIAN_MIRROR=)')
    return r.stdout + (r.stderr if keep_stderr else '')


def update(a: Archive) -> None:
    """Fetch the suite's package lists into the private lists directory."""
    a.configure()
    progress.say(f'reading Debian {a.suite}\'s package lists (private apt configuration '
                 f'in {a.root}; the system\'s apt is not touched)')
    out = _apt(a, 'update', keep_stderr=True)
    if not any((a.root / 'lists').glob('*_Packages*' if a.binaries else '*_Sources*')):
        raise ArchiveError(f'no package lists of Debian {a.suite} came from the mirror '
                           f'({" ".join(out.split())[-600:]}); check the network and the '
                           'mirror (KLOC_DEBIAN_MIRROR=)')


def candidate(a: Archive, package: str) -> str:
    """The version of package the suite offers, or ''."""
    out = _apt(a, 'policy', package)
    m = re.search(r'^\s*Candidate: (\S+)$', out, re.M)
    return m.group(1) if m and m.group(1) != '(none)' else ''


def download(a: Archive, specs: list[str], into: Path) -> None:
    """apt-get download of package=version specs into a folder (nothing installed)."""
    _apt(a, 'download', *specs, cwd=into)


# The files of a source package kloc takes, by kind: the upstream tarball, and
# Debian's changes to it (its debian/ folder: patches/ and their series).
SOURCE_FILES = {'orig': r'\S+\.orig\.tar\.(?:xz|gz|bz2)',
                'debian': r'\S+\.debian\.tar\.(?:xz|gz|bz2)'}


def source_versions(a: Archive, package: str) -> list[str]:
    """The versions of source package the suite's Sources index holds."""
    return re.findall(r'^Version: (\S+)$', _apt(a, 'showsrc', package), re.M)


def source_file(a: Archive, package: str, version: str, kind: str, into: Path) -> Path:
    """One file (SOURCE_FILES' kind) of source package=version, into a folder: its name
    and SHA-256 from the suite's Sources index (which the archive's key signs), its
    bytes by apt-helper, which checks them against that hash. One file, not apt-get
    source: a mirror may keep a backport's upstream tarball while its .dsc and
    .debian.tar are gone."""
    for stanza in _apt(a, 'showsrc', package).split('\n\n'):
        fields = dict(re.findall(r'^(Version|Directory): (\S+)$', stanza, re.M))
        if fields.get('Version') != version or 'Directory' not in fields:
            continue
        sums = stanza.split('Checksums-Sha256:', 1)[-1]
        m = re.search(rf'^ ([0-9a-f]{{64}}) \d+ ({SOURCE_FILES[kind]})$', sums, re.M)
        if not m:
            break
        dest = into / m.group(2)
        cmd = ['/usr/lib/apt/apt-helper', 'download-file',
               f'{a.mirror}/{fields["Directory"]}/{m.group(2)}', str(dest),
               f'SHA256:{m.group(1)}']
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode or not dest.is_file():
            raise ArchiveError(f'downloading {m.group(2)} ({a.suite}) failed: '
                               f'{" ".join((r.stdout + r.stderr).split())[-600:]}; check the '
                               'network and the mirror (KLOC_DEBIAN_MIRROR=)')
        return dest
    raise ArchiveError(f'Debian {a.suite}\'s Sources index has no {kind} tarball of '
                       f'{package} {version}')


def sources_offered(a: Archive) -> list[KernelVersion]:
    """The linux-source-X.Y series the suite offers, oldest first."""
    found = {SOURCE.match(line.split(' ', 1)[0]) for line in
             _apt(a, 'search', '--names-only', r'^linux-source-[0-9]+\.[0-9]+$').splitlines()}
    return sorted(KernelVersion.parse(m.group(1)) for m in found if m)


def newest(cache: Path, major: int) -> tuple[str, str]:
    """The newest linux-source-<major>.Y of sid and experimental: (series, suite)."""
    best: tuple[KernelVersion, str] | None = None
    for suite in SUITES:
        a = Archive(suite, cache)
        with a.locked():
            update(a)
            offered = sources_offered(a)
        for v in offered:
            if v.major == major and (best is None or v > best[0]):
                best = (v, suite)
    if best is None:
        raise ArchiveError(f'neither {" nor ".join(SUITES)} offers a linux-source-{major}.Y')
    return best[0].series, best[1]


def cached_source(cache: Path, series: str) -> Path | None:
    """The tarball of linux-source-<series> fetch_source() unpacked, if it did."""
    package = f'linux-source-{series}'
    have = sorted((cache / 'debian').glob(f'{package}_*/usr/src/{package}.tar.xz'))
    if not have:
        return None
    # extracted as root: only from folders and a file of the user's alone
    rel = have[-1].relative_to(cache / 'debian')
    paths.trusted_file(paths.cache_subdir(cache, 'debian', *rel.parts[:-1]) / rel.name)
    return have[-1]


def fetch_source(cache: Path, series: str, suite: str) -> Path:
    """Debian's linux-source-<series> from suite, unpacked once into the cache (never
    installed); the path of its tarball."""
    a = Archive(suite, cache)
    package = f'linux-source-{series}'
    base = cache / 'debian'
    with filelock.exclusive(paths.cache_subdir(cache, 'debian') / '.lock'):
        have = cached_source(cache, series)
        if have:
            return have
        with a.locked(), tempfile.TemporaryDirectory(prefix=f'.{package}-', dir=base) as tmp:
            update(a)
            version = candidate(a, package)
            if not version:
                raise ArchiveError(f'Debian {suite} offers no {package}; the series there: '
                                   + ', '.join(str(v) for v in sources_offered(a)))
            progress.say(f'downloading {package} {version} from Debian {suite} (apt-get '
                         'download: not installed)')
            download(a, [f'{package}={version}'], Path(tmp))
            debs = list(Path(tmp).glob(f'{package}_*.deb'))
            if len(debs) != 1:
                raise ArchiveError(f'apt-get download of {package} gave {len(debs)} files')
            unpacked = Path(tmp) / 'x'
            unpack_deb(debs[0], unpacked)
            tarball = unpacked / 'usr' / 'src' / f'{package}.tar.xz'
            if not tarball.is_file():
                raise ArchiveError(f'{debs[0].name} holds no usr/src/{package}.tar.xz')
            dest = base / f'{package}_{version.replace(":", "_")}'
            shutil.rmtree(dest, ignore_errors=True)
            unpacked.rename(dest)
        return dest / 'usr' / 'src' / f'{package}.tar.xz'


def drop_setid(root: Path) -> None:
    """Clear setuid and setgid bits, and group and other write, under root (symlinks are
    left alone): what kloc extracted is the user's files, nothing more."""
    todo = [root]
    while todo:
        d = todo.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.is_symlink():
                    continue
                mode = e.stat(follow_symlinks=False).st_mode
                if mode & 0o6022:
                    os.chmod(e.path, stat.S_IMODE(mode) & ~0o6022)
                if e.is_dir(follow_symlinks=False):
                    todo.append(Path(e.path))


def unpack_deb(deb: Path, dest: Path) -> None:
    """A .deb's files into dest, like dpkg-deb -x but keeping no owner, no setuid bit
    (dpkg-deb -x run by root keeps the package's owners and modes)."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        feed = subprocess.Popen(['dpkg-deb', '--fsys-tarfile', str(deb)],
                                stdout=subprocess.PIPE)
    except FileNotFoundError:
        raise ArchiveError(f'dpkg-deb is missing: unpacking {deb.name} needs Debian\'s '
                           'dpkg') from None
    assert feed.stdout is not None
    with feed:
        untar = subprocess.run(['tar', '-x', *TAR_SAFE, '-f', '-', '-C', str(dest)],
                               stdin=feed.stdout)
        feed.stdout.close()
    if feed.returncode or untar.returncode:
        raise ArchiveError(f'unpacking {deb} into {dest} failed (dpkg-deb --fsys-tarfile '
                           f'exited {feed.returncode}, tar {untar.returncode}); check the '
                           'disk space (df -h), then run the same command again')
    drop_setid(dest)
