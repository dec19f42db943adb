# SPDX-License-Identifier: GPL-2.0
"""make bench-aa's findings: how often an A/A' review's counted verdict calls a
difference, each review's raw p, how far pairing by seed holds, and three
checks for a bias between the sides.

Each review is a folder OUT/bench-aa/<i>/review/<name>/ written by make
review: review.json (the verdict, each figure's raw and Holm p, how many
symbols the patch moved) and counted.jsonl (every counted boot, read pair by
pair: by seed). A review is of a layout-only patch (bench/layout.py: code and
data nothing uses, so only where things sit changes: the A/A' reviews that
matter), of one image on both sides (AA=1), or of a comment-only patch (whose
images are identical): the last two are sanity checks, equal by construction.
Under the null every kind calls a difference at most ALPHA of the time.

Pairing: boot k of each side runs with seed k. For each figure of each review,
the correlation of the sides over the seeds, the paired t-test's p (SciPy's
ttest_rel) and how many seeds agree in sign say whether a paired test would
gain power over Welch's, which the verdict uses, and whether it would call
layout alone a change (docs/counting.md).

The bias checks pool every boot of every review, each as its per cent
difference from its own review's mean (so that reviews run at other times
do not mix their levels in):
- boot order: in the reviews of one image, the second boot of each A B pair
  against the first (a one-sample t-test of the pair differences);
- the builds: the pair differences of the comment-only reviews against those
  of the one-image reviews (Welch's t);
- drift: the slope of a boot's value over its position in its review (an
  ordinary regression): a drift in time favours the side that boots later.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from statistics import median
from dataclasses import dataclass
from pathlib import Path

from kloc.bench import metrics, stats
from kloc.errors import KlocError


class AaError(KlocError):
    """No A/A review to read."""


# The verdict's figures, as review.json and counted.jsonl name them.
PRIMARY = tuple(n for n, v in metrics.COUNTED.items() if v[3])


@dataclass(frozen=True)
class Boot:
    side: str                       # 'a' or 'b', pair by pair (seed k: A, then B)
    values: dict[str, float]
    seed: int = -1                  # -1: none recorded (boots before seeds)


@dataclass(frozen=True)
class FigureTest:
    name: str
    change_pct: float
    p: float                        # Welch's two-sided p, before Holm
    p_holm: float
    verdict: str


@dataclass(frozen=True)
class AaReview:
    index: int
    patch: str                      # '' for one image on both sides (AA=1)
    figures: tuple[FigureTest, ...]
    boots: tuple[Boot, ...]
    verdict: str
    moved: int = -1                 # symbols the patch moved in System.map; -1: unknown

    @property
    def a_change(self) -> bool:
        """Whether the verdict called a change: a regression or an improvement (not a
        significant difference below the change of interest)."""
        return bool(re.match(r'(regression|improvement)', self.verdict))

    def called(self, alpha: float) -> bool:
        return any(f.p_holm < alpha for f in self.figures)

    @property
    def kind(self) -> str:
        if not self.patch:
            return 'one image'
        return 'layout' if self.patch.startswith('layout-') else 'comment'

    def paired(self, name: str) -> stats.Paired | None:
        """Seed k of A against seed k of B for figure name, where both sides have the
        same seeds (two or more)."""
        by = {s: {b.seed: b.values[name] for b in self.boots
                  if b.side == s and b.seed >= 0 and math.isfinite(b.values[name])}
              for s in ('a', 'b')}
        seeds = sorted(by['a'].keys() & by['b'].keys())
        if len(seeds) < 2:
            return None
        return stats.paired([by['a'][k] for k in seeds], [by['b'][k] for k in seeds])


@dataclass(frozen=True)
class BiasCheck:
    what: str
    figure: str
    mean_pct: float                 # the effect, in per cent of a review's mean
    n: int                          # pairs or boots behind it
    p: float


def _num(v: object) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _boots(path: Path) -> tuple[Boot, ...]:
    """The good counted boots, pair by pair: by seed (boot k of each side, A then B),
    since boots side by side end in any order; in file order where none has a seed."""
    out = []
    for n, line in enumerate(path.read_text().splitlines()[1:]):
        run = json.loads(line)
        record = run.get('record') or {}
        counted = record.get('counted') if isinstance(record, dict) else None
        if run.get('ok') and isinstance(counted, dict):
            seed = record.get('seed')
            order = (seed if isinstance(seed, int) else n, str(run['side']), n)
            out.append((order, Boot(str(run['side']),
                                    {k: _num(counted.get(k)) for k in PRIMARY},
                                    seed if isinstance(seed, int) else -1)))
    return tuple(b for _, b in sorted(out, key=lambda x: x[0]))


def load(folder: Path, index: int) -> AaReview | None:
    """The A/A review bench-aa wrote under folder (OUT/bench-aa/<i>), or None."""
    found = sorted(folder.glob('review/*/review.json'))
    if not found:
        return None
    doc = json.loads(found[0].read_text())
    counted = doc.get('counted') or {}
    figures = tuple(FigureTest(str(f['figure']), _num(f.get('change_pct')), _num(f['p']),
                               _num(f['p_holm']), str(f['verdict']))
                    for f in counted.get('figures', []) if f.get('primary'))
    patch = (doc.get('patch') or {}).get('file', '')
    layout = (doc.get('loopback') or {}).get('layout') or {}
    return AaReview(index, Path(str(patch)).name if patch else '', figures,
                    _boots(found[0].parent / 'counted.jsonl'), str(doc.get('verdict', '')),
                    int(layout.get('moved', -1)))


def collect(root: Path) -> list[AaReview]:
    """Every finished A/A review under root (OUT/bench-aa), by its number."""
    if not root.is_dir():
        raise AaError(f'{root}: no A/A reviews; make bench-aa writes them')
    out = []
    for d in sorted((d for d in root.iterdir() if d.name.isdigit()), key=lambda d: int(d.name)):
        r = load(d, int(d.name))
        if r is not None and r.figures:
            out.append(r)
    if not out:
        raise AaError(f'{root}: no finished A/A review with counted figures')
    return out


def _relative(r: AaReview, name: str) -> list[tuple[str, float]]:
    """Each boot's value of name in per cent of the review's mean: (side, value)."""
    xs = [(b.side, b.values[name]) for b in r.boots if math.isfinite(b.values[name])]
    mean = sum(v for _, v in xs) / len(xs) if xs else 0.0
    return [(s, 100 * (v / mean - 1)) for s, v in xs] if mean else []


def _pairs(r: AaReview, name: str) -> list[float]:
    """Second minus first of each pair of boots as they ran (A then B), in per cent."""
    xs = _relative(r, name)
    return [xs[i + 1][1] - xs[i][1] for i in range(0, len(xs) - 1, 2)
            if (xs[i][0], xs[i + 1][0]) == ('a', 'b')]


def _one_sample(d: list[float]) -> tuple[float, float]:
    """Mean and two-sided p of a one-sample t-test against 0."""
    if len(d) < 2:
        return math.nan, math.nan
    mean, sd = sum(d) / len(d), stats.sd(d)
    if sd == 0:
        return mean, 1.0 if mean == 0 else 0.0
    return mean, stats.t_sf2(mean / (sd / math.sqrt(len(d))), len(d) - 1)


def _slope(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares slope of y over x and its two-sided p (t with n - 2 df)."""
    n = len(points)
    if n < 3:
        return math.nan, math.nan
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    if sxx == 0:
        return math.nan, math.nan
    b = sxy / sxx
    resid = sum((y - my - b * (x - mx)) ** 2 for x, y in points)
    se = math.sqrt(resid / (n - 2) / sxx)
    return b, (1.0 if b == 0 else 0.0) if se == 0 else stats.t_sf2(b / se, n - 2)


