# SPDX-License-Identifier: GPL-2.0
"""Where the package lives and where its caches go, and whether the cache can be trusted.

kloc runs as root, and what is in the cache ends up run as root (kernel
trees, ccache's configuration, qemu-plugin.h). So the cache is used only
when it is the invoking user's alone: the cache folder and each folder of
it that kloc uses are real folders (not symlinks) owned by the user and
writable by nobody else, and no folder above the cache lets others rename
it away (writable by others without the sticky bit, as /tmp has). Each
folder is checked once per process; a cache kloc makes is mode 0700.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import shutil
import stat
import time
from pathlib import Path

from kloc import defaults
from kloc.atomicfile import write_text
from kloc.errors import KlocError

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
QEMU_CONFIGS = PACKAGE_ROOT / 'tools' / 'qemu_configs'

# Folders (as strings) found trustworthy in this process.
_trusted: set[str] = set()


class CacheTrustError(KlocError):
    """The cache, or a folder or file kloc uses in it, is not the user's alone."""


def cache_path() -> Path:
    """Where the cache is: $KLOC_CACHE, else $XDG_CACHE_HOME/kloc, else ~/.cache/kloc
    (neither made nor checked: cache_dir() does that)."""
    explicit = os.environ.get('KLOC_CACHE')
    if explicit:
        return Path(explicit).expanduser().resolve()
    xdg = os.environ.get('XDG_CACHE_HOME') or str(Path.home() / '.cache')
    return Path(xdg).expanduser().resolve() / 'kloc'


def dropped_edits_dir() -> Path:
    """Where a command keeps hand-edited files it replaces (FORCE=1, a damaged
    tree): one folder per command, the pid too, so that two commands started
    in the same second never write each other's."""
    return cache_dir() / 'dropped-edits' / f'{time.strftime("%Y%m%d-%H%M%S")}-{os.getpid()}'


def cache_dir() -> Path:
    """$KLOC_CACHE, else $XDG_CACHE_HOME/kloc, else ~/.cache/kloc.

    A cache that exists is checked (once per process): one that someone
    else owns or can write is refused with CacheTrustError. A missing one
    is made, mode 0700, by the first command that writes in it
    (cache_subdir()).
    """
    path = cache_path()
    if os.path.lexists(path):
        _check_root(path, create=False)
    return path


def cache_subdir(cache: Path, *parts: str) -> Path:
    """cache/parts..., each level checked from the cache down (once per process), and
    made, mode 0700, where missing (the cache itself as mkdir -p would, its parents
    with the usual modes)."""
    names = [plain_name(part, 'a folder name, one level of the cache') for part in parts]
    root = _check_root(cache, create=True)
    path = root
    for part in names:
        path = path / part
        _make(path, root)
    return path


def plain_name(name: str, what: str) -> str:
    """name, if it names an entry of one folder (not empty, '.', '..', nor a path); else
    KlocError saying it is to be what."""
    if not name or name in ('.', '..') or '/' in name:
        raise KlocError(f'{name!r}: {what}, not a path')
    return name


