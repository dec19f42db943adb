# SPDX-License-Identifier: GPL-2.0
"""Counted boots by content: a boot whose inputs were counted before is not booted again.

A counted boot is deterministic (docs/counting.md): the same kernel image,
initramfs, QEMU and the files it loads, plugin, arguments, topology and seed
count the same, to the last access. So each good counted boot is stored under
the sha256 of a key naming all of them by their bytes (boot_key), with its
console and the plugin's raw counts; the figures are computed from those again
whenever they are read (guest.result), so a change to the figure code needs no
boot.

What the key holds: the QEMU command line, with every argument that names a
file replaced by the file's sha256 (the images, the initramfs, a -dtb, a
-bios, the plugin's .so), the counts file's own path left out; the QEMU
binary that PATH resolves, the binary kloc's wrapper starts, and every file
of QEMU's data folders (its ROMs and firmware: more than a boot loads, so an
unrelated ROM's change drops reuse too, never the other way round). Not in
it: the shared libraries QEMU links, and the host's CPU; neither changes what
TCG runs under icount.

The store is under the cache, shared by every command of this user, and read
as untrusted: an entry that is not exactly what kloc writes, or whose key is
not the boot's, is treated as absent (and said). Each command re-counts the
first boot it would reuse, as a check, before it hands any stored boot on; a
check that counts otherwise drops the whole store, says why, and boots
everything. A boot this command stored itself is reused without a check (the
comment-only patch's side is the base's boots), and never serves as the check.
A stored boot that today's checks refuse (guest.result) is booted instead.
KLOC_REUSE_COUNTS=0 turns reuse (not storing) off.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path

from kloc import atomicfile, progress
from kloc.digest import sha256_file
from kloc.paths import cache_dir, trusted_dir
from kloc.qemu import release

FORMAT = 'kloc-counted-boot-v1'
FOLDER = 'counted-boots'
OFF = 'KLOC_REUSE_COUNTS'           # =0: boot every counted boot, store them still
SYSTEM_DATA = Path('/usr/share/qemu')


@dataclass(frozen=True)
class Stored:
    """One counted boot, as it ran: its console and the plugin's JSON, untouched."""
    digest: str
    console: str
    counts: str
    seconds: float


def _file_digest(path: Path, memo: dict[tuple[str, int, int, int], str]) -> str:
    st = path.stat()
    k = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if k not in memo:
        memo[k] = sha256_file(path)
    return memo[k]


def _folder_digest(folder: Path, memo: dict[tuple[str, int, int, int], str]) -> str:
    """Every regular file under folder (links followed), by relative name and bytes."""
    h = sha256()
    if folder.is_dir():
        for root, dirs, files in os.walk(folder, followlinks=True):
            dirs.sort()
            for name in sorted(files):
                p = Path(root) / name
                if p.is_file():
                    h.update(f'{p.relative_to(folder)}\0{_file_digest(p, memo)}\n'.encode())
    return h.hexdigest()


def _qemu(binary: str, memo: dict[tuple[str, int, int, int], str]) -> dict[str, str]:
    """The QEMU a command runs, by content: what PATH resolves, and where that is kloc's
    wrapper (qemu/release.py), the binary it starts and the data folder it names."""
    found = shutil.which(binary)
    if found is None:
        raise FileNotFoundError(f'{binary} is not on PATH')
    path = Path(found).resolve()
    out = {'qemu': _file_digest(path, memo)}
    data = [path.parent.parent / 'share' / 'qemu']     # <prefix>/bin -> <prefix>/share
    r = release.in_use()
    if r is not None and path.parent == r.bin_dir.resolve():
        out['qemu_binary'] = _file_digest(r.root / 'usr' / 'bin' / path.name, memo)
        data = [r.root / 'usr' / 'share' / 'qemu', SYSTEM_DATA]    # its -L, then these
    out['qemu_data'] = sha256('\n'.join(_folder_digest(d, memo) for d in data).encode()
                              ).hexdigest()
    return out


def _argument(arg: str, counts: Path, memo: dict[tuple[str, int, int, int], str]) -> str:
    """arg with each comma-separated part that names a file replaced by its sha256,
    and the counts file's path by a name."""
    def named(path: str) -> str:
        """'<counts>' or '<sha256:...>' if path names the counts or a file, else ''."""
        if path == str(counts):
            return '<counts>'
        if os.path.isabs(path) and os.path.isfile(path):
            return f'<sha256:{_file_digest(Path(path), memo)}>'
        return ''

    parts = []
    for part in arg.split(','):
        name, eq, value = part.partition('=')
        whole = named(part)         # first: a path may hold '='
        if whole:
            parts.append(whole)
        elif eq and named(value):
            parts.append(f'{name}={named(value)}')
        else:
            parts.append(part)
    return ','.join(parts)


