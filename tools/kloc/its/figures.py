# SPDX-License-Identifier: GPL-2.0
"""The ITS's table reads per interrupt, from one boot's trace (trace.py).

A boot of the MSI workload (tools/guest/its-msi.c) marks one window in
which it makes a fixed number of requests to a virtio-rng PCI device; each
completion is one MSI the ITS translates. figures() turns the window into
ItsFigures: per table (trace.TABLES), reads per interrupt local and remote
to the ITS's node, and the command queue's reads; it refuses a trace that
does not hold exactly that (no window, two windows, an open one, lines that
did not parse, reads it could not place, or a guest that counted other
interrupts than the ITS translated).

These are exact counts of QEMU's model, which caches nothing, and upper
bounds of a real ITS's table traffic (real ITSs cache translations). Each
boot's are exact; where a kernel asks for no node, where a table lands can
change from boot to boot, so Boots holds several.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kloc.errors import KlocError
from kloc.its import redist
from kloc.its.redist import RedistError, Target
from kloc.its.trace import TABLES, ItsTrace, Window

RESULT = re.compile(r'^kloc-its: result requests=(\d+) bytes=(\d+) interrupts=(\d+) '
                    r'devid=(0x[0-9a-f]+)(?: node=(-?\d+))?(?: moved=(\d+))?$')
# What each table is, for the report.
ABOUT = {'dt_l1': 'device table, level 1', 'dte': 'device table entry (level 2)',
         'ite': 'interrupt translation table (ITT)', 'cte': 'collection table',
         'cmd': 'command queue'}
MSI_TABLES = tuple(t for t in TABLES if t != 'cmd')


class ItsFiguresError(KlocError):
    """A trace that does not hold one whole, placed window of the MSI workload."""


@dataclass(frozen=True)
class Reads:
    """One table's reads in the window: local and remote to the ITS's node."""
    table: str
    local: int
    remote: int


@dataclass(frozen=True)
class ItsFigures:
    topology: str
    its_node: int
    requests: int
    interrupts: int             # MSIs the ITS translated in the window
    guest_interrupts: int       # the device's interrupts the guest counted there
    devid: int
    msi: tuple[Reads, ...]      # on the interrupt path, per table (MSI_TABLES)
    cmd: Reads                  # commands the ITS read from its queue meanwhile
    device_node: int | None = None  # the PCI device's NUMA node in the guest (-1: none)
    moved: int | None = None    # interrupts the guest moved in the window (2 commands each)
    # False: the ITS has no node, and its_node is the node reads are local to
    its_has_node: bool = True
    # the target CPUs' redistributors (redist.py: a model over traced counts)
    redist: tuple[Target, ...] = ()

    def per_interrupt(self, table: str) -> tuple[float, float]:
        """(local, remote) reads of table per interrupt."""
        r = self.reads(table)
        return r.local / self.interrupts, r.remote / self.interrupts

    def reads(self, table: str) -> Reads:
        return self.cmd if table == 'cmd' else next(r for r in self.msi if r.table == table)

    @property
    def local(self) -> float:
        """All table reads per interrupt on the ITS's node."""
        return sum(r.local for r in self.msi) / self.interrupts

    @property
    def remote(self) -> float:
        """All table reads per interrupt on another node."""
        return sum(r.remote for r in self.msi) / self.interrupts

    @property
    def exact(self) -> bool:
        """Whether every interrupt read the same: each table's reads a whole number
        per interrupt."""
        return all((r.local % self.interrupts, r.remote % self.interrupts) == (0, 0)
                   for r in self.msi)

    def to_json(self) -> dict[str, object]:
        per = {t: dict(zip(('local', 'remote'), self.per_interrupt(t))) for t in MSI_TABLES}
        return {'topology': self.topology,
                'its_node': self.its_node if self.its_has_node else None,
                'local_to_node': self.its_node,
                'requests': self.requests, 'interrupts': self.interrupts,
                'guest_interrupts': self.guest_interrupts, 'devid': self.devid,
                'device_node': self.device_node, 'moved_interrupts': self.moved,
                'per_interrupt': per, 'local_per_interrupt': self.local,
                'remote_per_interrupt': self.remote, 'exact': self.exact,
                'reads': {r.table: {'local': r.local, 'remote': r.remote}
                          for r in (*self.msi, self.cmd)},
                'redistributor': {
                    'model': 'QEMU\'s redistributor code over traced counts; local and '
                             'remote to the target CPU\'s node',
                    'targets': [t.to_json() for t in self.redist],
                    'per_interrupt': {t: dict(zip(('local', 'remote'),
                                                  redist.per_interrupt(self.redist, t)))
                                      for t in redist.TABLES}}}


