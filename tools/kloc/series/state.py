# SPDX-License-Identifier: GPL-2.0
"""The series' record in a tree's .kloc/, read as untrusted input.

kloc writes it only in its own copy of a tree (trees/workcopy.py): the
manifest (each managed file's original and installed hash) and the
originals. A tree given as KDIR may hold one an older kloc installed, and
anyone who could write the cache could have written the copy's. So every
document is checked in full as it is loaded, into a typed Manifest: its JSON
shape, every field's type, every hash. Every path in it must be a file the
package's series manages (a patch of the series touches it, or an `add`
line installs it), written as a plain relative path: normalised, no `..`,
not absolute, and with no symlink on the way, in the tree or in .kloc/orig;
.kloc/orig holds nothing else. Anything else is damage (DamagedStateError),
refused by name. A symlink in the tree on the way to a managed file is
refused (TreeLinkError): kloc never writes through a link.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kloc.errors import KlocError
from kloc.series.changes import Change, load_series
from kloc.series.patching import touched_files
from kloc.series.treefiles import STATE_DIR as STATE_DIR

LOCK = 'lock'           # an old kloc's tree lock (treelock.py, gone)
MANIFEST = 'manifest.json'
JOURNAL = 'journal.json'    # an old kloc's record of an install under way
ORIG = 'orig'
FORMAT = 2
FORCE_HINT = 'FORCE=1'
UNKNOWN = '?'           # a format-1 manifest's original whose saved copy is gone

_HASH = re.compile(r'[0-9a-f]{64}', re.ASCII)


class InstallError(KlocError):
    """The series cannot be installed into (or removed from) this tree as it is."""


class DamagedStateError(InstallError):
    """A file of the tree's .kloc/ is not as kloc writes it; nothing was written."""


class TreeLinkError(InstallError):
    """A symlink in the tree stands on the way to a file the package writes."""


class EditedFilesError(InstallError):
    """Files edited by hand would be overwritten; nothing was written."""


@dataclass(frozen=True)
class ManagedFile:
    """One managed file: its original and its installed content, by hash."""
    original: str | None        # None: the tree did not have the file
    installed: str | None       # None: not known (a manifest of format 1)
    mode: int | None = None     # the original's permission bits


@dataclass
class Manifest:
    version: str
    series: list[str]
    files: dict[str, ManagedFile]

    def to_json(self) -> str:
        doc = {'format': FORMAT, 'version': self.version, 'series': self.series,
               'files': {rel: {'original': r.original, 'installed': r.installed,
                               'mode': r.mode} for rel, r in sorted(self.files.items())}}
        return json.dumps(doc, indent=1, sort_keys=True) + '\n'


def package_files(series: list[Change] | None = None) -> frozenset[str]:
    """Every file the series can manage, in a tree of any version it supports."""
    files: set[str] = set()
    for change in load_series() if series is None else series:
        for patch in change.patches.values():
            files.update(touched_files(patch.read_text()))
        files.update(a.dst for a in change.additions)
    return frozenset(files)


# --- paths ------------------------------------------------------------------

def _shown(text: str) -> str:
    """text for a one-line message: what cannot be printed escaped, and at most 80
    characters."""
    out = text if text.isprintable() else text.encode('unicode_escape').decode('ascii')
    return out if len(out) <= 80 else out[:77] + '...'


def _format(v: object) -> str:
    """Why a "format" field is not one kloc reads."""
    return f'format {_shown(json.dumps(v))} is not one this kloc writes ({FORMAT})'


def bad_path(rel: str, managed: frozenset[str]) -> str:
    """Why rel may not name a managed file ('' if it may): 'is an absolute path'."""
    if not rel:
        return 'is empty'
    if rel.startswith('/'):
        return 'is an absolute path'
    parts = rel.split('/')
    if '..' in parts:
        return 'leads out of the tree, by ..'
    if os.path.normpath(rel) != rel or '.' in parts or not rel.isprintable():
        return 'is not a plain relative path'
    if rel not in managed:
        return 'is not a file the package manages'
    return ''


