# SPDX-License-Identifier: GPL-2.0
"""make review: the patch input, the review itself, and its report (text, JSON, KCIDB)."""
