# SPDX-License-Identifier: GPL-2.0
"""What a part rebuilt, in a line: the mutants' variant build dirs (<dir>@<variant>,
mutants/mutants.py) counted under the dir they build at, not listed one by one."""

from __future__ import annotations

from collections.abc import Sequence


def summary(built: Sequence[str] | None) -> str:
    """'kernels reused', or 'rebuilt A, B and 10 mutant variants of it'; '-' where a
    part cannot know (make test's phases)."""
    if built is None:
        return '-'
    if not built:
        return 'kernels reused'
    dirs: dict[str, list[int]] = {}         # dir -> [itself rebuilt, variants rebuilt]
    for b in built:
        base, _, variant = b.partition('@')
        seen = dirs.setdefault(base, [0, 0])
        seen[1 if variant else 0] += 1
    return 'rebuilt ' + ', '.join(_one(d, bool(itself), n) for d, (itself, n) in dirs.items())


def _one(base: str, itself: bool, variants: int) -> str:
    some = f'{variants} mutant variant{"s" if variants > 1 else ""}'
    if not variants:
        return base
    return f'{base} and {some} of it' if itself else f'{some} of {base}'