def link_on_the_way(base: Path, rel: str) -> Path | None:
    """The first symlink among base/rel's components below base (rel itself included)."""
    p = base
    for part in rel.split('/'):
        p = p / part
        try:
            st = os.lstat(p)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(st.st_mode):
            return p
    return None


def _target(link: Path) -> str:
    try:
        return os.readlink(link)
    except OSError:
        return '?'


def check_tree(tree: Path, rels: Iterable[str]) -> None:
    """No symlink on the way to any managed file in the tree, nor at .kloc, or
    TreeLinkError."""
    state = tree / STATE_DIR
    if os.path.islink(state):
        raise TreeLinkError(f'{state} is a symlink (to {_target(state)}), where kloc keeps '
                            'the state of the tree as a folder: refused, nothing was written '
                            'through it; remove the link (it was not made by kloc)')
    for rel in sorted(rels):
        link = link_on_the_way(tree, rel)
        if link is not None:
            raise TreeLinkError(
                f'{link} is a symlink (to {_target(link)}), on the way to {rel}, a file '
                'the package writes: kloc writes only inside the tree, never through a '
                'link; put the real file or folder there (or use a tree without links '
                'there); nothing was written')


def read_regular(path: Path, damaged: Callable[[str], DamagedStateError]) -> bytes:
    """A file of .kloc/: a regular file, not read through a symlink (damaged(why) if not)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if os.path.islink(path):
            raise damaged(f'{path} is a symlink (to {_target(path)})') from None
        if isinstance(e, FileNotFoundError):
            raise damaged(f'{path} is missing') from None
        raise
    with os.fdopen(fd, 'rb') as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise damaged(f'{path} is not a regular file')
        return f.read()


# --- the folder -------------------------------------------------------------

def _load(path: Path, damaged: Callable[[str], DamagedStateError]) -> object:
    text = read_regular(path, damaged)
    try:
        return json.loads(text.decode())
    except UnicodeDecodeError:
        raise damaged('not text') from None
    except RecursionError:
        raise damaged('nested too deeply') from None
    except ValueError as e:
        raise damaged(f'not JSON: {e}') from None


def _fields(doc: object, where: str, required: Iterable[str], optional: Iterable[str] = (),
            ) -> dict[str, object]:
    """doc as an object with exactly these keys (the optional ones may be absent)."""
    if not isinstance(doc, dict):
        raise ValueError(f'{where} is not an object')
    keys = set(required) | set(optional)
    extra = sorted(k for k in doc if k not in keys)
    missing = sorted(k for k in required if k not in doc)
    if extra:
        raise ValueError(f'{where} has an unknown field "{_shown(extra[0])}"')
    if missing:
        raise ValueError(f'{where} has no "{missing[0]}"')
    return doc


def _hash(v: object, where: str, unknown: bool = False) -> str | None:
    if v is None or (isinstance(v, str) and (_HASH.fullmatch(v) or (unknown and v == UNKNOWN))):
        return v
    raise ValueError(f'{where} is not a SHA-256 hash or null')


def _mode(v: object, where: str) -> int | None:
    if v is None or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 0o777):
        return v
    raise ValueError(f'{where} is not a permission mode (0 to 0777) or null')


def _files(doc: Mapping[str, object], where: str, managed: frozenset[str]
           ) -> dict[str, object]:
    files = doc['files']
    if not isinstance(files, dict):
        raise ValueError(f'"files" {where} is not an object')
    for rel in files:
        why = bad_path(rel, managed)
        if why:
            raise ValueError(f'its entry "{_shown(rel)}" {why}')
    return files


def manifest_damage(path: Path) -> Callable[[str], DamagedStateError]:
    def damaged(why: str) -> DamagedStateError:
        return DamagedStateError(f'{path} is damaged ({why}); run the same command with '
                                 f'{FORCE_HINT} to set it aside and rebuild it from the tree '
                                 'and the series')
    return damaged


def parse_manifest(doc: object, managed: frozenset[str],
                   saved: Callable[[str], str | None] | None) -> Manifest:
    """A manifest document, checked in full (ValueError: what is wrong). Format 1 maps
    each file to whether it had an original: saved(rel) gives that original's hash
    (None: not saved); without saved, only format 2 is accepted."""
    m = _fields(doc, 'the manifest', ('files',), ('format', 'version', 'series'))
    fmt = m.get('format', 1)
    if type(fmt) is not int or fmt not in (1, FORMAT) or (fmt == 1 and saved is None):
        raise ValueError(_format(fmt))
    version, series = m.get('version', ''), m.get('series', [])
    if not isinstance(version, str):
        raise ValueError('"version" is not a string')
    if not isinstance(series, list) or not all(isinstance(s, str) for s in series):
        raise ValueError('"series" is not a list of names')
    files: dict[str, ManagedFile] = {}
    for rel, v in _files(m, 'of the manifest', managed).items():
        where = f'the entry for {rel}'
        if fmt == 1:
            if not isinstance(v, bool):
                raise ValueError(f'{where} is not true or false (format 1)')
            assert saved is not None
            files[rel] = ManagedFile((saved(rel) or UNKNOWN) if v else None, None)
            continue
        e = _fields(v, where, ('original', 'installed'), ('mode',))
        files[rel] = ManagedFile(_hash(e['original'], f'{where}: "original"', unknown=True),
                                 _hash(e['installed'], f'{where}: "installed"'),
                                 _mode(e.get('mode'), f'{where}: "mode"'))
    return Manifest(version, list(series), files)


def load_manifest(tree: Path, managed: frozenset[str]) -> Manifest | None:
    """The tree's manifest, checked with its saved originals; None if there is none."""
    state = tree / STATE_DIR
    path = state / MANIFEST
    damaged = manifest_damage(path)
    check_state_dir(tree, damaged)
    if not os.path.lexists(path):
        return None
    orig = state / ORIG

    def saved(rel: str) -> str | None:
        p = orig / rel
        if link_on_the_way(orig, rel) or not p.is_file():
            return None
        return hashlib.sha256(read_regular(p, damaged)).hexdigest()
    try:
        m = parse_manifest(_load(path, damaged), managed, saved)
    except ValueError as e:
        raise damaged(str(e)) from None
    check_saved(tree, ORIG, m.files, damaged)
    _check_orig_dir(orig, managed, damaged)
    return m