@dataclass(frozen=True)
class Boots:
    """Several boots of one kernel on one topology. Each boot's counts are exact, but
    where a kernel asks for no node, where a table lands can differ from boot to boot
    (a small kmalloc() may return another node's slab object): the boots say whether
    it did."""
    boots: tuple[ItsFigures, ...]

    @staticmethod
    def shape(f: ItsFigures) -> tuple[tuple[float, float], ...]:
        return (tuple(f.per_interrupt(t) for t in MSI_TABLES) + ((f.cmd.local, f.cmd.remote),)
                + tuple(redist.per_interrupt(f.redist, t) for t in redist.TABLES
                        if f.redist))

    @property
    def agree(self) -> bool:
        return len({self.shape(f) for f in self.boots}) == 1

    @property
    def first(self) -> ItsFigures:
        return self.boots[0]

    @property
    def remote(self) -> float:
        """Remote reads per interrupt, the mean over the boots."""
        return sum(f.remote for f in self.boots) / len(self.boots)

    def redist_remote(self) -> float | None:
        """The target CPU's redistributor's remote LPI-table accesses per interrupt (the
        model's, redist.py), the mean over the boots; None where a boot has none."""
        if not all(f.redist for f in self.boots):
            return None
        return sum(redist.per_interrupt(f.redist, t)[1] for f in self.boots
                   for t in redist.TABLES) / len(self.boots)

    def remotes(self) -> str:
        """Each boot's remote reads per interrupt, as 'r' when they agree, else
        'r1, r2, ...'."""
        if self.agree:
            return f'{self.first.remote:.3g}'
        return ', '.join(f'{f.remote:.3g}' for f in self.boots)

    def to_json(self) -> dict[str, object]:
        return {'boots': [f.to_json() for f in self.boots], 'agree': self.agree,
                'remote_per_interrupt_mean': self.remote}


def _reads(w: Window, path: str, table: str) -> Reads:
    unplaced = w.count(path, table, 2)
    if unplaced:
        raise ItsFiguresError(
            f'{unplaced} reads of the {ABOUT[table]} fell outside the machine\'s RAM or '
            'at an address the trace does not give (an indirect device table needs the '
            'guest\'s "kloc-its: l2" line)')
    return Reads(table, w.count(path, table, 0), w.count(path, table, 1))


def figures(trace: ItsTrace, topology: str, its_has_node: bool = True,
            cpu_nodes: dict[int, int] | None = None) -> ItsFigures:
    """The one window of a finished trace, as ItsFigures (ItsFiguresError if not).
    its_has_node False: the trace's its_node is only the node reads are local to.
    cpu_nodes (each CPU's node): also the target CPUs' redistributors (redist.py)."""
    if trace.unparsed:
        raise ItsFiguresError(f'{trace.unparsed} trace lines did not parse, the '
                              f'first: {trace.unreadable[0]!r}')
    if trace.open_window:
        raise ItsFiguresError('the guest opened a window and never closed it (it '
                              'stopped or crashed inside it)')
    if len(trace.windows) != 1:
        raise ItsFiguresError(f'{len(trace.windows)} windows in the trace; the MSI '
                              'workload marks exactly one')
    w = trace.windows[0]
    results = [m for m in map(RESULT.match, trace.console) if m]
    if len(results) != 1:
        raise ItsFiguresError(f'{len(results)} "kloc-its: result" lines on the guest\'s '
                              'console; the workload prints one when it ends well')
    requests, _, guest_ints, devid = (int(v, 0) for v in results[0].groups()[:4])
    node, moved = results[0].group(5), results[0].group(6)
    if w.interrupts == 0:
        raise ItsFiguresError(f'the ITS translated no MSI in the window of {requests} '
                              'requests: is the device\'s MSI-X going through the ITS?')
    rd: tuple[Target, ...] = ()
    if cpu_nodes is not None:
        if sum(w.targets.values()) != w.interrupts:
            raise ItsFiguresError(f'{sum(w.targets.values())} of the window\'s '
                                  f'{w.interrupts} MSIs read a valid collection: the '
                                  'target CPUs are not all known')
        try:
            rd = redist.targets(w.targets, w.acked, trace.rd_regs, cpu_nodes, trace.node_of)
        except RedistError as e:
            raise ItsFiguresError(str(e)) from None
    return ItsFigures(topology, trace.its_node, requests, w.interrupts, guest_ints, devid,
                      tuple(_reads(w, 'msi', t) for t in MSI_TABLES),
                      _reads(w, 'cmd', 'cmd'), None if node is None else int(node),
                      None if moved is None else int(moved), its_has_node, rd)


