# SPDX-License-Identifier: GPL-2.0
"""Apply a unified diff to in-memory file contents with GNU patch, strictly.

The diff may be plain (diff -u) or git's: besides changed files, git's
extended headers create and delete files (new file mode, deleted file mode,
or a /dev/null name), rename and copy them (rename from/to, copy from/to,
with or without hunks), and change their mode (old mode/new mode). The
files are the Contents model: tree-relative path -> bytes, None = absent
(a deleted file, the old name of a renamed one); their permission bits, a
separate Modes map.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from kloc.errors import KlocError

Contents = dict[str, bytes | None]  # tree-relative path -> bytes, None = absent
Modes = dict[str, int]              # tree-relative path -> permission bits (0o644, 0o755)
DEFAULT_MODE = 0o644


class PatchError(KlocError):
    """The patch cannot be read, or applied, as given; the message says why."""


class HunkError(PatchError):
    """A hunk does not apply; the message names the file and the hunk."""


@dataclass(frozen=True)
class FileChange:
    """What one file section of a diff does to the tree."""
    old: str | None          # the file it starts from; None: it creates `new`
    new: str | None          # the file it leaves; None: it deletes `old`
    mode: int | None = None  # permission bits it sets (git's new mode, new file mode)
    copy: bool = False       # git's copy from/to: `old` stays as it is
    git: bool = False        # a git diff, whose names patch takes as written
    hunks: int = 0

    @property
    def verb(self) -> str:
        if self.old is None:
            return 'creates'
        if self.new is None:
            return 'deletes'
        if self.copy:
            return 'copies'
        if self.git and self.old != self.new:
            return 'renames'
        if not self.hunks and self.mode is not None:
            return 'changes the mode of'
        return 'changes'


_EXT = re.compile(r'(old mode|new mode|deleted file mode|new file mode|copy from|copy to|'
                  r'rename from|rename to|rename old|rename new|similarity index|'
                  r'dissimilarity index|index) (.*)$')
_HUNK = re.compile(r'@@ -\d+(?:,(\d{1,9}))? \+\d+(?:,(\d{1,9}))? @@')
_MODE = re.compile(r'[0-7]{6}')
_QUOTED_ESCAPES = {'a': '\a', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t',
                   'v': '\v', '"': '"', '\\': '\\'}


def _unquote(s: str) -> str:
    """git's C-style quoted name ("a/t\\303\\251st" -> a/tést)."""
    out = bytearray()
    i = 1
    while i < len(s) and s[i] != '"':
        c = s[i]
        if c == '\\' and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt in '01234567' and re.fullmatch(r'[0-7]{3}', s[i + 1:i + 4]):
                out.append(int(s[i + 1:i + 4], 8) & 0xff)
                i += 4
                continue
            out += _QUOTED_ESCAPES.get(nxt, nxt).encode()
            i += 2
            continue
        out += c.encode('utf-8', 'surrogateescape')
        i += 1
    return out.decode('utf-8', 'replace')


def _safe(name: str) -> str:
    """A tree-relative path, normalised; a name that leaves the tree is refused."""
    if '\0' in name:
        raise PatchError(f'the patch names a file with a NUL byte ({name!r}); '
                         'it is not a text diff of a kernel tree')
    parts = [p for p in name.split('/') if p not in ('', '.')]
    if '..' in parts:
        raise PatchError(f'the patch names {name}, which is outside the tree: kloc '
                         'applies patches to files inside the kernel tree only')
    return '/'.join(parts)


def _strip(name: str) -> str | None:
    """The name as patch -p1 sees it: the first component dropped; None: no usable name."""
    if name.startswith('"'):
        name = _unquote(name)
    else:
        name = name.split('\t')[0].rstrip()
    if name == '/dev/null':
        return None
    _, slash, rest = name.partition('/')
    if not slash:
        return None
    return _safe(rest) or None


def _header_names(rest: str) -> tuple[str | None, str | None]:
    """The two names of "diff --git a/X b/Y", -p1 stripped."""
    rest = rest.rstrip()
    if rest.startswith('"'):
        end = 1
        while end < len(rest) and (rest[end] != '"' or rest[end - 1] == '\\'):
            end += 1
        return _strip(rest[:end + 1]), _strip(rest[end + 1:].strip())
    cuts = [m.start() for m in re.finditer(' ', rest)]
    # a/P b/P: the cut where both halves agree past their first slash. The slash
    # after each place is found once, so a long line costs linear time.
    first = rest.find('/')
    after = [-1] * (len(rest) + 1)
    for k in range(len(rest) - 1, -1, -1):
        after[k] = k if rest[k] == '/' else after[k + 1]
    for cut in cuts:
        slash = after[cut + 1]
        if 0 <= first < cut and slash >= 0 and cut - first == len(rest) - slash \
                and rest[first + 1:cut] == rest[slash + 1:]:
            return _strip(rest[:cut]), _strip(rest[cut + 1:])
    if len(cuts) == 1:
        return _strip(rest[:cuts[0]]), _strip(rest[cuts[0] + 1:])
    return None, None


