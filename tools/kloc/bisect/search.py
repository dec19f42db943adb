# SPDX-License-Identifier: GPL-2.0
"""Bisection of one signal over a line of commits, as git bisect does it.

commits[0..n-1] are the commits after GOOD, oldest first, commits[n-1] being
BAD. Each step tests the untested commit nearest the middle of the range
still open (lo, hi): lo the last commit known good (-1: GOOD itself), hi the
first known bad. A commit that could not be tested (it does not build, or
the package's series does not apply) is skipped and its neighbour taken, as
git bisect skip does; a step that is neither good nor bad ends the search:
the signal does not bisect cleanly there, and is never forced. Without
skips the search takes at most ceil(log2(n)) steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

GOOD, BAD, SKIP, UNCLEAN = 'good', 'bad', 'skip', 'unclean'
OUTCOMES = (GOOD, BAD, SKIP, UNCLEAN)


@dataclass
class Search:
    n: int                                          # commits after GOOD, BAD the last
    lo: int = -1
    hi: int = -1
    skipped: set[int] = field(default_factory=set)
    steps: list[tuple[int, str]] = field(default_factory=list)
    unclean: int | None = None

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError('nothing to bisect: BAD is GOOD')
        if self.hi < 0:
            self.hi = self.n - 1

    def open(self) -> list[int]:
        """The commits still to test: between lo and hi, not skipped."""
        return [i for i in range(self.lo + 1, self.hi) if i not in self.skipped]

    def next(self) -> int | None:
        """The commit to test next, None when the search has ended."""
        if self.unclean is not None:
            return None
        todo = self.open()
        if not todo:
            return None
        mid = (self.lo + self.hi) / 2
        return min(todo, key=lambda i: (abs(i - mid), i))

    def record(self, i: int, outcome: str) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(outcome)
        if not self.lo < i < self.hi:
            raise ValueError(f'commit {i} is outside the open range ({self.lo}, {self.hi})')
        self.steps.append((i, outcome))
        if outcome == GOOD:
            self.lo = i
        elif outcome == BAD:
            self.hi = i
        elif outcome == SKIP:
            self.skipped.add(i)
        else:
            self.unclean = i

    @property
    def done(self) -> bool:
        return self.next() is None

    @property
    def result(self) -> str:
        """'found' (hi is the first bad commit), 'unclean' (a step was neither good nor
        bad), or 'skipped' (the first bad commit is hi or one of the skipped commits
        before it, which could not be tested)."""
        if self.unclean is not None:
            return 'unclean'
        if any(self.lo < i < self.hi for i in self.skipped):
            return 'skipped'
        return 'found'

    def candidates(self) -> list[int]:
        """Where the first bad commit can be: hi, and the skipped commits before it."""
        return sorted(i for i in self.skipped if self.lo < i < self.hi) + [self.hi]

    @staticmethod
    def bound(n: int) -> int:
        """The most steps a search of n commits takes without skips."""
        return math.ceil(math.log2(n)) if n > 1 else 0
