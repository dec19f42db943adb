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


def line_table(phase: Phase, syms: SymbolMap | None = None, arch: str = 'x86_64',
               top: int = 10, pcs: int = 3) -> str:
    """A perf-c2c-like table of the most contended lines of a phase, a block
    per line that fits review mails (the PCs' addresses are in the JSON)."""
    rows = [f'phase {phase.phase}: {phase.total("hitm")} hitm, '
            f'{phase.total("invalidations")} invalidations, {phase.total("shared")} '
            f'shared accesses,',
            f'  {phase.total("false_shared")} false-sharing stores, '
            f'{phase.contended_lines} contended lines']
    for n, li in enumerate(phase.lines[:top], 1):
        what = describe_line(li, syms, arch)
        named = set(what.split('+')[0].split('|'))
        others = [s for s in (line_symbols(li, syms, arch) if syms else []) if s not in named]
        if others:
            what += f' (line also: {", ".join(others[:3])}{", ..." if len(others) > 3 else ""})'
        rows += [f'{n:>2}. line {li.paddr:#x}, node {li.node}: {what}',
                 f'    hitm {li.hitm}, invalidations {li.invalidations}, shared {li.shared}, '
                 f'false sharing {li.false_shared}',
                 '    vCPU:hitm/inval/shared '
                 + ' '.join(f'{c.vcpu}:{c.hitm}/{c.invalidations}/{c.shared}'
                            for c in li.vcpus)]
        for pc in li.pcs[:pcs]:
            if pc.pc >> 63 == 0:
                fn = '(user)'
            else:
                fn = (syms.function(pc.pc) if syms else '') or '?'
            exact = '' if not pc.overcount_max else f' (<= {pc.overcount_max} over)'
            rows.append(f'    {pc.events} events at {fn}, vCPUs {_vcpu_set(pc.vcpus)}{exact}')
    return '\n'.join(rows)
