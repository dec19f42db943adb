# SPDX-License-Identifier: GPL-2.0
"""Export the series as numbered mails in git format-patch style.

A series is one set: the new one is written whole into a hidden sibling
directory and swapped in for the old one, so a failed export (a full disk,
a kill) leaves the previous series as it was, never a cut-off patch in it.
"""

from __future__ import annotations

import ctypes
import difflib
import email.utils
import errno
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from kloc.atomicfile import sync_dir
from kloc.errors import DiskFullError, is_disk_full
from kloc.series.planning import InstallPlan, Step

DEFAULT_AUTHOR = 'Kernel Locality Tests <kloc@localhost>'


def author() -> str:
    """The git identity of whoever exports, else a placeholder."""
    def get(key: str) -> str:
        r = subprocess.run(['git', 'config', '--get', key], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else ''
    name, mail = get('user.name'), get('user.email')
    return f'{name} <{mail}>' if name and mail else DEFAULT_AUTHOR


def _lines(data: bytes | None) -> list[str]:
    if data is None:
        return []
    # Lines end at \n only, as for diff and patch: str.splitlines() would also
    # break at \f, \v, \r, \x1c-\x1e, \x85, \u2028 and \u2029, and cut
    # a line that holds one into a malformed hunk.
    return re.findall(r'[^\n]*\n|[^\n]+$', data.decode('utf-8', errors='surrogateescape'))


def file_diff(rel: str, before: bytes | None, after: bytes | None) -> str:
    a, b = _lines(before), _lines(after)
    head = [f'diff --git a/{rel} b/{rel}\n']
    if before is None:
        head.append('new file mode 100644\n')
    elif after is None:
        head.append('deleted file mode 100644\n')
    src = '/dev/null' if before is None else f'a/{rel}'
    dst = '/dev/null' if after is None else f'b/{rel}'
    body = list(difflib.unified_diff(a, b, src, dst, n=3))
    for i, line in enumerate(body):
        if not line.endswith('\n'):
            body[i] = line + '\n\\ No newline at end of file\n'
    # difflib writes '--- a/x\n' with a trailing tab-free date-less header already
    return ''.join(head + body)


def _diffstat(step: Step) -> str:
    rows = []
    total_add = total_del = 0
    for rel in sorted(step.after):
        a, b = _lines(step.before.get(rel)), _lines(step.after[rel])
        add = dele = 0
        for line in difflib.unified_diff(a, b, n=0):
            if line.startswith('+') and not line.startswith('+++'):
                add += 1
            elif line.startswith('-') and not line.startswith('---'):
                dele += 1
        total_add += add
        total_del += dele
        rows.append(f' {rel} | {add + dele} {"+" * min(add, 40)}{"-" * min(dele, 40)}')
    n = len(rows)
    rows.append(f' {n} file{"s" if n != 1 else ""} changed, {total_add} insertions(+), '
                f'{total_del} deletions(-)')
    return '\n'.join(rows) + '\n'


def mail(step: Step, index: int, total: int, who: str, base: str) -> str:
    diffs = ''.join(file_diff(rel, step.before.get(rel), step.after[rel])
                    for rel in sorted(step.after))
    date = email.utils.formatdate(localtime=False)
    sign = f'Signed-off-by: {who}'
    body = step.change.body.rstrip('\n')
    if sign not in body:
        body = (body + '\n\n' if body else '') + sign
    return (f'From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n'
            f'From: {who}\n'
            f'Date: {date}\n'
            f'Subject: [PATCH {index}/{total}] {step.change.subject}\n'
            f'\n{body}\n---\n'
            f'Base: Linux {base}\n\n'
            f'{_diffstat(step)}\n{diffs}--\nkloc\n\n')


def _name(index: int, step: Step) -> str:
    slug = ''.join(c if c.isalnum() else '-' for c in step.change.subject.lower())
    slug = '-'.join(filter(None, slug.split('-')))[:52]
    return f'{index:04d}-{slug}.patch'


def _write(path: Path, text: str) -> None:
    with path.open('wb') as f:
        f.write(text.encode())
        f.flush()
        os.fsync(f.fileno())


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one step (Linux renameat2); False where it cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _swap(new: Path, out: Path) -> None:
    """Put the directory new where out is; the old out goes only once new is there."""
    if not out.exists():
        os.rename(new, out)
        return
    if _exchange(new, out):
        shutil.rmtree(new, ignore_errors=True)     # now the old series
        return
    old = Path(tempfile.mkdtemp(prefix=f'.{out.name}.old.', suffix='.kloc-tmp',
                                dir=out.parent))
    os.rename(out, old)          # replaces the empty directory old
    try:
        os.rename(new, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def export(p: InstallPlan, out: Path, base: str) -> list[Path]:
    """Write the series as OUT/NNNN-subject.patch, replacing any series there."""
    out.parent.mkdir(parents=True, exist_ok=True)
    who = author()
    total = len(p.steps)
    new = Path(tempfile.mkdtemp(prefix=f'.{out.name}.', suffix='.kloc-tmp', dir=out.parent))
    try:
        names = []
        for i, step in enumerate(p.steps, 1):
            names.append(_name(i, step))
            _write(new / names[-1], mail(step, i, total, who, base))
        os.chmod(new, out.stat().st_mode & 0o7777 if out.is_dir() else 0o755)
        sync_dir(new)
        _swap(new, out)
    except BaseException as e:
        shutil.rmtree(new, ignore_errors=True)
        if isinstance(e, OSError) and is_disk_full(e):
            raise DiskFullError(f'{out}: disk full; the previous series there is kept. Free '
                                'some space (df -h), then run the same command again') from e
        raise
    sync_dir(out.parent)
    return [out / n for n in names]
