# SPDX-License-Identifier: GPL-2.0
"""Install the package's series into a kernel tree, and take it out again.

Nothing is written until every change has been applied in memory. The tree
keeps the originals under .kloc/, so uninstall restores it byte for byte.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .apply import Contents, HunkError, apply_patch, touched_files
from .series import Change, SeriesError
from .version import KernelVersion
from .errors import KlocError

STATE_DIR = '.kloc'
MANIFEST = 'manifest.json'


class InstallError(KlocError):
    """The series cannot be installed into this tree; nothing was written."""


@dataclass
class Step:
    """One change of the series, applied: the files before and after it."""
    change: Change
    before: Contents
    after: Contents


@dataclass
class Plan:
    pristine: Contents
    final: Contents
    steps: list[Step] = field(default_factory=list)


def _read(tree: Path, rel: str) -> bytes | None:
    p = tree / rel
    return p.read_bytes() if p.is_file() else None


def _manifest(tree: Path) -> dict[str, object] | None:
    try:
        data = json.loads((tree / STATE_DIR / MANIFEST).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise InstallError(f'{tree / STATE_DIR / MANIFEST} is damaged ({e}); restore the '
                           'tree by hand before installing again') from e
    assert isinstance(data, dict)
    return data


def _manifest_files(m: dict[str, object]) -> dict[str, bool]:
    files = m.get('files', {})
    assert isinstance(files, dict)
    return {str(k): bool(v) for k, v in files.items()}


PristineFn = Callable[[str], 'bytes | None']


def pristine_reader(tree: Path) -> tuple[dict[str, bool], PristineFn]:
    m = _manifest(tree)
    installed = _manifest_files(m) if m else {}

    def read(rel: str) -> bytes | None:
        if rel in installed:
            if not installed[rel]:
                return None
            return (tree / STATE_DIR / 'orig' / rel).read_bytes()
        return _read(tree, rel)
    return installed, read



def plan(tree: Path, version: KernelVersion, series: list[Change]) -> Plan:
    """Apply the whole series in memory, starting from the pristine tree."""
    _, read = pristine_reader(tree)
    state: Contents = {}
    pristine: Contents = {}

    def load(rel: str) -> None:
        if rel not in state:
            pristine[rel] = state[rel] = read(rel)

    result = Plan(pristine, state)
    for change in series:
        before: Contents = {}
        after: Contents = {}
        try:
            patch = change.patch_for(version)
        except SeriesError as e:
            raise InstallError(str(e)) from e
        if patch is not None:
            for rel in touched_files(patch.read_text()):
                load(rel)
                before[rel] = state[rel]
            try:
                out = apply_patch(patch, state, change.name)
            except HunkError as e:
                raise InstallError(f'Linux {version} at {tree}: {e}') from e
            state.update(out)
            after.update(out)
        for add in change.additions:
            load(add.dst)
            if pristine[add.dst] is not None and add.dst not in before:
                raise InstallError(f'{tree / add.dst} already exists in the tree; '
                                   'it is not ours to replace')
            before.setdefault(add.dst, state[add.dst])
            state[add.dst] = after[add.dst] = add.src.read_bytes()
        result.steps.append(Step(change, before, after))
    return result


def _write(path: Path, data: bytes, mode: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + '.kloc-tmp')
    tmp.write_bytes(data)
    if mode is not None:
        os.chmod(tmp, mode)
    elif path.exists():
        shutil.copymode(path, tmp)
    tmp.replace(path)


def _restore(tree: Path, rel: str, had_original: bool) -> None:
    target = tree / rel
    if had_original:
        orig = tree / STATE_DIR / 'orig' / rel
        data = orig.read_bytes()
        if _read(tree, rel) != data:
            _write(target, data, os.stat(orig).st_mode & 0o7777)
    elif target.exists():
        target.unlink()
        parent = target.parent
        while parent != tree and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent


def install(tree: Path, version: KernelVersion, series: list[Change]) -> list[str]:
    """Make the tree carry the series; return the files written (none if current)."""
    p = plan(tree, version, series)
    installed, _ = pristine_reader(tree)
    written: list[str] = []
    state = tree / STATE_DIR
    for rel, data in sorted(p.final.items()):
        if rel not in installed:
            orig = p.pristine[rel]
            if orig is not None:
                _write(state / 'orig' / rel, orig, os.stat(tree / rel).st_mode & 0o7777)
        if _read(tree, rel) != data:
            assert data is not None
            _write(tree / rel, data)
            written.append(rel)
    for rel, had in installed.items():
        if rel not in p.final:
            _restore(tree, rel, had)
            written.append(rel)
    files = {rel: p.pristine[rel] is not None for rel in p.final}
    manifest = {'version': str(version), 'files': files,
                'series': [s.change.name for s in p.steps]}
    text = json.dumps(manifest, indent=1, sort_keys=True) + '\n'
    if not (state / MANIFEST).exists() or (state / MANIFEST).read_text() != text:
        _write(state / MANIFEST, text.encode())
    return written


def uninstall(tree: Path) -> list[str]:
    """Restore every file the install touched; return them."""
    m = _manifest(tree)
    if m is None:
        return []
    files = _manifest_files(m)
    for rel, had in sorted(files.items()):
        _restore(tree, rel, had)
    shutil.rmtree(tree / STATE_DIR)
    return sorted(files)


def is_installed(tree: Path) -> bool:
    return (tree / STATE_DIR / MANIFEST).exists()


def added_lines(p: Plan) -> list[tuple[str, int]]:
    """(path, 1-based line) of every line the series adds or changes."""
    out: list[tuple[str, int]] = []
    for rel, data in sorted(p.final.items()):
        after = (data or b'').decode(errors='replace').splitlines()
        before = (p.pristine.get(rel) or b'').decode(errors='replace').splitlines()
        sm = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
        for tag, _, _, j1, j2 in sm.get_opcodes():
            if tag in ('replace', 'insert'):
                out.extend((rel, j + 1) for j in range(j1, j2))
    return out
