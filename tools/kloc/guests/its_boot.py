# SPDX-License-Identifier: GPL-2.0
"""One boot of the MSI workload in an arm64 guest, counted from QEMU's ITS trace.

The guest (an arm64 guest of guest.py, with the workload's initramfs,
msi.py) boots on a topology with a virtio-rng PCI device, the topology's DTB
(the ITS's numa-node-id), under TCG (with KVM the ITS would be the host
kernel's, which QEMU cannot trace), with QEMU's trace events for the ITS and
the UART written to a file; kloc.its=N runs the workload. The trace, read by
kloc.its, gives the ITS's table reads per interrupt (its.figures): exact
counts of that boot; and the target CPUs' redistributors' LPI table accesses,
QEMU's code as a model over the boot's counts (its.redist).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from kloc import progress
from kloc.atomicfile import write_text
from kloc.guests import msi
from kloc.guests.guest import Guest, GuestError, qemu_command
from kloc.its import trace
from kloc.its.figures import ItsFigures, ItsFiguresError, figures
from kloc.qemu import topology
from kloc.qemu.topology import Topology

REQUESTS = 1000
# Boots per kernel and topology: each is exact, but a kernel that asks for no
# node can place a table differently from boot to boot (the numa-unaware-itt
# mutant's ITT was remote in 3 boots of 6): the boots show it.
BOOTS = 3
DEVICE = 'virtio-rng-pci'
# The PCIe host bridge's node, written into the DTB (QEMU gives it none): Linux
# probes a PCI device on a CPU of its node (pci_call_probe), so where a
# NUMA-unaware driver puts the device's level-2 table page and ITT is that
# node's, boot after boot (with ASYNC_PROBE). Without them an unaware level-2
# page landed on node 1 in 6 boots of 7 on arm64_2n_its1, with DEVICE_NODE
# alone in 4 of 4.
DEVICE_NODE = 0
# virtio-rng's probe is where the device's ITT and level-2 page are allocated
# (its MSI-X vectors). Probed synchronously it runs in init's context, on
# whichever CPU init is then, after virtio-pci has probed the PCI device on
# DEVICE_NODE; probed asynchronously it runs on a worker of the device's node.
ASYNC_PROBE = 'driver_async_probe=virtio_rng'
# How much longer than a timed loopback boot the ITS boot may take (TCG always).
SLOWDOWN = 4
# Where the ITS has no node (arm64_2n_itsnone, arm64_1n), reads are local or
# remote to this one: the boot CPU's, where Linux then allocates its tables.
NO_ITS_NODE_REFERENCE = 0


def topologies(names: tuple[str, ...]) -> tuple[Topology, ...]:
    """Those of names with an ITS on a known node: where reads are local or remote (what
    make review compares)."""
    topos = (topology.get(n) for n in names)
    return tuple(t for t in topos if t.arch in msi.ARCHES and t.its_node is not None)


def command(g: Guest, initrd: Path, topo: Topology, log: Path, events: Path,
            requests: int) -> list[str]:
    for p in (log, events):
        if ',' in str(p):
            raise GuestError(f'{p}: QEMU\'s -trace option cannot take a path with a comma; '
                             'give an OUT without one')
    return [*qemu_command(g, initrd, topo, counted=True,
                          append=f'{msi.FLAG}={requests} {ASYNC_PROBE}'),
            '-accel', 'tcg', '-dtb', str(device_dtb(topo, log.parent)), '-device', DEVICE,
            '-trace', f'events={events},file={log}']


def device_dtb(topo: Topology, out: Path) -> Path:
    """The topology's DTB with numa-node-id DEVICE_NODE on its PCIe host bridge, in out."""
    dest = out / f'{topo.name}-pcie-node{DEVICE_NODE}.dtb'
    tmp = dest.with_name(f'.{dest.name}.kloc-tmp')
    shutil.copyfile(topology.dtb(topo), tmp)
    r = subprocess.run(['fdtget', '-l', str(tmp), '/'], capture_output=True, text=True)
    pcie = [f'/{n}' for n in r.stdout.split() if n.startswith('pcie@')]
    if len(pcie) != 1:
        raise GuestError(f'{topo.name}: the DTB has {len(pcie)} pcie@ nodes, not one')
    cmd = ['fdtput', '-t', 'i', str(tmp), pcie[0], 'numa-node-id', str(DEVICE_NODE)]
    if subprocess.run(cmd, capture_output=True).returncode:
        raise GuestError(f'{" ".join(cmd)} failed (make deps installs device-tree-compiler)')
    tmp.rename(dest)
    return dest


def run(g: Guest, initrd: Path, topo: Topology, timeout: int, out: Path,
        requests: int = REQUESTS) -> ItsFigures:
    """Boot g once on topo with the workload; its figures (GuestError if the boot or
    its trace fails, with the console's tail and where the files are)."""
    if topo.arch not in msi.ARCHES:
        raise GuestError(f'topology {topo.name} is {topo.arch}: the MSI workload needs an '
                         'ITS, on an arm64 topology')
    out.mkdir(parents=True, exist_ok=True)
    stem = f'its-{g.name}-{topo.name}'     # (g.name has dots: no with_suffix)
    log, events, console = (out / f'{stem}{s}' for s in ('.trace', '.events', '.log'))
    write_text(events, '\n'.join(trace.EVENTS) + '\n')
    log.unlink(missing_ok=True)
    cmd = command(g, initrd, topo, log, events, requests)
    progress.say(f'{g.name}: the MSI workload on {topo.name}, {requests} requests, '
                 'QEMU tracing its ITS')
    start = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors='replace',
                           timeout=timeout * SLOWDOWN, stdin=subprocess.DEVNULL)
        text = r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        text = e.stdout.decode(errors='replace') if isinstance(e.stdout, bytes) else ''
        text += f'\n[kloc: killed after {timeout * SLOWDOWN} s]\n'
    write_text(console, text)
    tail = '\n'.join(text.splitlines()[-25:])
    if not re.search(rf'^{msi.EXIT} 0\r?$', text, re.MULTILINE):
        raise GuestError(f'{g.name} on {topo.name}: the MSI workload did not end well '
                         f'(console: {console})\n--- console tail ---\n{tail}')
    if not log.is_file():
        raise GuestError(f'{g.name} on {topo.name}: QEMU wrote no trace at {log}: is '
                         f'{topo.qemu_binary} built with the log trace backend?')
    ref = NO_ITS_NODE_REFERENCE if topo.its_node is None else topo.its_node
    t = trace.ItsTrace(trace.node_of(cmd), ref)
    with log.open(errors='replace') as f:
        t.feed_all(f)
    try:
        fig = figures(t, topo.name, its_has_node=topo.its_node is not None,
                      cpu_nodes=trace.cpu_nodes(cmd))
    except ItsFiguresError as e:
        raise GuestError(f'{g.name} on {topo.name}: {e} (trace: {log})') from None
    progress.say(f'{g.name}: MSI workload on {topo.name} in {time.monotonic() - start:.0f} s')
    return fig