def read_manifest(tree: Path, series: list[Change] | None = None) -> Manifest | None:
    """The tree's manifest, checked in full; None if there is none.

    Its files are checked against the series (the package's by default).
    """
    return load_manifest(tree, package_files(series))


def is_installed(tree: Path) -> bool:
    return (tree / STATE_DIR / MANIFEST).exists()


def check_state_dir(tree: Path, damaged: Callable[[str], DamagedStateError]) -> None:
    state = tree / STATE_DIR
    for p in (state, state / ORIG):
        if os.path.islink(p):
            raise damaged(f'{p} is a symlink (to {_target(p)})')


def check_saved(tree: Path, folder: str, rels: Iterable[str],
                damaged: Callable[[str], DamagedStateError]) -> None:
    """No symlink on the way to any saved copy .kloc/<folder>/<rel>."""
    base = tree / STATE_DIR / folder
    for rel in sorted(rels):
        link = link_on_the_way(base, rel)
        if link is not None:
            raise damaged(f'{link} is a symlink (to {_target(link)})')


def _check_orig_dir(orig: Path, managed: frozenset[str],
                    damaged: Callable[[str], DamagedStateError]) -> None:
    """.kloc/orig holds folders and the saved originals of managed files, nothing else."""
    if not orig.is_dir():
        return
    for dirpath, dirs, names in os.walk(orig):
        for name in sorted(dirs + names):
            p = Path(dirpath) / name
            st = os.lstat(p)
            rel = str(p.relative_to(orig))
            if stat.S_ISLNK(st.st_mode):
                raise damaged(f'{p} is a symlink (to {_target(p)})')
            if stat.S_ISDIR(st.st_mode):
                if not any(f.startswith(rel + '/') for f in managed):
                    raise damaged(f'{p} is no folder of a file the package manages')
            elif not stat.S_ISREG(st.st_mode):
                raise damaged(f'{p} is not a regular file')
            elif rel not in managed and not name.endswith('.kloc-tmp'):
                raise damaged(f'{p} is not the original of a file the package manages')