def boot_key(cmd: list[str], counts: Path,
             memo: dict[tuple[str, int, int, int], str] | None = None) -> dict[str, str]:
    """What a counted boot's command counts depends on, every file by its bytes."""
    m = {} if memo is None else memo
    key = {'format': FORMAT, **_qemu(cmd[0], m)}
    key['args'] = json.dumps([_argument(a, counts, m) for a in cmd[1:]])
    return key


def key_digest(key: dict[str, str]) -> str:
    return sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _entry(path: Path, digest: str, key: dict[str, str]) -> Stored | None:
    """The entry in path if it is one kloc wrote for key; None, said, if it is not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, 'rb') as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ValueError('not a regular file')
            d = json.loads(f.read().decode('utf-8'))
        if not isinstance(d, dict) or set(d) != {'format', 'key', 'console', 'counts',
                                                 'seconds'}:
            raise ValueError('not a stored boot')
        if d['format'] != FORMAT or d['key'] != key:
            raise ValueError('stored under this name for another boot')
        if not (isinstance(d['console'], str) and isinstance(d['counts'], str)
                and isinstance(d['seconds'], (int, float))
                and not isinstance(d['seconds'], bool)):
            raise ValueError('a field of the wrong type')
        json.loads(d['counts'])
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            e = OSError('not a regular file: a symbolic link')
        progress.say(f'stored counts {path}: not used ({e}); the boot runs')
        return None
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        progress.say(f'stored counts {path}: not used ({e}); the boot runs')
        return None
    return Stored(digest, d['console'], d['counts'], float(d['seconds']))


@dataclass
class CountStore:
    """The stored counted boots of one command: looked up, added to, checked once."""
    root: Path
    reuse: bool = True
    checked: bool = False           # a reused boot was re-counted and counted alike
    memo: dict[tuple[str, int, int, int], str] = field(default_factory=dict)
    saved: set[str] = field(default_factory=set)    # digests this command stored
    bypass: set[str] = field(default_factory=set)   # stored, but refused today: boot them

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / f'{digest}.json'

    def key(self, cmd: list[str], counts: Path) -> dict[str, str]:
        return boot_key(cmd, counts, self.memo)

    def lookup(self, key: dict[str, str]) -> Stored | None:
        digest = key_digest(key)
        if not self.reuse or digest in self.bypass:
            return None
        return _entry(self._path(digest), digest, key)

    def save(self, key: dict[str, str], console: str, counts: str, seconds: float) -> None:
        digest = key_digest(key)
        path = self._path(digest)
        trusted_dir(path.parent)
        atomicfile.write_text(path, json.dumps(
            {'format': FORMAT, 'key': key, 'console': console, 'counts': counts,
             'seconds': round(seconds, 2)}, sort_keys=True))
        self.saved.add(digest)

    def drop(self, why: str) -> None:
        """Remove every stored boot, and reuse none for the rest of the command."""
        self.reuse = False
        self.saved.clear()
        if self.root.is_dir() and not self.root.is_symlink():
            gone = Path(tempfile.mkdtemp(prefix=f'.{self.root.name}.dropped-',
                                         dir=self.root.parent))
            try:
                os.rename(self.root, gone)      # onto the empty folder: one step
            except FileNotFoundError:
                pass                            # another command dropped it first
            shutil.rmtree(gone, ignore_errors=True)
        progress.say(f'stored counts dropped: {why}; every counted boot of this command '
                     'runs')


_COMMAND: CountStore | None = None


def for_command() -> CountStore:
    """This command's store (one per process: one check per command)."""
    global _COMMAND
    if _COMMAND is None:
        _COMMAND = CountStore(cache_dir() / FOLDER, reuse=os.environ.get(OFF, '1') != '0')
    return _COMMAND


def differs(stored: Stored, console: str, counts: str) -> str:
    """'' when a re-count counted what was stored; else the first thing that differs."""
    from kloc.guests.guest import parse_console
    a, b = json.loads(stored.counts), json.loads(counts)
    if a != b:
        keys = sorted(set(a) | set(b)) if isinstance(a, dict) and isinstance(b, dict) else []
        first = next((k for k in keys if a.get(k) != b.get(k)), '')
        return f'the plugin counted otherwise{f" (first in {first!r})" if first else ""}'
    ra, rb = parse_console(stored.console)[0], parse_console(console)[0]
    if ra != rb:
        return 'the selftest reported otherwise'
    return ''
