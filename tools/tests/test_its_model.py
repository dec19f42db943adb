# SPDX-License-Identifier: GPL-2.0
"""The ITS latency model's arithmetic (kloc/its/model.py), checked by hand."""

from __future__ import annotations

import unittest

from kloc.its.model import SEED_RATES, Implied, ModelError, check_penalty


class ModelArithmetic(unittest.TestCase):
    def test_two_remote_reads_at_100_ns(self) -> None:
        m = Implied(2, 100)
        self.assertEqual(m.ns_per_interrupt, 200)
        # 200 ns an interrupt, 200,000 interrupts a second: 40 ms of each second
        self.assertAlmostEqual(m.share(200_000), 0.04)
        self.assertAlmostEqual(m.share(170_000), 0.034)
        # 0.02753 ms a request at 200K/s: 5.506 interrupts a request, 1,101 ns
        self.assertAlmostEqual(m.ns_per_request(200_000), 1101.2)
        # 3.6% at 200K/s with 2 remote reads: 90 ns each
        self.assertAlmostEqual(m.needed_penalty_ns(200_000) or 0, 90)

    def test_no_remote_reads_cannot_explain_a_change(self) -> None:
        m = Implied(0, 100)
        self.assertIsNone(m.needed_penalty_ns(SEED_RATES[0]))
        self.assertIn('cannot come', ' '.join(m.lines('x')))

    def test_the_report_states_the_model_and_the_claim(self) -> None:
        text = ' '.join(Implied(5, 100).lines('all-local against this'))
        self.assertIn('stated, not measured', text)
        self.assertIn('upper bound', text)
        self.assertIn('3.6%', text)
        # 5 reads x 100 ns x 170K-200K/s: 8.50%-10.00%; 3.6% needs 36-42.4 ns
        self.assertIn('8.50%-10.00%', text)
        self.assertIn('36-42.4 ns per remote read', text)

    def test_a_penalty_out_of_range_is_refused(self) -> None:
        for bad in (0, -5, 1e6):
            with self.assertRaises(ModelError):
                check_penalty(bad)
        self.assertEqual(check_penalty(120), 120)


if __name__ == '__main__':
    unittest.main()
