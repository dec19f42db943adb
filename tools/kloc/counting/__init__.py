# SPDX-License-Identifier: GPL-2.0
"""Exact counts under TCG: the kloc-count QEMU plugin (tools/qemu-plugin) from Python.

Under TCG a timed run varies by 5-14% and no cache is modelled, so the
figures that can be trusted are counts. A module per job:

- plugin: build the plugin against the installed QEMU's own qemu-plugin.h
- qemu_args: derive its arguments (the node memory map, the vCPU-to-node
  map) from a run's QEMU options, and add it to a QEMU command line
- counts: the JSON it writes at exit, as dataclasses; figures per packet
- symbols: its PCs and data lines named from the guest kernel's System.map
- report: a perf-c2c-like table of the most contended lines
- errors: CountingError, which each of them raises

Counts measure path length and sharing in a model; they are not time, and
not proof of a speed change on hardware.
"""