def _mode(value: str) -> int:
    m = _MODE.match(value.strip())
    if not m:
        raise PatchError(f'mode {value.strip()!r} in the patch is not a git file mode '
                         '(100644 or 100755)')
    mode = int(m.group(0), 8)
    if stat.S_IFMT(mode) != stat.S_IFREG:
        what = {stat.S_IFLNK: 'a symbolic link', 0o160000: 'a submodule'}.get(
            stat.S_IFMT(mode), f'a file of mode {m.group(0)}')
        raise PatchError(f'the patch makes {what}: kloc applies changes to regular '
                         'files only; leave it out of the patch')
    return stat.S_IMODE(mode)


class _Section:
    """One file's part of the diff, as it is read."""

    def __init__(self, git: bool, a: str | None = None, b: str | None = None) -> None:
        self.git, self.a, self.b = git, a, b
        self.minus: str | None = None      # the --- name, '' for /dev/null
        self.plus: str | None = None
        self.rename: tuple[str | None, str | None] = (None, None)
        self.copy: tuple[str | None, str | None] = (None, None)
        self.created = self.deleted = False
        self.mode: int | None = None
        self.hunks = 0
        self.headers = 0                   # extended header lines seen

    def change(self) -> FileChange | None:
        if not self.git:
            if self.minus is None or self.plus is None:
                return None
            old, new = self.minus or None, self.plus or None
            if old is None and new is None:
                return None
            return FileChange(old, new, hunks=self.hunks)
        if not self.headers and self.minus is None and not self.hunks:
            return None                    # "diff --git" and nothing else
        src = self.rename[0] or self.copy[0]
        dst = self.rename[1] or self.copy[1]
        old = src or (self.minus if self.minus is not None else self.a) or None
        new = dst or (self.plus if self.plus is not None else self.b) or None
        if self.created or (self.minus == '' and not src):
            old = None
        if self.deleted or (self.plus == '' and not dst):
            new = None
        if old is None and new is None:
            return None
        return FileChange(old, new, self.mode, bool(self.copy[0] or self.copy[1]), True,
                          self.hunks)


def _skip_hunk(lines: list[str], i: int, old: int, new: int) -> int:
    """The index of the first line after a hunk body that starts at i."""
    while i < len(lines) and (old > 0 or new > 0):
        c = lines[i][:1]
        if c in (' ', '', '\r'):
            old, new = old - 1, new - 1
        elif c == '-':
            old -= 1
        elif c == '+':
            new -= 1
        elif c != '\\':
            break
        i += 1
    while i < len(lines) and lines[i].startswith('\\'):
        i += 1
    return i


def file_changes(patch_text: str) -> list[FileChange]:
    """Every file section of a diff (or an mbox of them), in order.

    Raises PatchError for a name outside the tree, or a symlink or submodule.
    """
    return [c for _, _, c in _sections(patch_text)]


