# SPDX-License-Identifier: GPL-2.0
"""LAVA job definitions (device type qemu) for the KUnit kernels and the guest kselftest.

Each job boots what a direct run boots, with the QEMU options of that run:
a KUnit job takes kunit.py's command line for the topology (as
kunit_kernel.py builds it from tools/qemu_configs/<topology>.py), a
kselftest job the one guests/guest.py runs. The command is split the way
lava-server's qemu.jinja2 puts it together again:

- the kernel, the initrd and the DTB are deployed to tmpfs, each with its
  image_arg (-kernel with the command line, -initrd, -dtb);
- -m is the context's memory; on arm64, -machine and -cpu are its machine
  and cpu (the template always writes those for arm64);
- -accel kvm (and -cpu on x86_64) become no_kvm: false; where a boot
  probe did not show KVM working (kloc.qemu.topology.accel_args), no_kvm is
  true and the TCG options stay;
- everything else (-smp, the -object/-numa nodes, -nodefaults, -serial,
  -no-reboot, qboot's -bios) goes to extra_options, in its order;
- -nographic is the template's own.

The template adds -net nic,model=virtio -net user and -monitor none; the
kernels here have no virtio-net driver, so the NIC changes nothing they
see (docs/lava.md).
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kloc.digest import sha256_file
from kloc.errors import KlocError
from kloc.guests import guest
from kloc.kunitpy import runner
from kloc.lava import monitors
from kloc.lava.monitors import Monitor
from kloc.qemu import arches, topology
from kloc.trees.sources import Tree

DEVICE_TYPE = 'qemu'
# QEMU options that take no value.
FLAGS = frozenset({'-nographic', '-no-reboot', '-nodefaults', '-enable-kvm'})
# What qemu.jinja2 runs for each arch (its context "arch").
TEMPLATE_QEMU = {'arm64': 'qemu-system-aarch64', 'x86_64': 'qemu-system-x86_64'}
IMAGE_ARGS = {'kernel': '-kernel {kernel}', 'initrd': '-initrd {initrd}', 'dtb': '-dtb {dtb}'}
# The seconds LAVA may take to copy the images to tmpfs, and to start QEMU.
DEPLOY_S = BOOT_S = 120
MARGIN_S = 120


class JobError(KlocError):
    """A job cannot be written: an image is missing, or its command does not fit."""


@dataclass(frozen=True)
class Image:
    label: str          # kernel, initrd or dtb: LAVA's name, and {label} in its image_arg
    source: Path        # the file the direct run boots
    name: str           # its name among the artifacts


@dataclass(frozen=True)
class Job:
    name: str           # the job file's stem: kunit-x86_64_2n, kselftest-x86_64-slub
    kind: str           # 'kunit' or 'kselftest'
    kernel: str         # the tree's label: linux-6.12.117
    topology: str
    images: tuple[Image, ...]
    append: str         # the kernel command line
    context: dict[str, object]
    monitors: tuple[Monitor, ...]
    timeout: int        # seconds the test may take, as for a direct run
    guest: str = ''     # the guest's name, for kselftest jobs
    allocator: str = ''  # and its slab allocator


def options(cmd: list[str]) -> list[tuple[str, str | None]]:
    """A QEMU command's options after the binary, each with its value (None for a flag)."""
    out: list[tuple[str, str | None]] = []
    i = 1
    while i < len(cmd):
        if cmd[i] in FLAGS:
            out.append((cmd[i], None))
            i += 1
            continue
        if not cmd[i].startswith('-') or i + 1 >= len(cmd):
            raise JobError(f'cannot read the QEMU command at {cmd[i]!r}: {" ".join(cmd)}')
        out.append((cmd[i], cmd[i + 1]))
        i += 2
    return out


@dataclass
class Split:
    """A direct run's QEMU command, as the job carries it."""
    files: dict[str, Path]
    append: str
    context: dict[str, object]


def split(cmd: list[str], arch: str) -> Split:
    if cmd[0] != TEMPLATE_QEMU[arch]:
        raise JobError(f'{cmd[0]} is not what qemu.jinja2 runs for {arch} '
                       f'({TEMPLATE_QEMU[arch]})')
    opts = options(cmd)
    kvm = ('-accel', 'kvm') in opts
    files: dict[str, Path] = {}
    append = ''
    context: dict[str, object] = {'arch': arch, 'no_kvm': not kvm}
    extra: list[str] = []
    for opt, value in opts:
        if opt in ('-kernel', '-initrd', '-dtb') and value is not None:
            files[opt[1:]] = Path(value)
        elif opt == '-append' and value is not None:
            append = value
        elif opt == '-m' and value is not None:
            context['memory'] = int(value)
        elif opt == '-nographic':
            continue
        elif arch == 'arm64' and opt in ('-machine', '-cpu'):
            context[opt[1:]] = value
        elif arch == 'x86_64' and kvm and (opt == '-cpu' or (opt, value) == ('-accel', 'kvm')):
            continue        # the template's -cpu host -enable-kvm, where no_kvm is false
        else:
            extra.append(opt if value is None else f'{opt} {value}')
    if '"' in append:
        raise JobError(f'the kernel command line {append!r} holds a double quote, which '
                       'the image_arg cannot carry')
    context['extra_options'] = extra
    return Split(files, append, context)


