# SPDX-License-Identifier: GPL-2.0
"""The HTML pages: make run's and make test's report.html, and make review's."""
