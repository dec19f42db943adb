# SPDX-License-Identifier: GPL-2.0
"""Export the series as numbered mails in git format-patch style."""

from __future__ import annotations

import difflib
import email.utils
import subprocess
from pathlib import Path

from .install import Plan, Step

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
    return data.decode('utf-8', errors='surrogateescape').splitlines(keepends=True)


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


def export(p: Plan, out: Path, base: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    who = author()
    written = []
    total = len(p.steps)
    for i, step in enumerate(p.steps, 1):
        slug = ''.join(c if c.isalnum() else '-' for c in step.change.subject.lower())
        slug = '-'.join(filter(None, slug.split('-')))[:52]
        path = out / f'{i:04d}-{slug}.patch'
        path.write_text(mail(step, i, total, who, base))
        written.append(path)
    return written
