# SPDX-License-Identifier: GPL-2.0
"""The A/B bench: interleaved runs, their store, the figures, statistics, tables and plots.

make compare runs it.
"""
