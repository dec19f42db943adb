# SPDX-License-Identifier: GPL-2.0
"""QEMU: the architectures and the NUMA topologies."""
