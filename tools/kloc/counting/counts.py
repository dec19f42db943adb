# SPDX-License-Identifier: GPL-2.0
"""The plugin's counts: its JSON read into dataclasses, and the figures per packet.

The lo_counters kselftest's window numbers are kloc-marker.h's, read from it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from kloc.counting.errors import CountingError
from kloc.counting.plugin import MARKER_H, PLUGIN_NAME, PLUGIN_VERSION, c_define


def marker_define(name: str, header: Path = MARKER_H) -> int:
    """The number kloc-marker.h #defines as name: the C and Python share it from there."""
    return int(c_define(header, name, r'(0x[0-9a-fA-F]+|\d+)U?\b', '<number>',
                        'the counted figures need that number from it'), 0)


# The kselftest's windows (selftests/lo_counters/lo_counters.c marks them)
PHASE_SINGLE = marker_define('KLOC_PHASE_SINGLE')   # one thread
PHASE_ALL = marker_define('KLOC_PHASE_ALL')         # one thread per CPU


@dataclass(frozen=True)
class VcpuCounts:
    vcpu: int
    node: int
    insns_user: int
    insns_kernel: int
    loads: int
    stores: int
    local: int              # RAM accesses to this vCPU's node
    remote: int             # and to other nodes
    io: int
    unmapped: int
    misses_local: int       # cache misses, by the line's home node
    misses_remote: int
    hitm_local: int         # accesses to a line another vCPU held modified, by its node
    hitm_remote: int
    invalidations: int      # stores to a line other vCPUs held unmodified
    true_sharing: int       # the transfers (HITM + invalidations), by their bytes
    false_sharing: int
    contended: int          # accesses that could transfer under a finer interleaving
    contended_false: int    # of those, to bytes no other vCPU's meet

    @property
    def insns(self) -> int:
        return self.insns_user + self.insns_kernel

    @property
    def hitm(self) -> int:
        return self.hitm_local + self.hitm_remote

    @property
    def transfers(self) -> int:
        return self.hitm + self.invalidations

    @property
    def misses(self) -> int:
        return self.misses_local + self.misses_remote

    @property
    def remote_share(self) -> float:
        """Remote-node share of this vCPU's RAM accesses (NaN without any)."""
        n = self.local + self.remote
        return self.remote / n if n else float('nan')


@dataclass(frozen=True)
class PcCount:
    """A pair of PCs on a line: the requester's access, and the holder's last one."""
    pc: int
    peer_pc: int
    transfers: int        # as counted for ranking
    overcount_max: int    # the space-saving bound: transfers may be this much high
    hitm_local: int       # since this pair last took its slot
    hitm_remote: int
    invalidations: int
    false_sharing: int
    vcpus: tuple[int, ...]


@dataclass(frozen=True)
class LineVcpu:
    vcpu: int
    hitm_local: int
    hitm_remote: int
    invalidations: int
    false_sharing: int
    load_bytes: int       # bit i: byte i of the line, loaded (not stored) at its transfers
    store_bytes: int      # and stored

    @property
    def transfers(self) -> int:
        return self.hitm_local + self.hitm_remote + self.invalidations


@dataclass(frozen=True)
class Line:
    paddr: int            # guest-physical, of the line
    vaddr: int            # of the first transfer's access (names its object)
    node: int
    hitm_local: int
    hitm_remote: int
    invalidations: int
    false_sharing: int
    vcpus: tuple[LineVcpu, ...]
    pcs: tuple[PcCount, ...]
    size: int = field(kw_only=True)     # bytes: the plugin's line_bytes

    @property
    def transfers(self) -> int:
        return self.hitm_local + self.hitm_remote + self.invalidations


@dataclass(frozen=True)
class CacheModel:
    """The plugin's per-vCPU caches, as its JSON gives them."""
    size: int             # bytes
    assoc: int
    sets: int
    line: int             # bytes
    coherence: bool


@dataclass(frozen=True)
class Phase:
    phase: int
    windows: int
    contended_lines: int
    vcpus: tuple[VcpuCounts, ...]
    lines: tuple[Line, ...]

    def total(self, field: str) -> int:
        return sum(int(getattr(v, field)) for v in self.vcpus)

    @property
    def remote_share(self) -> float:
        """The remote-node share of the RAM accesses."""
        n = self.total('local') + self.total('remote')
        return self.total('remote') / n if n else float('nan')

    @property
    def remote_miss_share(self) -> float:
        """The remote-node share of the cache misses: what NUMA placement costs."""
        n = self.total('misses')
        return self.total('misses_remote') / n if n else float('nan')


