# SPDX-License-Identifier: GPL-2.0
"""make bisect: the first commit of a series that moves each signal (docs/bisect.md)."""
