# SPDX-License-Identifier: GPL-2.0
"""The ITS interrupt path under QEMU: its table reads per MSI, from QEMU's trace."""