def bias_checks(reviews: list[AaReview]) -> list[BiasCheck]:
    same = [r for r in reviews if not r.patch]
    built = [r for r in reviews if r.patch]
    out = []
    for name in PRIMARY:
        order = [d for r in same for d in _pairs(r, name)]
        mean, p = _one_sample(order)
        out.append(BiasCheck('boot order (B - A, one image)', name, mean, len(order), p))
        builds = [d for r in built for d in _pairs(r, name)]
        if len(builds) >= 2 and len(order) >= 2:
            w = stats.welch(order, builds)
            out.append(BiasCheck('the builds (patch - one image)', name,
                                 sum(builds) / len(builds) - sum(order) / len(order),
                                 len(builds), w.p))
        points = [(float(i), v) for r in reviews for i, (_, v) in enumerate(_relative(r, name))]
        slope, p = _slope(points)
        out.append(BiasCheck('drift (per boot of a review)', name, slope, len(points), p))
    return out


def _binom_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))


def _short(name: str) -> str:
    return metrics.COUNTED[name][2]


def _verdict(text: str) -> str:
    """A review's verdict, its first clause, without 'in counts': 'no change',
    'no significant difference', 'no change of interest', 'inconclusive', ..."""
    first = re.split(r'[:,(]', text, maxsplit=1)[0].strip().removesuffix(' in counts')
    return first[:28] or '-'


def paired_called(r: AaReview, alpha: float) -> bool:
    """Whether Holm over the primary figures' paired p's calls a change."""
    ps = [p.p for n in PRIMARY if (p := r.paired(n)) is not None]
    return bool(ps) and min(stats.holm(ps)) < alpha


def _kinds(reviews: list[AaReview]) -> str:
    n = Counter(r.kind for r in reviews)
    return ', '.join(f'{n[k]} {KINDS[k]}' for k in KINDS if n[k])


