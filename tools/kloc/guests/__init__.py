# SPDX-License-Identifier: GPL-2.0
"""Minimal guest kernels that run the loopback kselftest."""