def _sections(patch_text: str) -> list[tuple[int, int, FileChange]]:
    """(first line, line after the last, change) of each file section."""
    lines = [ln.rstrip('\r') for ln in patch_text.split('\n')]
    out: list[tuple[int, int, FileChange]] = []
    cur: _Section | None = None
    start = 0
    in_header = False

    def flush(end: int) -> None:
        nonlocal cur
        if cur is not None:
            c = cur.change()
            if c is not None:
                out.append((start, end, c))
        cur = None

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith('diff --git '):
            flush(i)
            cur, start = _Section(True, *_header_names(line[len('diff --git '):])), i
            in_header = True
            i += 1
            continue
        if in_header and cur is not None:
            m = _EXT.match(line)
            if m:
                key, value = m.group(1), m.group(2)
                cur.headers += 1
                name = _safe(_unquote(value) if value.startswith('"') else value) or None
                if key in ('rename from', 'rename old'):
                    cur.rename = (name, cur.rename[1])
                elif key in ('rename to', 'rename new'):
                    cur.rename = (cur.rename[0], name)
                elif key == 'copy from':
                    cur.copy = (name, cur.copy[1])
                elif key == 'copy to':
                    cur.copy = (cur.copy[0], name)
                elif key == 'new file mode':
                    cur.created, cur.mode = True, _mode(value)
                elif key == 'deleted file mode':
                    cur.deleted = True
                    _mode(value)
                elif key == 'new mode':
                    cur.mode = _mode(value)
                elif key == 'old mode':
                    _mode(value)
                elif key == 'index' and ' ' in value.strip():
                    _mode(value.split()[-1])
                i += 1
                continue
        if line.startswith('--- ') and i + 1 < len(lines) and lines[i + 1].startswith('+++ '):
            minus, plus = _strip(line[4:]) or '', _strip(lines[i + 1][4:]) or ''
            if not (in_header and cur is not None and cur.minus is None):
                flush(i)
                cur, start = _Section(False), i
            cur.minus, cur.plus = minus, plus
            in_header = False
            i += 2
            continue
        m = _HUNK.match(line)
        if m and cur is not None and cur.minus is not None:
            cur.hunks += 1
            i = _skip_hunk(lines, i + 1, int(m.group(1) or 1), int(m.group(2) or 1))
            continue
        if in_header:                 # the git header ended with no ---/+++ pair
            flush(i)
            in_header = False
        i += 1
    flush(len(lines))
    return out


def touched_files(patch_text: str) -> list[str]:
    """Every tree-relative path the patch reads or writes, in order, once each."""
    names = [n for c in file_changes(patch_text) for n in (c.old, c.new) if n]
    return list(dict.fromkeys(names))


Problem = tuple[FileChange, str, str]     # the change, the path, 'missing' or 'exists'


def conflict(changes: list[FileChange], exists: Callable[[str], bool]) -> Problem | None:
    """The first change that needs a file the tree does not have, or would overwrite one.

    The changes run in order: a file an earlier one creates, deletes or
    renames is (or is no longer) there for a later one.
    """
    seen: dict[str, bool] = {}

    def have(rel: str) -> bool:
        if rel not in seen:
            seen[rel] = exists(rel)
        return seen[rel]

    for c in changes:
        if c.old is not None and c.new is not None and not c.git and c.old != c.new:
            if not have(c.old) and not have(c.new):   # patch takes whichever is there
                return c, c.new, 'missing'
            continue
        if c.old is not None and not have(c.old):
            return c, c.old, 'missing'
        if c.new is not None and c.new != c.old and have(c.new):
            return c, c.new, 'exists'
        if c.old is not None and c.new is not None and c.old != c.new and not c.copy:
            seen[c.old] = False
        elif c.old is not None and c.new is None:
            seen[c.old] = False
        if c.new is not None:
            seen[c.new] = True
    return None


def _explain(output: str, name: str) -> str:
    current = '?'
    problems: list[str] = []
    other: list[str] = []
    for line in output.splitlines():
        m = re.match(r'(?:patching|checking) file (\S+)', line)
        if m:
            current = m.group(1)
            continue
        m = re.match(r'Hunk #(\d+) FAILED at (\d+)', line)
        if m:
            problems.append(f'{current}: hunk #{m.group(1)} (at line {m.group(2)}) '
                            'does not apply')
        elif 'Reversed (or previously applied) patch detected' in line:
            problems.append(f'{current}: already carries this change (or a file it '
                            'deletes differs)')
        elif ("can't find file to patch" in line or 'No such file' in line
              or 'which does not exist' in line or 'without two valid file names' in line):
            problems.append(f'{current}: file is missing from the tree')
        elif 'which already exists' in line:
            problems.append(f'{current}: already exists in the tree')
        elif line.strip() and not line.startswith(('|', '-----', 'The text leading',
                                                   'Perhaps you')):
            other.append(line.strip())
    if not problems:
        problems.append('; '.join(other) or 'patch failed')
    return f'{name}: ' + '; '.join(dict.fromkeys(problems))


def apply_patch(patch: Path, state: Contents, label: str) -> Contents:
    """Return the contents of the files that patch touches, after applying it.

    Context must match exactly (no fuzz); offsets are accepted.
    """
    text = patch.read_text()
    if not file_changes(text):
        raise HunkError(f'{patch}: no "+++ b/..." lines; not a -p1 unified diff')
    return apply_text(text, state, {}, label, patch.name)[0]


_MAIL = re.compile(r'^From [0-9a-f]{40} ', re.MULTILINE)


def mails(text: str) -> list[str]:
    """An mbox split into its mails (text before the first one kept with it)."""
    starts = [m.start() for m in _MAIL.finditer(text)][1:]
    return [text[a:b] for a, b in zip([0] + starts, starts + [len(text)])]


