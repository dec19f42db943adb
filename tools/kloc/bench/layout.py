# SPDX-License-Identifier: GPL-2.0
"""Layout-only patches, for make bench-aa's A/A' reviews.

A patch that changes the binary but not what it does still moves where code
and data sit: every function after it in the image, every object after it in
.data and .rodata. That perturbs a seeded counted boot (which lines two
objects share, where a loop's branches fall), and a review must not read it
as the patch's effect. Patch i adds, to one file every guest builds, a
function and two 64-byte arrays that nothing calls or reads, kept by the
compiler with __used: the function in .text, one array in .data and one in
.rodata. Patches rotate over FILES, and within a file over the top-level
places between two definitions, outside any #if, so that no two of the first
len(FILES) x PLACES patches add at the same spot. Whether the layout really
moved is checked on the built kernels (symbols.moved(): the review records
how many symbols of System.map moved).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from kloc.errors import KlocError

# Files the x86_64 and arm64 guests both build (configs/guest-base.config): the
# loopback driver, the core of the network stack, UDP, softirqs, the slab allocator.
FILES = ('drivers/net/loopback.c', 'net/core/dev.c', 'net/ipv4/udp.c', 'kernel/softirq.c',
         'mm/slub.c')
PLACES = 4          # places within a file before a file comes round again


class LayoutError(KlocError):
    """No layout-only patch can be made here."""


@dataclass(frozen=True)
class LayoutPatch:
    index: int
    file: str
    line: int           # the patch adds after this line of the base file (1-based)
    text: str           # a git format-patch mail

    @property
    def symbol(self) -> str:
        return f'kloc_aa_layout_{self.index}'


_IF = re.compile(r'^\s*#\s*if')
_ENDIF = re.compile(r'^\s*#\s*endif')


def places(lines: list[str]) -> list[int]:
    """The 1-based line numbers of each '}' that closes a top-level definition, outside
    every #if, followed by an empty line: a new definition fits after each."""
    out = []
    depth = 0
    for n, line in enumerate(lines):
        if _IF.match(line):
            depth += 1
        elif _ENDIF.match(line):
            depth = max(0, depth - 1)
        elif depth == 0 and line.rstrip('\n') in ('}', '};') \
                and n + 1 < len(lines) and not lines[n + 1].strip():
            out.append(n + 1)
    return out


def addition(index: int) -> list[str]:
    """What patch index adds: a function and two arrays nothing uses, each distinct."""
    name = f'kloc_aa_layout_{index}'
    return ['\n',
            f'/* make bench-aa, A/A\' review {index}: layout only; nothing calls or reads\n',
            ' * these, and __used keeps them in the image.\n',
            ' */\n',
            f'static noinline __used int {name}(int x)\n',
            '{\n',
            f'\treturn x * {index + 3} + 1;\n',
            '}\n',
            '\n',
            f'static char {name}_data[64] __used = "kloc bench-aa {index}";\n',
            f'static const char {name}_rodata[64] __used = "kloc bench-aa {index}";\n']


def make(tree: Path, index: int) -> LayoutPatch:
    """Layout-only patch index (0, 1, ...) against the tree's sources."""
    if index < 0:
        raise LayoutError(f'layout patch {index}: give 0 or more')
    rel = FILES[index % len(FILES)]
    path = tree / rel
    try:
        lines = path.read_text().splitlines(keepends=True)
    except OSError as e:
        raise LayoutError(f'{path}: cannot read it ({e.strerror}); a layout-only patch '
                          'adds to it') from None
    spots = places(lines)
    if not spots:
        raise LayoutError(f'{path}: no top-level place outside an #if to add code to')
    # the k-th time round: a place k/PLACES of the way through the file
    k = (index // len(FILES)) % PLACES
    at = spots[min(len(spots) - 1, (2 * k + 1) * len(spots) // (2 * PLACES))]
    new = lines[:at] + addition(index) + lines[at:]
    diff = ''.join(difflib.unified_diff(lines, new, f'a/{rel}', f'b/{rel}', n=3))
    text = (f'From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n'
            f'From: kloc <kloc@localhost>\n'
            f'Subject: [PATCH] {rel}: layout only, A/A\' review {index}\n\n'
            'Not for merging: made by make bench-aa. It adds a function and two\n'
            'arrays that nothing uses, so the kernel behaves as its base does but\n'
            'for where code and data sit. A review of it must call no change.\n\n'
            f'---\ndiff --git a/{rel} b/{rel}\n' + diff)
    return LayoutPatch(index, rel, at, text)
