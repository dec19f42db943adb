# SPDX-License-Identifier: GPL-2.0
"""A perf-c2c-like table of a phase's most contended cache lines, for review mails."""

from __future__ import annotations

from kloc.counting.counts import Phase
from kloc.counting.symbols import SymbolMap, describe_line, line_symbols


def _vcpu_set(vcpus: tuple[int, ...]) -> str:
    """0,1,2,3 -> 0-3."""
    if len(vcpus) > 2 and list(vcpus) == list(range(vcpus[0], vcpus[-1] + 1)):
        return f'{vcpus[0]}-{vcpus[-1]}'
    return ','.join(map(str, vcpus))


def _code(pc: int, syms: SymbolMap | None) -> str:
    if pc >> 63 == 0:
        return '(user)'
    return (syms.function(pc) if syms else '') or f'{pc:#x}'


def line_table(phase: Phase, syms: SymbolMap | None = None, arch: str = 'x86_64',
               top: int = 10, pcs: int = 3) -> str:
    """A perf-c2c-like table of the most contended lines of a phase (the plugin
    ranks them by remote HITM, then transfers, then false sharing), a block per
    line that fits review mails: each transfer's code on both sides, the
    requester's access and the holder's last one (the addresses are in the JSON)."""
    rows = [f'phase {phase.phase}: {phase.total("transfers")} transfers: HITM '
            f'{phase.total("hitm_local")} local, {phase.total("hitm_remote")} remote, '
            f'{phase.total("invalidations")} invalidations;',
            f'  {phase.total("false_sharing")} false sharing, {phase.total("true_sharing")} '
            f'true; misses {phase.total("misses_local")} local, '
            f'{phase.total("misses_remote")} remote; {phase.contended_lines} contended lines']
    for n, li in enumerate(phase.lines[:top], 1):
        what = describe_line(li, syms, arch)
        named = set(what.split('+')[0].split('|'))
        others = [s for s in (line_symbols(li, syms, arch) if syms else []) if s not in named]
        if others:
            what += f' (line also: {", ".join(others[:3])}{", ..." if len(others) > 3 else ""})'
        rows += [f'{n:>2}. line {li.paddr:#x}, node {li.node}: {what}',
                 f'    HITM {li.hitm_local} local, {li.hitm_remote} remote; invalidations '
                 f'{li.invalidations}; false sharing {li.false_sharing} of {li.transfers}',
                 '    vCPU:transfers/false '
                 + ' '.join(f'{c.vcpu}:{c.transfers}/{c.false_sharing}' for c in li.vcpus)]
        for pc in li.pcs[:pcs]:
            exact = '' if not pc.overcount_max else f' (<= {pc.overcount_max} over)'
            rows.append(f'    {pc.transfers} at {_code(pc.pc, syms)} <- '
                        f'{_code(pc.peer_pc, syms)}, vCPUs {_vcpu_set(pc.vcpus)}{exact}')
    return '\n'.join(rows)