def _make(path: Path, root: Path) -> None:
    """path made (mode 0700) if missing, and checked unless this process did so already
    (a folder removed since, by a test's cleanup or by hand, is made again)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if str(path) in _trusted:
            return
    _check_owned(path, root)
    _trusted.add(str(path))


def trusted_dir(path: Path) -> Path:
    """A folder kloc writes state into (locks, stamps): made if missing, then checked
    like the cache's folders. One in the cache ($KLOC_CACHE) is checked level by
    level from the cache down; another one is checked itself."""
    root = cache_path()
    absolute = Path(os.path.abspath(path))
    if absolute == root or root in absolute.parents:
        return cache_subdir(root, *absolute.relative_to(root).parts)
    absolute.parent.mkdir(parents=True, exist_ok=True)
    _make(absolute, absolute)
    return absolute


def _check_root(cache: Path, create: bool) -> Path:
    """The cache folder, resolved; checked with the folders above it (once per process)."""
    root = cache.expanduser().resolve()
    if str(root) not in _trusted:
        _check_above(root)
    if create:
        root.parent.mkdir(parents=True, exist_ok=True)
        _make(root, root)
    elif os.path.lexists(root) and str(root) not in _trusted:
        _check_owned(root, root)
        _trusted.add(str(root))
    return root


def _check_above(root: Path) -> None:
    """No folder above the cache lets other users rename it or put another in its place."""
    for parent in root.parents:
        try:
            st = os.lstat(parent)
        except FileNotFoundError:
            continue
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise CacheTrustError(
                f'{parent}, a folder above the cache {root}, is writable by '
                f'{_who(st.st_mode)} (mode {stat.S_IMODE(st.st_mode):04o}, no sticky bit): '
                'they could put a cache of their own in its place; chmod go-w '
                f'{parent} (or +t), or point KLOC_CACHE at a folder of your own')


def _check_owned(path: Path, root: Path) -> None:
    """path is a real folder of the user that nobody else can write, or CacheTrustError."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    me = os.geteuid()
    fix = (f'kloc uses only a cache that is yours alone: chown -R {_name(me)} {root} && '
           f'chmod -R go-w {root}, or point KLOC_CACHE at a folder of your own')
    if stat.S_ISLNK(st.st_mode):
        raise CacheTrustError(f'{path} is a symlink (to {_target(path)}) where kloc '
                              f'keeps a folder of its cache; remove it (rm {path}) if you '
                              'did not make it, or point KLOC_CACHE at a folder of your own')
    if not stat.S_ISDIR(st.st_mode):
        raise CacheTrustError(f'{path} is not a folder, where kloc keeps one of its cache; '
                              f'move it away, or point KLOC_CACHE at a folder of your own')
    if st.st_uid != me:
        raise CacheTrustError(f'{path} belongs to {_name(st.st_uid)}, not to you '
                              f'({_name(me)}); {fix}')
    if st.st_mode & 0o022:
        raise CacheTrustError(f'{path} is writable by {_who(st.st_mode)} (mode '
                              f'{stat.S_IMODE(st.st_mode):04o}); {fix}')


def _who(mode: int) -> str:
    return ' and '.join(w for w, bit in (('its group', 0o020), ('all users', 0o002))
                        if mode & bit)


def _target(link: Path) -> str:
    try:
        return os.readlink(link)
    except OSError:
        return '?'


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f'uid {uid}'


