# SPDX-License-Identifier: GPL-2.0
"""KUnit: the suites, building and running them with kunit.py, and their results.

The results: KTAP, JUnit, the summary.
"""
