# SPDX-License-Identifier: GPL-2.0
"""kloc.bisect.search and judge: the bisection of one signal over a line of commits,
on every shape hypothesis draws (a first bad commit, commits that cannot be tested,
a step that is neither), and how a step reads against both ends."""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path

from hypothesis import given, settings, strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from kloc.bisect import judge
from kloc.bisect.judge import Signal
from kloc.bisect.search import BAD, GOOD, SKIP, UNCLEAN, Search

# Hypothesis's home out of the source tree; the same examples every run (make test
# is reproducible), as tests/test_properties.py does
HYPOTHESIS_HOME = Path(tempfile.gettempdir()) / 'kloc-hypothesis'
set_hypothesis_home_dir(str(HYPOTHESIS_HOME))  # type: ignore[no-untyped-call]
SETTINGS = settings(max_examples=300, deadline=None, database=None, derandomize=True)


def bisect(n: int, first_bad: int, skipped: frozenset[int] = frozenset(),
           unclean: frozenset[int] = frozenset()) -> Search:
    s = Search(n)
    while (i := s.next()) is not None:
        s.record(i, SKIP if i in skipped else UNCLEAN if i in unclean
                 else BAD if i >= first_bad else GOOD)
    return s


class SearchTest(unittest.TestCase):
    @SETTINGS
    @given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
    def test_the_first_bad_commit_in_at_most_ceil_log2_steps(self, case: tuple[int, int]) -> None:
        n, first = case
        s = bisect(n, first)
        self.assertEqual((s.result, s.hi), ('found', first))
        self.assertLessEqual(len(s.steps), Search.bound(n))
        self.assertEqual(len({i for i, _ in s.steps}), len(s.steps), 'a commit tested twice')

    @SETTINGS
    @given(st.integers(2, 60).flatmap(lambda n: st.tuples(
        st.just(n), st.integers(0, n - 1), st.frozensets(st.integers(0, n - 2), max_size=8))))
    def test_skipped_commits_cost_a_step_each_and_never_hide_the_answer(
            self, case: tuple[int, int, frozenset[int]]) -> None:
        n, first, skipped = case
        s = bisect(n, first, skipped)
        self.assertLessEqual(len(s.steps), Search.bound(n) + len(skipped))
        if s.result == 'found':
            self.assertEqual(s.hi, first)
        else:
            self.assertEqual(s.result, 'skipped')
            # the answer is among the candidates, and every other candidate was skipped
            self.assertIn(first, s.candidates())
            self.assertTrue(set(s.candidates()[:-1]) <= skipped)

    @SETTINGS
    @given(st.integers(3, 60).flatmap(lambda n: st.tuples(
        st.just(n), st.integers(0, n - 1), st.integers(0, n - 2))))
    def test_a_step_that_is_neither_ends_the_search_unforced(
            self, case: tuple[int, int, int]) -> None:
        n, first, odd = case
        s = bisect(n, first, unclean=frozenset({odd}))
        if odd in [i for i, _ in s.steps]:
            self.assertEqual((s.result, s.unclean, s.steps[-1]), ('unclean', odd, (odd, UNCLEAN)))
            self.assertIsNone(s.next())
        else:
            self.assertEqual((s.result, s.hi), ('found', first))

    def test_the_bad_end_alone(self) -> None:
        s = bisect(1, 0)
        self.assertEqual((s.result, s.hi, s.steps), ('found', 0, []))
        with self.assertRaises(ValueError):
            Search(0)
        with self.assertRaises(ValueError):
            Search(4).record(3, GOOD)       # BAD itself is not open


class JudgeTest(unittest.TestCase):
    sig = Signal('counted', 'false_shared_per_pkt', 'x86_64_2n', '1.7', '5.7', 'higher', True)

    def test_a_counted_step_against_both_ends(self) -> None:
        for vs_good, vs_bad, want in (
                ('higher', 'same', BAD), ('higher', 'small', BAD),     # moved, all the way
                ('same', 'higher', GOOD), ('small', 'higher', GOOD),   # not yet
                ('higher', 'higher', UNCLEAN),                         # half-way
                ('same', 'same', UNCLEAN),                             # the ends not apart
                ('lower', 'higher', UNCLEAN),                          # the other way
                ('inconclusive', 'higher', UNCLEAN), ('higher', 'inconclusive', UNCLEAN),
                ('', '', UNCLEAN)):
            with self.subTest(vs_good=vs_good, vs_bad=vs_bad):
                self.assertEqual(judge.counted_step(self.sig, vs_good, vs_bad), want)

    def test_a_kunit_step(self) -> None:
        self.assertEqual([judge.kunit_step(x) for x in
                          ('PASS', 'FAIL', 'CRASHED', 'SKIP', 'ABSENT', 'NO-KTAP')],
                         [GOOD, BAD, BAD, UNCLEAN, UNCLEAN, UNCLEAN])

    def test_signals_are_a_pass_turned_into_a_failure(self) -> None:
        got = judge.kunit_signals([('t', 'a', 'PASS', 'FAIL'), ('t', 'b', 'FAIL', 'PASS'),
                                   ('t', 'c', 'PASS', 'SKIP'), ('t', 'd', 'PASS', 'CRASHED')])
        self.assertEqual([x.name for x in got], ['a', 'd'])


if __name__ == '__main__':
    unittest.main()
