# SPDX-License-Identifier: GPL-2.0
"""Kernel trees: the supported kernels, Debian's source trees in the cache, hard-linked copies."""
