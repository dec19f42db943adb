# SPDX-License-Identifier: GPL-2.0
"""What a patch under review changes of the things that judge it.

make review's verdict comes from the package's tests: its KUnit suites, the
hooks that build them into the kernel (Kconfig, Makefiles, the ITS driver's
#include lines), the loopback selftest and its marker header, and KUnit
itself, which builds, boots and reads them. A patch that changes one of
these would judge itself, so review.check() refuses it, before anything is
built, unless the user opts in (REVIEW_PACKAGE=1); the report, review.json
and the KCIDB record then say so first.

What counts, found from the series (kunit/series), for the tree's version:
- a file the package installs whole (an addition, or a file a hook creates),
  and the tree's .kloc/ state: any change to its content, deleting or
  renaming it away included;
- a file the package hooks: a change to (or the removal of) one of the
  package's own lines in it, and deleting or renaming the file. The rest of
  the file is not the package's: a patch to the ITS driver's own code is
  what review is for. Lines a patch only adds, and blank lines, do not count.
  review applies a patch as posted, to the stock file, where the package's
  lines are not: one that changes the lines they go next to is refused
  when the series does not install on top of it (posted.as_posted()); only
  a patch made against the installed tree can change the package's lines;
- KUnit's runner and parser (tools/testing/kunit), its assertions and
  framework (include/kunit, lib/kunit).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from kloc.series.changes import Change
from kloc.series.patching import Contents, file_changes
from kloc.series.planning import recover_original
from kloc.series.state import STATE_DIR
from kloc.version import KernelVersion

# KUnit itself: tools/testing/kunit's kunit.py builds and boots the kernels and
# its kunit_parser.py reads the results; the assertions are include/kunit's.
KUNIT_ITSELF = ('tools/testing/kunit/', 'lib/kunit/', 'include/kunit/')

OPT_IN = 'REVIEW_PACKAGE=1'


@dataclass(frozen=True)
class Touched:
    """A file of what judges the patch, and what the patch changes of it."""
    path: str
    what: str

    def __str__(self) -> str:
        return f'{self.path} ({self.what})'


def _hook_sections(text: str) -> dict[str, list[str]]:
    """A hook patch's added lines ('+', the marker dropped), per file it changes."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith('+++ '):
            name = line[4:].split('\t')[0].strip()
            current = out.setdefault(name.partition('/')[2], []) \
                if name != '/dev/null' else None
        elif line.startswith('+') and current is not None:
            current.append(line[1:])
    return out


def package_files(version: KernelVersion,
                  series: list[Change]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(files the package installs whole -> which change adds it, files it hooks -> the
    lines its hooks add to them) for a tree of this version."""
    whole: dict[str, str] = {}
    hooked: dict[str, list[str]] = {}
    for change in series:
        patch = change.patch_or_none(version)
        if patch is not None:
            text = patch.read_text()
            added = _hook_sections(text)
            for c in file_changes(text):
                if c.old is None and c.new is not None:
                    whole[c.new] = f'the package\'s, made by {change.name}'
                elif c.new is not None:
                    hooked.setdefault(c.new, []).extend(added.get(c.new, []))
        for a in change.additions:
            whole[a.dst] = f'the package\'s, installed by {change.name}'
    return whole, {rel: lines for rel, lines in hooked.items() if rel not in whole}


def _lines(data: bytes | None) -> list[str]:
    return (data or b'').decode('utf-8', 'replace').splitlines()


def package_lines(rel: str, data: bytes, version: KernelVersion, series: list[Change],
                  hook_lines: list[str]) -> set[int]:
    """The 0-based numbers of data's non-blank lines that the package's hooks put there.

    data is the file as the patch finds it: installed, hand edits kept. Where
    the hooks still reverse out of it exactly, the lines they add; where they
    do not (edited past that), every line equal to one a hook adds.
    """
    lines = _lines(data)
    found, original = recover_original(rel, data, version, series)
    if found:
        sm = difflib.SequenceMatcher(a=_lines(original), b=lines, autojunk=False)
        mine = {j for tag, _, _, j1, j2 in sm.get_opcodes() if tag in ('replace', 'insert')
                for j in range(j1, j2)}
    else:
        added = set(hook_lines)
        mine = {j for j, line in enumerate(lines) if line in added}
    return {j for j in mine if lines[j].strip()}


def changed_lines(before: bytes, after: bytes) -> set[int]:
    """The 0-based numbers of before's lines that after changes or removes."""
    sm = difflib.SequenceMatcher(a=_lines(before), b=_lines(after), autojunk=False)
    return {i for tag, i1, i2, _, _ in sm.get_opcodes() if tag in ('replace', 'delete')
            for i in range(i1, i2)}


def spans(numbers: Iterable[int]) -> str:
    """0-based line numbers as 1-based ranges: "5829-5831, 5840"."""
    out: list[str] = []
    for n in sorted(numbers):
        if out and out[-1].split('-')[-1] == str(n):
            lo = out[-1].split('-')[0]
            out[-1] = f'{lo}-{n + 1}'
        else:
            out.append(str(n + 1))
    return ', '.join(out)


def touched(version: KernelVersion, series: list[Change], files: Iterable[str],
            before: Contents, after: Contents, stock: bool = False) -> list[Touched]:
    """What of the package (and of KUnit) a patch changes: files, the paths it touches;
    before, each as the patch finds it; after, each as it leaves it (None: absent).

    stock: before holds the hooked files stock, without the package's lines (a patch
    applied as posted, posted.as_posted()): of a hooked file only deleting or renaming
    it counts here; a patch that changes the lines the package puts its own next to
    is found when the series is installed on top of it.
    """
    whole, hooked = package_files(version, series)
    out: list[Touched] = []
    for rel in files:
        b, a = before.get(rel), after.get(rel)
        if b == a:
            continue
        if rel == STATE_DIR or rel.startswith(STATE_DIR + '/'):
            out.append(Touched(rel, 'kloc\'s own state in the tree'))
        elif rel in whole:
            out.append(Touched(rel, whole[rel]))
        elif rel.startswith(KUNIT_ITSELF):
            out.append(Touched(rel, 'KUnit itself, which builds, runs and reads the tests'))
        elif rel in hooked and b is not None:
            if a is None:
                out.append(Touched(rel, 'hooked by the package; the patch deletes or '
                                        'renames it'))
                continue
            if stock:
                continue
            hit = package_lines(rel, b, version, series, hooked[rel]) & changed_lines(b, a)
            if hit:
                out.append(Touched(rel, f'the package\'s line{"s" if len(hit) > 1 else ""} '
                                        f'{spans(hit)}'))
    return out