@dataclass(frozen=True)
class IndexCheck:
    """The register cross-check of the running vCPU: at the start of each block
    inside a window, the guest's per-CPU base register looked up in its
    __per_cpu_offset[] against the index the plugin used."""
    registers: tuple[str, ...]    # gs_base, k_gs_base (x86_64); TPIDR_EL1 (arm64)
    percpu_read: bool             # __per_cpu_offset[] was read from the guest
    blocks: int                   # blocks checked
    agree: int
    disagree: int
    unmapped: int                 # a base that is no vCPU's
    pending: int                  # before the register or the table could be read


@dataclass(frozen=True)
class VcpuIndex:
    """Where the plugin's per-vCPU split came from (kloc-count.c, "Which vCPU ran it")."""
    source: str                   # 'current_cpu', 'callback' or 'none'
    callbacks: int                # callbacks that asked QEMU's current_cpu
    callback_index_wrong: int     # of those, given another vCPU's index by QEMU
    unresolved: int               # whose running vCPU was not found
    check: IndexCheck | None      # None: no percpu= (or plugin API before 4)


@dataclass(frozen=True)
class Counts:
    version: str
    qemu_header: str
    api: tuple[int, int, int]     # built, QEMU's min, QEMU's current
    target: str
    vcpu_index: VcpuIndex
    vcpus: int
    vcpu_threads: int
    line_table_bytes: int
    cache: CacheModel
    count: str                    # 'windows', or 'all' (one window, the whole run)
    open_phase: int | None
    bad_markers: int
    unmatched_ends: int
    nested_starts: int
    transfers_dropped: int        # transfers past lines_max lines: in the totals, on no line
    phases: dict[int, Phase]

    @property
    def attribution(self) -> str:
        """Why the per-vCPU split cannot be trusted, or '' when it can.

        Under thread=single (so under -icount) QEMU 10.0 gives TB and
        instruction callbacks the index of the vCPU that translated the block,
        not of the one running it; kloc-count 3 asks QEMU's current_cpu instead
        (source 'current_cpu'), and checks it against the guest's per-CPU base
        register. The split is refused where the plugin could not learn the
        running vCPU (source 'none', or callbacks it could not resolve), where
        the register check disagreed, and, where current_cpu named it, unless
        the check ran (plugin API 4 on), agreed on at least one block and
        left none unmapped. What depends on the split: each
        access's node (remote share), the cache it went through (misses), and
        the transfers between caches (HITM, invalidations, sharing, the
        contended lines). Totals are exact either way."""
        ix = self.vcpu_index
        if ix.source == 'none':
            return ('QEMU\'s running vCPU could not be learnt (no current_cpu or '
                    f'qemu_get_cpu; {ix.unresolved} callbacks unresolved), and under '
                    'thread=single QEMU passes callbacks the translating vCPU: the '
                    'per-vCPU split, and the remote share, sharing and transfers with '
                    'it, are not measured')
        c = ix.check
        if c is not None and c.disagree:
            return (f'the running vCPU disagreed with the guest\'s per-CPU base register in '
                    f'{c.disagree} of {c.blocks} blocks: the per-vCPU split is not trusted')
        if ix.source != 'current_cpu' or self.api[2] < 4:
            return ''       # QEMU's own index is the running vCPU's before plugin API 4
        # QEMU 10 (API 4) passes the translating vCPU's index, and current_cpu is no
        # plugin API: its answer holds only where the check looked, found every
        # block's base register, and agreed
        if c is None:
            return ('the running vCPU (QEMU\'s current_cpu) was not checked against the '
                    'guest\'s per-CPU base register (no percpu= argument, or no register '
                    'API): the per-vCPU split is not trusted')
        # Blocks pending (before __per_cpu_offset[] was first readable in a window:
        # an arm64 vCPU at EL0 could not read it) are unchecked, not wrong: they are
        # recorded with the boot (counted_vcpu_index), not refused.
        if not c.agree or c.unmapped:
            return (f'the register check of the running vCPU agreed in {c.agree} of '
                    f'{c.blocks} blocks ({c.unmapped} with a base that is no vCPU\'s): '
                    'the per-vCPU split is not trusted')
        return ''

    def phase(self, n: int) -> Phase:
        try:
            return self.phases[n]
        except KeyError:
            raise CountingError(f'the guest marked no window for phase {n} (phases seen: '
                                f'{sorted(self.phases) or "none"})') from None


def _hex(v: object) -> int:
    return int(str(v), 16)


def _int(d: dict[str, object], k: str) -> int:
    v = d[k]
    if not isinstance(v, int) or isinstance(v, bool):
        raise CountingError(f'{k} is {v!r}, not a number')
    return v