KINDS = {'layout': "layout-only (A/A': code and data nothing uses)",
         'one image': 'one image on both sides (AA=1)',
         'comment': 'comment-only (identical images)'}


def report(reviews: list[AaReview], alpha: float) -> str:
    """The table of reviews, the count of calls, pairing, the raw p's and the bias checks."""
    boots = {len(r.boots) // 2 for r in reviews}
    lines = [f'bench-aa: {len(reviews)} reviews, the counted verdict '
             f'({"/".join(map(str, sorted(boots)))} counted boots a side), alpha {alpha:g}',
             f'  {_kinds(reviews)}', '',
             '                                                           significant',
             '  #  kind       symbols moved  verdict                       Welch  paired  '
             'a change']
    for r in reviews:
        moved = f'{r.moved:,}' if r.moved >= 0 else '?'
        lines.append(f'{r.index:>3}  {r.kind:<9}  {moved:>13}  {_verdict(r.verdict):<28}  '
                     f'{"yes" if r.called(alpha) else "no":<5}  '
                     f'{"yes" if paired_called(r, alpha) else "no":<6}  '
                     f'{"yes" if r.a_change else "no"}')
    lines += ['', 'Each figure: the change, Welch\'s p (the verdict\'s, before Holm), and '
              'seed by seed:', 'the paired t-test\'s p, the sides\' correlation r over the '
              'seeds, the seeds agreeing in sign.', '',
              '  #  figure                     change     Welch p  paired p       r  agree']
    for r in reviews:
        by = {f.name: f for f in r.figures}
        for n in PRIMARY:
            f, pr = by.get(n), r.paired(n)
            if f is None:
                continue
            pair = (f'{pr.p:>8.3g}  {pr.r:>6.3f}  {pr.agree}/{pr.n}' if pr is not None
                    else '       -       -  -')
            lines.append(f'{r.index:>3}  {_short(n)[:24]:<24}  {f.change_pct:>+8.3f}%  '
                         f'{f.p:>8.3g}  {pair}')
    total, called_all = len(reviews), sum(r.called(alpha) for r in reviews)
    lines += ['', f'called a significant difference: {called_all} of {total} (Holm over the '
              f'{len(PRIMARY)} primary figures; at most {alpha * total:g} expected; '
              f'P(>= {called_all} of {total} | rate {alpha:g}) = '
              f'{_binom_tail(called_all, total, alpha):.3g})']
    for kind in KINDS:
        of = [r for r in reviews if r.kind == kind]
        if not of:
            continue
        called = sum(r.called(alpha) for r in of)
        verdicts = Counter(_verdict(r.verdict) for r in of)
        lines += ['', f'{KINDS[kind]}: {len(of)} reviews',
                  f'  the verdict called a change (a regression or an improvement): '
                  f'{sum(r.a_change for r in of)} of {len(of)}',
                  f'  a significant difference: {called} of {len(of)} (Holm over the '
                  f'{len(PRIMARY)} primary figures; P(>= {called} | rate {alpha:g}) = '
                  f'{_binom_tail(called, len(of), alpha):.3g}); a paired test would have '
                  f'called {sum(paired_called(r, alpha) for r in of)}',
                  '  verdicts: ' + ', '.join(f'{v} {k}' for v, k in verdicts.most_common())]
        if kind == 'layout':
            shifted = [r.moved for r in of if r.moved >= 0]
            if shifted:
                lines.append(f'  symbols moved: {min(shifted):,} to {max(shifted):,} a patch'
                             + ('' if min(shifted) > 0 else
                                '; a patch that moved none was not layout-only'))
            for name in PRIMARY:
                pairs = [r.paired(name) for r in of]
                rs = [p.r for p in pairs if p is not None and math.isfinite(p.r)]
                if rs:
                    lines.append(f'  pairing, {_short(name)}: r median {median(rs):+.2f} '
                                 f'(from {min(rs):+.2f} to {max(rs):+.2f}, {len(rs)} reviews)')
    low = {n: sum(f.p < alpha for r in reviews for f in r.figures if f.name == n)
           for n in PRIMARY}
    raw = ', '.join(f'{_short(n)} {k}' for n, k in low.items())
    lines += ['', f'raw p < {alpha:g} (before Holm), per figure, of {total}: {raw}', '',
              'Bias checks, every boot in per cent of its review\'s mean:']
    if any(b.seed >= 0 for r in reviews for b in r.boots):
        lines += ['  (seeded boots: boot k of each side is seed k, so boot order and drift',
                  '  compare the seeds, which count differently by design, not the host\'s',
                  '  time; they test for a bias only in unseeded runs)']
    for c in bias_checks(reviews):
        unit = '%/boot' if c.what.startswith('drift') else '%'
        lines.append(f'  {c.what:<32} {_short(c.figure):<24} {c.mean_pct:>+8.3f}{unit:<7} '
                     f'n {c.n:<4} p {c.p:.3g}')
    return '\n'.join(lines) + '\n'
