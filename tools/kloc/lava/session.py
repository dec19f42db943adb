# SPDX-License-Identifier: GPL-2.0
"""make lava RUN=1 (and make test): every job validated, run with lava-run, read back,
and, with direct results to compare, compared.

The outputs, beside the jobs in OUT/lava/<kernel>/:
  results/<job>/        each job's device configuration, lava-run's logs, the console
  junit.xml             the KUnit jobs' results (kunitpy/junit.py), and the kselftest's
  compare.txt           LAVA against the direct runs (compare.py)
The KCIDB submission (kcidb.json) is lava/kcidb.py's of the Outcome; the
command line writes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from kloc import progress
from kloc.guests import guest
from kloc.kunitpy import ktap, summary
from kloc.kunitpy.junit import KunitRun
from kloc.lava import compare, device, local, results
from kloc.lava.export import ARTIFACTS
from kloc.qemu import topology
from kloc.trees.sources import Tree


@dataclass(frozen=True)
class Options:
    lava_dir: Path              # OUT/lava/<kernel>
    cache: Path
    direct_kunit: Path | None   # make kunit's runs of this kernel: compare with them
    direct_boots: int           # direct boots of each guest to compare with (0: none)
    guest_timeout: int
    only: tuple[str, ...] = ()  # job names; () for every job


@dataclass
class Outcome:
    kunit: list[results.LavaKunit] = field(default_factory=list)
    selftests: list[results.LavaSelftest] = field(default_factory=list)
    checks: list[compare.Check] = field(default_factory=list)
    jobs: dict[str, Path] = field(default_factory=dict)     # each run's job file, by run name

    @property
    def ok(self) -> bool:
        return all(k.ok for k in self.kunit) and all(s.ok for s in self.selftests) and \
            all(c.ok or not c.gating for c in self.checks)

    def junit_runs(self) -> list[KunitRun]:
        """The KUnit runs, and each kselftest run as a suite of its TAP results."""
        runs = [k.run for k in self.kunit]
        for s in self.selftests:
            cases = [ktap.Result(name, ktap.Status[status] if status in ktap.Status.__members__
                                 else ktap.Status.FAIL) for name, status in s.statuses.items()]
            doc = ktap.Document(True, [ktap.Result('lo_counters', ktap.Status.PASS if s.ok
                                                   else ktap.Status.FAIL, s.why, [], cases)],
                                1, [])
            runs.append(KunitRun(s.guest, s.topology, doc, s.log.seconds()))
        return runs


def image_file(job: local.JobFile, label: str) -> Path:
    """Where make lava put a job's image (its URL may point at a lab's server)."""
    images = job.definition['actions'][0]['deploy']['images']
    return job.path.parent.parent / ARTIFACTS / Path(urlsplit(images[label]['url']).path).name


def _guest(tree: Tree, job: local.JobFile) -> guest.Guest:
    return guest.Guest(tree, topology.get(job.meta('topology')).arch, job.meta('allocator'))


def _kunit(tree: Tree, job: local.JobFile, opts: Options, types: Path, out: Outcome) -> None:
    d = local.run(job, opts.lava_dir, types)
    topo = job.meta('topology')
    k = results.kunit(d.log, job.meta('kernel'), topo, ktap.kunit_dir(tree.path))
    out.kunit.append(k)
    out.jobs[f'{k.run.kernel}.{topo}'] = job.path
    if opts.direct_kunit is not None:
        out.checks.append(compare.kunit(k, opts.direct_kunit))


def _selftest(tree: Tree, job: local.JobFile, opts: Options, types: Path,
              out: Outcome) -> None:
    """The job, and its direct boots around it: one before, the others after (the
    host's speed drifts)."""
    topo, g = job.meta('topology'), _guest(tree, job)
    initrd, where = image_file(job, 'initrd'), opts.lava_dir / local.RESULTS / job.name
    n = opts.direct_boots
    boots = compare.direct_boots(g, initrd, topo, opts.guest_timeout, min(n, 1), where)
    d = local.run(job, opts.lava_dir, types)
    s = results.selftest(d.log, topo, job.meta('guest'), job.meta('allocator'))
    out.selftests.append(s)
    out.jobs[f'{s.guest}.{topo}'] = job.path
    progress.say(f'{job.name}: ' + (f'{len(s.statuses)} results, ' + ', '.join(
        f'{name} {f.value:.0f} {f.unit}' for name, f in s.figures.items()
        if name in compare.FIGURES) if s.ok else f'BAD RUN: {s.why}'))
    if n:
        boots += compare.direct_boots(g, initrd, topo, opts.guest_timeout, n - 1, where,
                                      first=2)
        sha = job.definition['actions'][0]['deploy']['images']['kernel']['sha256sum']
        out.checks += compare.selftest(s, boots, str(sha), g.image())


def run(tree: Tree, opts: Options) -> Outcome:
    todo = local.load_jobs(opts.lava_dir)
    if opts.only:
        unknown = set(opts.only) - {j.name for j in todo}
        if unknown:
            raise local.LavaRunError(f'no such jobs: {", ".join(sorted(unknown))}; there are '
                                     + ', '.join(j.name for j in todo))
    local.lava_run()
    types = device.templates(opts.cache)
    local.validate_all(todo, opts.lava_dir, types)
    out = Outcome()
    for job in todo:
        if opts.only and job.name not in opts.only:
            continue
        if job.meta('kind') == 'kunit':
            _kunit(tree, job, opts, types, out)
        else:
            _selftest(tree, job, opts, types, out)
    return out


def render(o: Outcome) -> str:
    """The KUnit summary of the LAVA runs, the kselftest runs, and the comparisons."""
    parts = [summary.render([k.run for k in o.kunit])] if o.kunit else []
    lines = [f'LAVA {k.run.topology}: {p}' for k in o.kunit for p in k.problems]
    lines += [f'LAVA {s.guest} on {s.topology}: ' + (s.why or 'a good run: ' + ', '.join(
        f'{n} {f.value:.0f} {f.unit}' for n, f in s.figures.items() if n in compare.FIGURES))
        for s in o.selftests]
    if lines:
        parts.append('\n'.join(lines) + '\n')
    if o.checks:
        parts.append(compare.render(o.checks))
    return '\n'.join(parts)