def open_state_file(path: Path) -> int:
    """Open (made if missing, mode 0600) a state file kloc writes, such as a lock, for
    writing; never through a symlink, and only a regular file of the user's.
    Returns the file descriptor (close-on-exec)."""
    try:
        st: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        _check_state_file(path, st)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as e:
        # ELOOP: a symlink; ENXIO: a FIFO; EISDIR: a folder (one put there meanwhile)
        if e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            _check_state_file(path, os.lstat(path))
        raise
    try:
        _check_state_file(path, os.fstat(fd))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_state_file(path: Path, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise CacheTrustError(f'{path} is a symlink (to {_target(path)}), where kloc '
                              f'keeps a file of its own: refused, nothing was written '
                              f'through it; remove it (rm {path}) and check who can write '
                              f'{path.parent}')
    if not stat.S_ISREG(st.st_mode):
        raise CacheTrustError(f'{path} is not a regular file, where kloc keeps one of its '
                              f'own: refused; move it away (it was not made by kloc)')
    if st.st_uid != os.geteuid():
        raise CacheTrustError(f'{path} belongs to {_name(st.st_uid)}, not to you '
                              f'({_name(os.geteuid())}): refused; remove it and check who '
                              f'can write {path.parent}')


def trusted_file(path: Path) -> Path:
    """path, if it is a regular file of the user's that nobody else can write (in a
    folder checked by the caller), else CacheTrustError."""
    st = os.lstat(path)
    _check_state_file(path, st)
    if st.st_mode & 0o022:
        raise CacheTrustError(f'{path} is writable by {_who(st.st_mode)} (mode '
                              f'{stat.S_IMODE(st.st_mode):04o}): refused; chmod go-w {path} '
                              'if it is yours, or point KLOC_CACHE at a folder of your own')
    return path


def write_state_file(path: Path, text: str) -> None:
    """Replace a file kloc keeps in the cache, whole (mode 0600): written to a new
    temporary file and renamed over path, so a symlink planted there is replaced,
    never followed."""
    trusted_dir(path.parent)
    try:
        st = path.lstat()
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and \
                stat.S_IMODE(st.st_mode) == 0o600 and path.read_bytes() == text.encode():
            return
    except FileNotFoundError:
        pass
    write_text(path, text, mode=0o600)


# OUT: kloc marks the folder it writes results in, so that make clean removes
# only what kloc made there (never a folder of the user's, nor through a symlink).
OUT_MARKER = '.kloc-out'
# What kloc and its scripts write at the top of OUT; make clean removes these from a
# folder kloc did not make (unless they were there before kloc marked it).
OUT_ENTRIES = ('kunit', 'mutants', 'guest', 'compare', 'review', 'lava', 'patches',
               'known-failures', 'kselftest', 'lint', 'test', 'bench-aa')


class OutError(KlocError):
    """OUT is not a folder that make clean may remove, or its marker is damaged."""


def require_absolute_out(out: Path) -> None:
    """A command's request holds OUT absolute: the commands it runs (make -C, rsync)
    run in other folders, where a relative OUT names nothing."""
    if not out.is_absolute():
        raise ValueError(f'{out}: OUT must be absolute here (the commands run in other '
                         'folders)')


def mark_out(out: Path) -> Path:
    """OUT, made if missing (with its parents), and marked as kloc's: OUT_MARKER says
    whether kloc made the folder (make clean then removes it whole) or found it (make
    clean then removes only OUT_ENTRIES that were not there before). Returns OUT,
    resolved. Call it once the command has checked its inputs, before it writes."""
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(out)
        made = True
    except FileExistsError:
        made = False
    marker = out / OUT_MARKER
    if os.path.lexists(marker):
        return out
    before = [] if made else sorted(n for n in os.listdir(out) if n != OUT_MARKER)
    write_text(marker, json.dumps({'made_by': 'kloc', 'made': made, 'before': before},
                                  indent=1) + '\n')
    return out


def _out_marker(given: str, path: Path) -> tuple[bool, list[str]]:
    """OUT's marker, read and checked: (kloc made OUT, the names in it before), or
    OutError naming OUT and the way out."""
    marker = path / OUT_MARKER
    keep = (f'make clean removes only a folder kloc marked as its own; remove {path} '
            'yourself if nothing in it is yours')
    try:
        st = os.lstat(marker)
    except FileNotFoundError:
        raise OutError(f'OUT={defaults.shown(given)} has no {OUT_MARKER}: kloc did not make '
                       f'this folder (or made it before it marked its folders); {keep}') \
            from None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        raise OutError(f'OUT={defaults.shown(given)}: {marker} is not a file of yours '
                       f'(owner {_name(st.st_uid)}); {keep}')
    try:
        m = json.loads(marker.read_text())
    except (ValueError, UnicodeDecodeError):
        m = None
    made = m.get('made') if isinstance(m, dict) else None
    before = m.get('before') if isinstance(m, dict) else None
    if not isinstance(made, bool) or not isinstance(before, list) or \
            not all(isinstance(n, str) for n in before):
        raise OutError(f'OUT={defaults.shown(given)}: {marker} is damaged; {keep}')
    return made, [str(n) for n in before]


def check_out(given: str) -> Path | None:
    """OUT as make clean may remove it, or OutError; None when there is nothing.

    given is OUT as the user wrote it: OUT=link/ names the link, not the folder
    it points to. Refused: a symlink, a file, a folder without kloc's marker."""
    if not given:
        raise OutError('OUT= is empty: give make clean the folder kloc wrote in')
    text = given.rstrip('/') or '/'
    path = Path(text)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise OutError(f'OUT={defaults.shown(given)} is a symlink (to {_target(path)}): make '
                       'clean removes nothing through a link; give OUT= the folder itself, '
                       f'or remove the link (rm {text})')
    if not stat.S_ISDIR(st.st_mode):
        raise OutError(f'OUT={defaults.shown(given)} is not a folder: kloc did not make it; '
                       'make clean leaves it alone')
    _out_marker(given, path)
    return path


def clean_out(given: str) -> tuple[list[str], list[str]]:
    """Remove what kloc wrote in OUT (check_out() first): the whole folder when kloc made
    it, else kloc's entries and the marker. Returns (removed, kept): the paths removed,
    and kloc's entry names left because they were there before kloc marked OUT."""
    path = check_out(given)
    if path is None:
        return [], []
    made, before = _out_marker(given, path)
    if made:
        shutil.rmtree(path)
        return [str(path)], []
    removed, kept = [], []
    for name in OUT_ENTRIES:
        entry = path / name
        if not os.path.lexists(entry):
            continue
        if name in before:
            kept.append(name)
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(str(entry))
    (path / OUT_MARKER).unlink()
    return removed, kept
