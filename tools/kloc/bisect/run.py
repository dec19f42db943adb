# SPDX-License-Identifier: GPL-2.0
"""make bisect: the first commit between GOOD and BAD that moves each signal.

First both ends are measured as a review measures a base and a patched
kernel: KUnit on every topology (a case whose status differs, run again on
both, review.confirm), and the counted loopback boots on TOPOLOGY. Each
case that passes at GOOD and fails at BAD, and each counted figure the
review of BAD against GOOD calls a regression or an improvement, is a
signal (judge.py); each is bisected on its own (search.py) along BAD's
first parents, over steps that signals share: a revision is measured once,
for every signal that asks for it, with only the topologies those signals
need. Every measured revision is kept in steps/<sha>.json, so that an
interrupted bisect resumes where it stopped. The user's tree is only read
(gitread.py); each revision's files are bisect's own (checkout.py).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from kloc import progress
from kloc.atomicfile import write_text
from kloc.bisect import judge, steps
from kloc.bisect.gitread import Commit, GitError, Repo
from kloc.bisect.judge import Signal
from kloc.bisect.search import BAD, GOOD, SKIP, Search
from kloc.bisect.steps import Measured, Settings
from kloc.review import review
from kloc.review.patched import series_hash
from kloc.trees.sources import Tree

VERSION = 1


@dataclass(frozen=True)
class Request:
    kdir: Path
    good: str
    bad: str
    settings_out: Path      # OUT
    cache: Path
    topologies: tuple[str, ...]
    topology: str
    counted: int
    jobs: int
    timeout: int
    seconds: float
    alpha: float
    mde: float
    kunit: bool = True


@dataclass(frozen=True)
class Checked:
    """The request, its revisions resolved and checked; nothing written yet."""
    repo: Repo
    good: Commit
    bad: Commit
    commits: list[Commit]
    merges: int
    dirty: list[str]
    settings: Settings


def check(req: Request) -> Checked:
    """Every refusal, before anything is written: KDIR a complete git tree, both
    revisions there, GOOD an ancestor of BAD and not BAD."""
    repo = Repo(req.kdir)
    repo.check()
    good, bad = repo.resolve(req.good, 'GOOD'), repo.resolve(req.bad, 'BAD')
    if good.sha == bad.sha:
        raise GitError(f'GOOD and BAD are the same commit ({good.short}): nothing to bisect')
    if not repo.is_ancestor(good.sha, bad.sha):
        raise GitError(f'GOOD={req.good} ({good.short}) is not an ancestor of BAD={req.bad} '
                       f'({bad.short}): give a GOOD that BAD descends from (git merge-base '
                       f'{req.bad} {req.good} is one)')
    commits = repo.first_parents(good.sha, bad.sha)
    if not commits or commits[-1].sha != bad.sha:
        raise GitError(f'GOOD={req.good} is not on BAD={req.bad}\'s first-parent line: '
                       'bisect follows first parents; give a GOOD on it')
    out = req.settings_out / 'bisect' / f'{good.short}..{bad.short}'
    s = Settings(req.kdir, req.cache, out, req.topologies if req.kunit else (), req.topology,
                 req.counted, req.jobs, req.timeout, req.seconds, req.alpha, req.mde)
    return Checked(repo, good, bad, commits, repo.merges(good.sha, bad.sha), repo.dirty(), s)


def _key(s: Settings) -> dict[str, object]:
    """What a stored measurement depends on besides its commit."""
    return {'version': VERSION, 'series': series_hash()[:16], 'topology': s.topology,
            'counted': s.counted, 'alpha': s.alpha, 'mde': s.mde}


def _pair(key: str) -> tuple[str, str]:
    topo, _, case = key.partition('\t')
    if not case:
        raise ValueError(key)
    return topo, case


def _load(path: Path, key: dict[str, object]) -> Measured | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get('key') != key:
        return None
    try:
        m = Measured(**{k: v for k, v in doc['measured'].items()
                        if k not in ('statuses', 'excuses', 'topologies')})
        m.statuses = {_pair(k): str(v) for k, v in doc['measured']['statuses'].items()}
        m.excuses = {_pair(k): str(v) for k, v in doc['measured']['excuses'].items()}
        m.topologies = tuple(doc['measured']['topologies'])
    except (KeyError, TypeError, ValueError):
        return None
    return m


def _dump(m: Measured) -> dict[str, object]:
    d = dataclasses.asdict(m)
    d['statuses'] = {f'{t}\t{c}': v for (t, c), v in m.statuses.items()}
    d['excuses'] = {f'{t}\t{c}': v for (t, c), v in m.excuses.items()}
    return d


def _save(path: Path, key: dict[str, object], m: Measured) -> None:
    write_text(path, json.dumps({'key': key, 'measured': _dump(m)}, indent=1) + '\n')


@dataclass
class Bisect:
    c: Checked
    # each end's tree, for the counted boots' guests
    trees: dict[str, Tree] = field(default_factory=dict)
    ends: dict[str, Measured] = field(default_factory=dict)
    signals: list[Signal] = field(default_factory=list)
    flaky: list[review.StatusChange] = field(default_factory=list)
    ends_counted: dict[str, object] = field(default_factory=dict)
    measured: dict[str, Measured] = field(default_factory=dict)  # sha -> the step
    searches: dict[str, Search] = field(default_factory=dict)   # signal key -> its search
    steps_run: list[str] = field(default_factory=list)          # shas, in order measured
    resumed: list[str] = field(default_factory=list)    # of them, those an earlier run measured

    @property
    def s(self) -> Settings:
        return self.c.settings

    def _path(self, sha: str) -> Path:
        return self.s.out / 'steps' / f'{sha}.json'

    # the ends
    def measure_ends(self) -> None:
        """Both ends' KUnit (in the one copy every step's KUnit kernel builds in: a
        revision's statuses need no kernel kept) and, for counted signals, each end's
        guest in a copy of its own, kept for the steps to be compared with."""
        s, c = self.s, self.c
        for label, commit in (('good', c.good), ('bad', c.bad)):
            progress.say(f'{label.upper()} {commit.short} "{commit.subject}"')
            start = time.monotonic()
            m = Measured(commit.sha)
            if s.topologies:
                self._kunit_end(label, commit, s.topologies, label, m)
            if s.counted:
                tree = steps.materialize(c.repo, commit.sha, s, label, m)
                if tree is None:
                    raise GitError(f'{label.upper()}={commit.short}: {m.skipped["counted"]}')
                self.trees[label] = tree
            self.ends[label] = steps.timed(m, start)
        if s.topologies:
            self._kunit_signals()
        if s.counted:
            self._counted_signals()

    def _kunit_end(self, label: str, commit: Commit, topos: tuple[str, ...], where: str,
                   m: Measured) -> None:
        tree = steps.materialize(self.c.repo, commit.sha, self.s, 'step', m)
        if tree is None:
            raise GitError(f'{label.upper()}={commit.short}: {m.skipped["kunit"]}; bisect '
                           'needs both ends measured')
        steps.kunit(tree, self.s, topos, self.s.out / 'ends' / where / 'kunit', m)
        if 'kunit' in m.skipped:
            raise GitError(f'{label.upper()}={commit.short}: {m.skipped["kunit"]}')

    def _kunit_signals(self) -> None:
        g, b = self.ends['good'], self.ends['bad']
        changes, _ = review.compare_statuses(g.statuses, b.statuses)
        changes, _ = review.split_known(changes, g.statuses, b.statuses, g.excuses, b.excuses)
        again = tuple(t for t in self.s.topologies if any(x.topology == t for x in changes))
        if again:
            progress.say(f'{len(changes)} KUnit status change(s) between the ends on '
                         f'{", ".join(again)}: every suite again there, at both ends')
            second = {}
            # BAD first: its files are the ones in the copy, so only GOOD is rebuilt
            for label, commit in (('bad', self.c.bad), ('good', self.c.good)):
                m = Measured(commit.sha)
                self._kunit_end(label, commit, again, f'{label}-again', m)
                second[label] = (m.statuses, m.excuses)
            first = {'base': (g.statuses, g.excuses), 'patched': (b.statuses, b.excuses)}
            mine, flaky = review.confirm(
                first, {'base': second['good'], 'patched': second['bad']}, changes)
            # a case that changes within either end is reported, not bisected
            self.flaky = flaky + [x for x in mine if x.flaky]
            changes = [x for x in mine if not x.flaky]
        self.signals += judge.kunit_signals([(x.topology, x.case, x.base, x.patched)
                                             for x in changes])

    def _counted_signals(self) -> None:
        progress.say(f'counted loopback boots on {self.s.topology}: BAD against GOOD')
        r = steps.counted_ab(('good', self.trees['good']), ('bad', self.trees['bad']), self.s,
                             self.s.out / 'ends' / 'counted')
        self.ends_counted = {'verdicts': {d.figure.name: d.verdict for d in r.diffs},
                             'figures': steps.medians(r.diffs), 'reused': r.reused(),
                             'lost': list(r.lost)}
        self.signals += judge.counted_signals(r.diffs, self.s.topology)

    # the steps
    def measure(self, i: int, kunit_topos: tuple[str, ...], counted: bool) -> Measured:
        """Commit i, for what the signals asking for it need (stored, then reused)."""
        commit = self.c.commits[i]
        key = _key(self.s)
        m = self.measured.get(commit.sha) or _load(self._path(commit.sha), key)
        need_k = tuple(t for t in kunit_topos if m is None or (
            t not in m.topologies and 'kunit' not in m.skipped))
        need_c = counted and (m is None or (not m.counted and 'counted' not in m.skipped))
        if m is not None and not need_k and not need_c:
            if commit.sha not in self.measured:     # measured by an earlier run: resumed
                self.resumed.append(commit.sha)
                self.steps_run.append(commit.sha)
            self.measured[commit.sha] = m
            return m
        start = time.monotonic()
        progress.say(f'step {len(self.steps_run) + 1}: {commit.short} "{commit.subject}" '
                     f'({i + 1} of {len(self.c.commits)} after GOOD)')
        m = m or Measured(commit.sha)
        tree = steps.materialize(self.c.repo, commit.sha, self.s, 'step', m)
        if tree is not None:
            if need_k:
                topos = tuple(dict.fromkeys(m.topologies + need_k))
                steps.kunit(tree, self.s, topos,
                            self.s.out / 'steps' / commit.short / 'kunit', m)
            if need_c:
                steps.counted_step(tree, self.trees['good'], self.trees['bad'], self.s,
                                   self.s.out / 'steps' / commit.short, m)
        steps.timed(m, start)
        self.measured[commit.sha] = m
        if commit.sha not in self.steps_run:
            self.steps_run.append(commit.sha)
        _save(self._path(commit.sha), key, m)
        return m

    def outcome(self, sig: Signal, m: Measured) -> str:
        if sig.kind == 'kunit':
            if 'kunit' in m.skipped:
                return SKIP
            return judge.kunit_step(m.statuses.get((sig.topology, sig.name), 'ABSENT'))
        if 'counted' in m.skipped:
            return SKIP
        return judge.counted_step(sig, m.counted.get('vs_good', {}).get(sig.name, ''),
                                  m.counted.get('vs_bad', {}).get(sig.name, ''))

    def bisect(self) -> None:
        n = len(self.c.commits)
        self.searches = {sig.key: Search(n) for sig in self.signals}
        by_key = {sig.key: sig for sig in self.signals}
        while True:
            wants: dict[int, list[str]] = {}
            for k, srch in self.searches.items():
                nxt = srch.next()
                if nxt is not None:
                    wants.setdefault(nxt, []).append(k)
            if not wants:
                return
            i = min(wants, key=lambda j: (-len(wants[j]), j))
            sigs = [by_key[k] for k in wants[i]]
            topos = tuple(dict.fromkeys(x.topology for x in sigs if x.kind == 'kunit'))
            m = self.measure(i, topos, any(x.kind == 'counted' for x in sigs))
            for sig in sigs:
                out = self.outcome(sig, m)
                self.searches[sig.key].record(i, out)
                where = f' on {sig.topology}' if sig.kind == 'kunit' else ''
                progress.say(f'  {sig.name}{where}: {out}')


def run(c: Checked) -> Bisect:
    b = Bisect(c)
    c.settings.out.mkdir(parents=True, exist_ok=True)
    b.measure_ends()
    kunit = [x for x in b.signals if x.kind == 'kunit']
    counted = [x.name for x in b.signals if x.kind == 'counted']
    progress.say(f'{len(b.signals)} signal(s) to bisect over {len(c.commits)} commits: '
                 f'{len(kunit)} KUnit case(s) on '
                 f'{", ".join(sorted({x.topology for x in kunit})) or "no topology"}, '
                 f'{len(counted)} counted figure(s)' + (f' ({", ".join(counted)})' if counted
                                                        else ''))
    if b.signals:
        b.bisect()
    return b


__all__ = ['BAD', 'GOOD', 'GitError', 'Request', 'check', 'run']