def _vcpu_index(d: object) -> VcpuIndex:
    if not isinstance(d, dict):
        raise CountingError('no vcpu_index object')
    source = d['source']
    if source not in ('current_cpu', 'callback', 'none'):
        raise CountingError(f'vcpu_index source {source!r}')
    c = d['check']
    check = None
    if c is not None:
        if not isinstance(c, dict) or not isinstance(c['registers'], list):
            raise CountingError('vcpu_index check is not an object with registers')
        check = IndexCheck(tuple(str(r) for r in c['registers']), bool(c['percpu_read']),
                           _int(c, 'blocks'), _int(c, 'agree'), _int(c, 'disagree'),
                           _int(c, 'unmapped'), _int(c, 'pending'))
    return VcpuIndex(str(source), _int(d, 'callbacks'), _int(d, 'callback_index_wrong'),
                     _int(d, 'unresolved'), check)


def _line(li: dict[str, object], size: int) -> Line:
    vcpus = li['vcpus']
    pcs = li['pcs']
    if not isinstance(vcpus, list) or not isinstance(pcs, list):
        raise CountingError('a line without its vcpus and pcs lists')
    return Line(_hex(li['paddr']), _hex(li['vaddr']), _int(li, 'node'),
                _int(li, 'hitm_local'), _int(li, 'hitm_remote'), _int(li, 'invalidations'),
                _int(li, 'false_sharing'),
                tuple(LineVcpu(_int(c, 'vcpu'), _int(c, 'hitm_local'), _int(c, 'hitm_remote'),
                               _int(c, 'invalidations'), _int(c, 'false_sharing'),
                               _hex(c['load_bytes']), _hex(c['store_bytes']))
                      for c in vcpus),
                tuple(PcCount(_hex(c['pc']), _hex(c['peer_pc']), _int(c, 'transfers'),
                              _int(c, 'overcount_max'), _int(c, 'hitm_local'),
                              _int(c, 'hitm_remote'), _int(c, 'invalidations'),
                              _int(c, 'false_sharing'), tuple(int(x) for x in c['vcpus']))
                      for c in pcs),
                size=size)


VCPU_FIELDS = tuple(f.name for f in fields(VcpuCounts))


def parse_counts(text: str) -> Counts:
    try:
        doc = json.loads(text)
        if doc.get('plugin') != PLUGIN_NAME:
            raise CountingError('not kloc-count output')
        if str(doc.get('version', '')).split('.')[0] != PLUGIN_VERSION.split('.')[0]:
            raise CountingError(f'written by kloc-count {doc.get("version")}, not '
                                f'{PLUGIN_VERSION}: count again with this plugin')
        phases = {}
        line_bytes = _int(doc, 'line_bytes')
        for p in doc['phases']:
            # a later 2.x may add fields: those this kloc knows are read, each required
            vcpus = tuple(VcpuCounts(**{k: int(c[k]) for k in VCPU_FIELDS})
                          for c in p['vcpus'])
            lines = tuple(_line(li, line_bytes) for li in p['lines'])
            phases[int(p['phase'])] = Phase(int(p['phase']), int(p['windows']),
                                            int(p['contended_lines']), vcpus, lines)
        api = doc['api']
        m = doc['markers']
        c = doc['cache']
        return Counts(str(doc['version']), str(doc['qemu_header']),
                      (_int(api, 'built'), _int(api, 'qemu_min'), _int(api, 'qemu_cur')),
                      str(doc['target']), _vcpu_index(doc['vcpu_index']),
                      _int(doc, 'vcpus'), _int(doc, 'vcpu_threads'),
                      _int(doc, 'line_table_bytes'),
                      CacheModel(_int(c, 'bytes'), _int(c, 'assoc'), _int(c, 'sets'),
                                 line_bytes, bool(c['coherence'])),
                      str(doc['count']), doc['open_phase'],
                      _int(m, 'bad'), _int(m, 'unmatched_ends'), _int(m, 'nested_starts'),
                      _int(doc, 'transfers_dropped'), phases)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CountingError(f'the plugin output cannot be read: {e}') from None


# The counted figures, in the order reports show them: bench/metrics.py
# describes each (title, unit, whether it is a primary), and a tool test
# checks that it describes exactly these.
FIGURES = ('insns_pkt_single', 'insns_pkt_all', 'fcontended_pkt_all', 'fsharing_pkt_all',
           'contended_pkt_all', 'transfers_pkt_all', 'hitm_lcl_pkt_all', 'hitm_rmt_pkt_all',
           'misses_pkt_all', 'remote_miss_pct_all',
           'remote_pct_all', 'transfers_pkt_single', 'misses_pkt_single',
           'remote_miss_pct_single', 'remote_pct_single')