def lines(f: ItsFigures) -> list[str]:
    """The figures as report lines: per table, local and remote reads per interrupt."""
    where = f'ITS on node {f.its_node}' if f.its_has_node else \
        f'the ITS has no node: local is node {f.its_node}, the boot CPU\'s'
    out = [f'ITS interrupt path on {f.topology} ({where}): '
           f'{f.interrupts} interrupts for {f.requests} requests '
           f'(the guest counted {f.guest_interrupts}); DeviceID {f.devid:#x}'
           + ('' if f.device_node is None else f' on node {f.device_node}'),
           f'  {"table":<36} {"local":>7} {"remote":>7}  (reads per interrupt)']
    for t in MSI_TABLES:
        loc, rem = f.per_interrupt(t)
        out.append(f'  {ABOUT[t]:<36} {loc:>7.3g} {rem:>7.3g}')
    out.append(f'  {"all tables":<36} {f.local:>7.3g} {f.remote:>7.3g}')
    out.append(f'  {ABOUT["cmd"] + " (commands read)":<36} {f.cmd.local:>7} '
               f'{f.cmd.remote:>7}  (in the window, not per interrupt)')
    if not f.exact:
        out.append('  (not every interrupt read the same tables: the figures are means)')
    if f.redist:
        out += redist.lines(f.redist)
    return out


def _pairs(pairs: list[tuple[float, float]], fmt: str = '.3g') -> str:
    """Each boot's local/remote: once when they agree, else each distinct pair."""
    return ','.join(f'{loc:{fmt}}/{rem:{fmt}}' for loc, rem in dict.fromkeys(pairs))


def side_by_side(topology: str, base: Boots, patched: Boots) -> list[str]:
    """Base against patched on one topology, local/remote reads per interrupt, in
    72 columns; where a side's boots differ, each distinct pair."""
    def row(label: str, get: Callable[[ItsFigures], tuple[float, float]],
            fmt: str = '.3g') -> str:
        b, p = (_pairs([get(f) for f in side.boots], fmt) for side in (base, patched))
        return f'    {label:<38} {b:>9} {p:>9}'
    f0 = base.first
    n = len(base.boots)
    head = [f'  {topology} (ITS on node {f0.its_node}): {n} boot{"s" if n != 1 else ""} a '
            f'side, {f0.requests} requests each',
            f'    {"reads per interrupt, local/remote":<38} {"base":>9} {"patched":>9}']

    def per(table: str) -> Callable[[ItsFigures], tuple[float, float]]:
        return lambda f: f.per_interrupt(table)
    rows = [row(ABOUT[t], per(t)) for t in MSI_TABLES]
    rows.append(row('all tables', lambda f: (f.local, f.remote)))
    rows.append(row('commands read (the window, in all)',
                    lambda f: (f.cmd.local, f.cmd.remote)))
    if base.first.redist and patched.first.redist:
        def rd(table: str) -> Callable[[ItsFigures], tuple[float, float]]:
            return lambda f: redist.per_interrupt(f.redist, table)
        rows += ['    the target CPU\'s redistributor, QEMU\'s code as a model: byte',
                 '    accesses per interrupt, local/remote to the target CPU\'s node']
        rows += [row(f'{t} table', rd(t), '.5g') for t in redist.TABLES]
        rows.append('    target CPUs (node): ' + '; '.join(
            f'{name} ' + ', '.join(sorted({f'CPU {t.cpu} ({t.cpu_node})'
                                          for f in side.boots for t in f.redist}))
            for name, side in (('base', base), ('patched', patched))))
    notes = [f'    the {name}\'s boots differ: remote reads per interrupt {side.remotes()}'
             for name, side in (('base', base), ('patched', patched)) if not side.agree]
    return head + rows + notes