def kunit_command(name: str, kernel: Path) -> list[str]:
    """kunit.py's QEMU command for the topology, as kunit_kernel.py's start() builds it
    for `kunit.py exec` (tests/test_lava.py checks it against the real one)."""
    p = topology.kunit_params(name)
    extra = p['extra_qemu_params']
    assert isinstance(extra, list)
    append = ' '.join(['kunit.enable=1', f'{p["kernel_command_line"]} kunit_shutdown=reboot'])
    return [f'qemu-system-{p["qemu_arch"]}', '-nodefaults', '-m', str(topology.KUNIT_MEM_MB),
            '-kernel',
            str(kernel), '-append', append, '-no-reboot', '-nographic', '-serial',
            'stdio'] + [str(x) for x in extra]


def kunit_image(tree: Tree, cache: Path, arch: str) -> Path:
    return runner.build_dir_for(tree, cache, arch) / arches.get(arch).kunit_image


def _images(s: Split, names: dict[str, str]) -> tuple[Image, ...]:
    return tuple(Image(label, s.files[label], names[label])
                 for label in ('kernel', 'initrd', 'dtb') if label in s.files)


def kunit_job(tree: Tree, cache: Path, name: str, timeout: int) -> Job:
    topo = topology.get(name)
    kernel = kunit_image(tree, cache, topo.arch)
    if not kernel.is_file():
        raise JobError(f'no {topo.arch} KUnit kernel of {tree.label} to deploy ({kernel} is '
                       f'missing): build it with make kunit')
    cmd = kunit_command(name, kernel)
    s = split(cmd, topo.arch)
    images = _images(s, {'kernel': f'kunit-{topo.arch}-{kernel.name}',
                         'dtb': f'{name}.dtb'})
    return Job(f'kunit-{name}', 'kunit', tree.label, name, images, s.append, s.context,
               (monitors.KUNIT,), timeout)


def kselftest_job(g: guest.Guest, initrd: Path, topo: topology.Topology,
                  timeout: int) -> Job:
    cmd = guest.qemu_command(g, initrd, topo)
    s = split(cmd, topo.arch)
    images = _images(s, {'kernel': f'guest-{g.arch}-{g.allocator}-{g.image().name}',
                         'initrd': initrd.name})
    return Job(f'kselftest-{g.arch}-{g.allocator}', 'kselftest', g.tree.label, topo.name,
               images, s.append, s.context, (monitors.KSELFTEST, monitors.KSELFTEST_EXIT),
               timeout, g.name, g.allocator)


def _minutes(seconds: float) -> dict[str, int]:
    return {'minutes': max(1, math.ceil(seconds / 60))}


def definition(job: Job, url: Callable[[Image], str],
               sha256: Callable[[Image], str]) -> dict[str, object]:
    """The job as LAVA reads it; url and sha256 of each deployed image."""
    images: dict[str, object] = {}
    for im in job.images:
        arg = IMAGE_ARGS[im.label]
        if im.label == 'kernel':
            arg += f' -append "{job.append}"'
        images[im.label] = {'url': url(im), 'sha256sum': sha256(im), 'image_arg': arg}
    metadata: dict[str, object] = {'kloc.kind': job.kind, 'kloc.kernel': job.kernel,
                                   'kloc.topology': job.topology}
    if job.guest:
        metadata.update({'kloc.guest': job.guest, 'kloc.allocator': job.allocator})
    return {
        'device_type': DEVICE_TYPE,
        'job_name': f'kloc {job.kind} {job.guest or job.kernel} on {job.topology}',
        'timeouts': {'job': _minutes(DEPLOY_S + BOOT_S + job.timeout + MARGIN_S),
                     'connection': _minutes(BOOT_S)},
        'priority': 'medium',
        'visibility': 'public',
        'metadata': metadata,
        'context': dict(job.context),
        'actions': [
            {'deploy': {'to': 'tmpfs', 'timeout': _minutes(DEPLOY_S), 'images': images}},
            {'boot': {'method': 'qemu', 'media': 'tmpfs', 'timeout': _minutes(BOOT_S)}},
            {'test': {'timeout': _minutes(job.timeout),
                      'monitors': [m.definition() for m in job.monitors]}},
        ],
    }


def copy_artifacts(jobs: list[Job], dest: Path) -> dict[str, str]:
    """Each job's images, copied into dest (a rebuild in the cache leaves them be);
    their sha256 by name."""
    dest.mkdir(parents=True, exist_ok=True)
    sums: dict[str, str] = {}
    for job in jobs:
        for im in job.images:
            if im.name in sums:
                continue
            if not im.source.is_file():
                raise JobError(f'{job.name}: its {im.label} {im.source} is missing')
            shutil.copyfile(im.source, dest / im.name)
            sums[im.name] = sha256_file(dest / im.name)
    return sums