def apply_text(text: str, state: Contents, modes: Modes, label: str,
               name: str = 'patch') -> tuple[Contents, Modes]:
    """Apply a diff (or an mbox of them) given as text, strictly.

    state and modes give each touched file as it is before (a file missing
    from modes is DEFAULT_MODE); the result: every touched path (None:
    absent after the patch), and the mode of each that is there. The mails
    of an mbox apply one after the other, as git am does them (GNU patch
    would take one input's renames as simultaneous).
    """
    files = touched_files(text)
    if not files:
        raise HunkError(f'{label}: {name}: no "+++ b/..." lines; not a -p1 unified diff')
    state = {f: state.get(f) for f in files}
    modes = {f: modes.get(f, DEFAULT_MODE) for f in files if state[f] is not None}
    parts = [m for m in mails(text) if file_changes(m)]
    with tempfile.TemporaryDirectory(prefix='kloc-patch-') as tmp:
        for k, part in enumerate(parts, 1):
            path = Path(tmp) / f'{k}.patch'
            path.write_bytes(part.encode('utf-8', 'surrogateescape'))
            which = name if len(parts) == 1 else f'{name} (mail {k} of {len(parts)})'
            out, out_modes = _apply(path, part, state, modes, label, which)
            state.update(out)
            for f, data in out.items():
                if data is None:
                    modes.pop(f, None)
                else:
                    modes[f] = out_modes[f]
    return state, modes


def _apply(patch: Path, text: str, state: Contents, modes: Modes, label: str,
           name: str) -> tuple[Contents, Modes]:
    changes = file_changes(text)
    files = touched_files(text)
    problem = conflict(changes, lambda rel: state.get(rel) is not None)
    if problem:
        c, rel, what = problem
        raise HunkError(f'{label}: {name}: {rel}: ' + (
            'file is missing from the tree' if what == 'missing'
            else f'already exists in the tree (the patch {c.verb} it)'))
    # GNU patch refuses to delete an empty file ("would empty out the file ...,
    # which is already empty"): git writes that deletion with no hunks. Those
    # sections are done here, and left out of what patch reads.
    emptied: list[str] = []
    keep = text.split('\n')
    for first, end, c in reversed(_sections(text)):
        if c.git and c.new is None and c.old is not None and not c.hunks:
            if state.get(c.old):
                raise HunkError(f'{label}: {name}: {c.old}: the patch deletes it with no '
                                'hunks, as if it were empty, and it is not')
            emptied.append(c.old)
            del keep[first:end]
    if emptied:
        text = '\n'.join(keep)
        patch = patch.with_name(patch.name + '.rest')
        patch.write_bytes(text.encode('utf-8', 'surrogateescape'))
    with tempfile.TemporaryDirectory(prefix='kloc-apply-') as tmp:
        root = Path(tmp)
        for f in files:
            data = state.get(f)
            if data is not None:
                try:
                    (root / f).parent.mkdir(parents=True, exist_ok=True)
                    (root / f).write_bytes(data)
                except (FileExistsError, NotADirectoryError, IsADirectoryError):
                    raise HunkError(f'{label}: {name}: {f} is both a file and a '
                                    'directory in the patch') from None
                os.chmod(root / f, modes.get(f, DEFAULT_MODE))
        for rel in emptied:
            (root / rel).unlink(missing_ok=True)
        if _sections(text):
            proc = subprocess.run(['patch', '-p1', '-F0', '-N', '--batch',
                                   '--no-backup-if-mismatch', '-r', '-', '-d', tmp,
                                   '-i', str(patch)],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  errors='replace')
            if proc.returncode != 0:
                raise HunkError(f'{label}: ' + _explain(proc.stdout + proc.stderr, name))
        out: Contents = {}
        out_modes: Modes = {}
        for f in files:
            p = root / f
            if p.is_symlink() or (p.exists() and not p.is_file()):
                raise HunkError(f'{label}: {name}: {f} is not a regular file after the '
                                'patch; kloc applies changes to regular files only')
            out[f] = p.read_bytes() if p.exists() else None
            if out[f] is not None:
                out_modes[f] = stat.S_IMODE(p.stat().st_mode)
        for dirpath, _, names in os.walk(root):
            for n in names:
                rel = str((Path(dirpath) / n).relative_to(root))
                if rel not in out:
                    raise HunkError(f'{label}: {name}: patch wrote {rel}, which kloc '
                                    'does not read as a file of this diff; give a plain '
                                    'git diff or diff -u a/ b/')
        return out, out_modes