# lo_counters.c's run_phase() marks each of its two phases once.
WINDOWS = {PHASE_SINGLE: 1, PHASE_ALL: 1}
# The largest share of a window's RAM accesses the plugin may fail to place on
# a node (physical addresses outside the RAM map it was given) for the boot's
# remote share, and the line model, to stand for the window.
UNMAPPED_MAX = 0.001


def check_windows(counts: Counts) -> None:
    """Refuse a counted boot whose windows cannot be trusted: one not counted by
    window with coherence (count=windows, coherence=on), a window left open,
    bad, unmatched or nested markers, a window count other than the kselftest's,
    contended lines the plugin could not track, or unmapped RAM accesses above
    UNMAPPED_MAX. The boot is then a failed run, replaced like a failed timed one."""
    why = []
    if counts.count != 'windows':
        why.append(f'count={counts.count}: the whole run is counted, not the windows')
    if not counts.cache.coherence:
        why.append('coherence=off: no transfers were counted')
    if counts.open_phase is not None:
        why.append(f'the window of phase {counts.open_phase} was never closed')
    for n, what in ((counts.bad_markers, 'bad markers'),
                    (counts.unmatched_ends, 'end markers without a start'),
                    (counts.nested_starts, 'start markers inside an open window'),
                    (counts.transfers_dropped,
                     'transfers on contended lines past lines_max, not attributed')):
        if n:
            why.append(f'{n} {what}')
    seen = {n: p.windows for n, p in counts.phases.items()}
    if seen != WINDOWS:
        why.append(f'windows per phase {seen or "none"}, where the kselftest marks '
                   f'{WINDOWS}')
    for n, p in sorted(counts.phases.items()):
        placed = p.total('local') + p.total('remote')
        unmapped = p.total('unmapped')
        if unmapped > UNMAPPED_MAX * (placed + unmapped):
            why.append(f'phase {n}: {unmapped} of {placed + unmapped} RAM accesses '
                       f'unmapped (more than {UNMAPPED_MAX:.1%})')
    if why:
        raise CountingError('the counted windows cannot be trusted: ' + '; '.join(why))


# What a boot's counts give whoever ran each access: the totals of all vCPUs.
INSTRUCTION_FIGURES = ('insns_pkt_single', 'insns_pkt_all')


def per_packet(counts: Counts, record: dict[str, object]) -> dict[str, float]:
    """The counted figures of one boot, per packet the kselftest sent in each window;
    the instruction figures only, where the per-vCPU split is not the running vCPUs'
    (Counts.attribution).

    record: the kselftest's JSON record of the same boot (its packets).
    """
    check_windows(counts)
    single, every = counts.phase(PHASE_SINGLE), counts.phase(PHASE_ALL)
    per_cpu = record.get('per_cpu')
    n1 = record.get('measured_single')
    n2 = sum(int(c['measured']) for c in per_cpu if isinstance(c, dict)) \
        if isinstance(per_cpu, list) else 0
    if not isinstance(n1, int) or n1 <= 0 or n2 <= 0:
        raise CountingError('the kselftest record gives no packets for its windows '
                            '(measured_single, per_cpu[].measured)')
    out = {}
    for suffix, phase, n in (('single', single, n1), ('all', every, n2)):
        out[f'insns_pkt_{suffix}'] = phase.total('insns') / n
        out[f'contended_pkt_{suffix}'] = phase.total('contended') / n
        out[f'fcontended_pkt_{suffix}'] = phase.total('contended_false') / n
        out[f'transfers_pkt_{suffix}'] = phase.total('transfers') / n
        out[f'fsharing_pkt_{suffix}'] = phase.total('false_sharing') / n
        out[f'hitm_lcl_pkt_{suffix}'] = phase.total('hitm_local') / n
        out[f'hitm_rmt_pkt_{suffix}'] = phase.total('hitm_remote') / n
        out[f'misses_pkt_{suffix}'] = phase.total('misses') / n
        out[f'remote_miss_pct_{suffix}'] = 100 * phase.remote_miss_share
        out[f'remote_pct_{suffix}'] = 100 * phase.remote_share
    if counts.attribution:
        return {k: out[k] for k in FIGURES if k in INSTRUCTION_FIGURES}
    return {k: out[k] for k in FIGURES}


def read_counts(path: Path) -> Counts:
    """The plugin's JSON; its absence means QEMU did not exit cleanly."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CountingError(f'{path}: the plugin wrote no counts; QEMU did not exit '
                            'cleanly (killed, or it crashed)') from None
    return parse_counts(text)
