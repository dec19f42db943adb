# SPDX-License-Identifier: GPL-2.0
"""A stated model, labelled as one: remote ITS table reads as time.

The counts (figures.py) say how many of an interrupt's table reads cross
to another node. Time is not measured under emulation; this model turns
the counts into time with one assumed figure, and says what follows at the
setting of the ITS patch's own benchmark (the seed: ab against Apache on a
HiSilicon D06, 0.02753 ms per request, vmstat showing 170K-200K interrupts
a second, ~3.6% better with the patch):

- each remote read costs PENALTY_NS more than a local one (ITS_REMOTE_NS=;
  the default is an assumption: no published two-socket Arm server figure
  could be read here, docs/review.md);
- every read lies on its interrupt's critical path, one after another, and
  nothing caches them (QEMU's ITS caches nothing; a real ITS does, so these
  are upper bounds);
- the time an interrupt's path gains is lost by the request, so the share
  of each second lost is rate x (remote reads per interrupt) x penalty.

The share a change implies is then rate x delta x penalty; the penalty a
claimed share would need is share / (rate x delta).
"""

from __future__ import annotations

from dataclasses import dataclass

from kloc.errors import KlocError

# The seed's setting (seeds/its-numa-patch-v3-*.txt).
SEED_RATES = (170_000, 200_000)     # interrupts a second, vmstat's "in"
SEED_REQUEST_MS = 0.02753           # ab's time per request (mean, concurrent), unpatched
SEED_CLAIM = 0.036                  # the claimed improvement
# Remote minus local DRAM latency, ns: assumed, not cited (docs/review.md says why).
PENALTY_NS = 100.0


class ModelError(KlocError):
    """A penalty the model cannot use."""


def check_penalty(ns: float) -> float:
    if not 0 < ns < 10_000:
        raise ModelError(f'ITS_REMOTE_NS={ns:g}: give the extra nanoseconds of a remote '
                         'read over a local one, between 0 and 10000 (default '
                         f'{PENALTY_NS:g})')
    return ns


@dataclass(frozen=True)
class Implied:
    """What the model makes of some remote reads per interrupt."""
    remote: float                   # remote reads per interrupt (or their change)
    penalty_ns: float

    @property
    def ns_per_interrupt(self) -> float:
        return self.remote * self.penalty_ns

    def share(self, rate: float) -> float:
        """The share of time lost at rate interrupts a second."""
        return rate * self.ns_per_interrupt * 1e-9

    def ns_per_request(self, rate: float) -> float:
        return rate * SEED_REQUEST_MS * 1e-3 * self.ns_per_interrupt

    def needed_penalty_ns(self, rate: float, share: float = SEED_CLAIM) -> float | None:
        """The penalty per remote read that share would need; None with no remote reads."""
        if self.remote <= 0:
            return None
        return share / (rate * self.remote) * 1e9

    def lines(self, what: str) -> list[str]:
        lo, hi = SEED_RATES
        out = [f'Model (stated, not measured): {what} = {self.remote:.3g} remote reads per '
               f'interrupt x ITS_REMOTE_NS={self.penalty_ns:g} ns = '
               f'{self.ns_per_interrupt:.3g} ns per interrupt, if every read is on the '
               'interrupt\'s path and uncached (an upper bound: real ITSs cache '
               'translations).',
               f'  At the seed\'s {lo // 1000}K-{hi // 1000}K interrupts/s and '
               f'{SEED_REQUEST_MS} ms per request ({lo * SEED_REQUEST_MS * 1e-3:.2f}-'
               f'{hi * SEED_REQUEST_MS * 1e-3:.2f} interrupts a request): '
               f'{self.ns_per_request(lo):,.0f}-{self.ns_per_request(hi):,.0f} ns a request, '
               f'{self.share(lo):.2%}-{self.share(hi):.2%} of the time, against the '
               f'claimed {SEED_CLAIM:.1%}.']
        need = [self.needed_penalty_ns(r) for r in (hi, lo)]
        if need[0] is None or need[1] is None:
            out.append(f'  With no remote reads to remove, {SEED_CLAIM:.1%} cannot come '
                       'from the ITS\'s table reads in this model.')
        else:
            out.append(f'  {SEED_CLAIM:.1%} would need {need[0]:.3g}-{need[1]:.3g} ns per '
                       'remote read.')
        return out
