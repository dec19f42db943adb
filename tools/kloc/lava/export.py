# SPDX-License-Identifier: GPL-2.0
"""make lava: the jobs, the images they deploy, and the device dictionary, in one directory.

OUT/lava/<kernel>/
  jobs/kunit-<topology>.yaml       one per topology: the KUnit kernel of its arch
  jobs/kselftest-<guest>.yaml      one per guest kernel built (make guest)
  artifacts/                       the kernels, DTBs and initramfs images, copied
  device/qemu-kloc01.jinja2        the device dictionary (extends qemu.jinja2)

The images' URLs are file:// ones of artifacts/ unless a base URL is given
(where artifacts/ is published for a lab's workers).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from kloc import progress
from kloc.atomicfile import write_text
from kloc.bench.compare import default_topology
from kloc.guests import guest
from kloc.lava import device, jobs, yamlio
from kloc.qemu import arches, topology
from kloc.trees.sources import Tree

JOBS, ARTIFACTS, DEVICE = 'jobs', 'artifacts', 'device'


@dataclass(frozen=True)
class Request:
    tree: Tree
    cache: Path
    out: Path                   # OUT/lava/<kernel>
    topologies: tuple[str, ...]
    kunit_timeout: int
    guest_timeout: int
    seconds: float              # each kselftest phase
    artifacts_url: str = ''     # where artifacts/ is published; '' for file:// URLs


def guests(tree: Tree) -> list[guest.Guest]:
    """The guest kernels built for this tree (make guest), each arch and allocator."""
    out = []
    for arch in arches.ARCHES:
        for alloc in guest.ALLOCATORS:
            g = guest.Guest(tree, arch, alloc)
            if g.image().is_file():
                out.append(g)
    return out


def selftest_initramfs(tree: Tree, arch: str, seconds: float, work: Path) -> Path:
    """The kselftest's initramfs, as make guest makes it (guest.initramfs)."""
    binary = guest.static_selftest(arch, tree.path / 'tools' / 'testing' / 'selftests', work)
    return guest.initramfs(binary, ['-d', f'{seconds:g}', '-w', '0.5'],
                           work / f'initramfs-{arch}.cpio.gz', arch)


def make_jobs(r: Request, work: Path) -> list[jobs.Job]:
    out = [jobs.kunit_job(r.tree, r.cache, name, r.kunit_timeout) for name in r.topologies]
    built = guests(r.tree)
    if not built:
        raise jobs.JobError(f'no guest kernel of {r.tree.label} is built, so no kselftest '
                            'job: build one with make guest (ARCH=, ALLOC=)')
    initrds: dict[str, Path] = {}
    for g in built:
        if g.arch not in initrds:
            initrds[g.arch] = selftest_initramfs(r.tree, g.arch, r.seconds, work)
        out.append(jobs.kselftest_job(g, initrds[g.arch], topology.get(default_topology(g.arch)),
                                      r.guest_timeout))
    return out


def write(r: Request) -> list[Path]:
    """Write OUT/lava/<kernel> afresh; the job files, in order."""
    if r.out.exists():
        shutil.rmtree(r.out)
    work = r.out / 'work'
    todo = make_jobs(r, work)
    sums = jobs.copy_artifacts(todo, r.out / ARTIFACTS)
    shutil.rmtree(work)
    base = r.artifacts_url.rstrip('/')

    def url(im: jobs.Image) -> str:
        if base:
            return f'{base}/{im.name}'
        return (r.out / ARTIFACTS / im.name).resolve().as_uri()

    written = []
    for job in todo:
        path = r.out / JOBS / f'{job.name}.yaml'
        header = (f'# kloc: {job.kind} on {job.topology} ({topology.get(job.topology).about}), '
                  f'{job.guest or job.kernel}.\n# Written by make lava; docs/lava.md says '
                  'how to run it.\n')
        write_text(path, header + yamlio.dump(jobs.definition(job, url,
                                                              lambda im: sums[im.name])))
        written.append(path)
    write_text(r.out / DEVICE / f'{device.HOSTNAME}.jinja2', device.DICTIONARY)
    progress.say(f'{len(written)} LAVA jobs in {r.out / JOBS}; their images in '
                 f'{r.out / ARTIFACTS}; the device dictionary in {r.out / DEVICE}')
    return written
