# SPDX-License-Identifier: GPL-2.0
"""The MSI workload's initramfs for arm64 guests: tools/guest/its-msi.c, built
static for the guest, busybox, and an /init that mounts proc, sysfs and devtmpfs
(for /dev/mem and /dev/hwrng), runs the workload once with the requests the
kernel command line gives (kloc.its=N), prints its exit status and reboots."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from kloc.atomicfile import write_bytes
from kloc.guests.guest import GuestError, busybox, pack
from kloc.paths import PACKAGE_ROOT
from kloc.qemu import arches

SOURCE = PACKAGE_ROOT / 'tools' / 'guest' / 'its-msi.c'
FLAG = 'kloc.its'
EXIT = 'kloc-its: exit'
ARCHES = ('arm64',)     # where there is an ITS

INIT = ('#!/bin/busybox sh\n'
        '/bin/busybox mount -t proc proc /proc\n'
        '/bin/busybox mount -t sysfs sys /sys\n'
        '/bin/busybox mount -t devtmpfs dev /dev\n'
        'n=\n'
        'for w in $(/bin/busybox cat /proc/cmdline); do\n'
        f'\tcase $w in {FLAG}=*) n=${{w#{FLAG}=}} ;; esac\n'
        'done\n'
        '/bin/its-msi -n "${n:-1}"\n'
        f'echo "{EXIT} $?"\n'
        '/bin/busybox reboot -f\n')


def build(arch: str, out: Path) -> Path:
    """The workload, static for arch, at out/its-msi-<arch> (built every time, in a
    second: a file kloc did not just write is never packed)."""
    cc = f'{arches.get(arch).cross_prefix()}gcc'
    dest = out / f'its-msi-{arch}'
    with tempfile.TemporaryDirectory(prefix='kloc-its-msi-') as tmp:
        binary = Path(tmp) / 'its-msi'
        try:
            r = subprocess.run([cc, '-static', '-O2', '-Wall', '-Wextra', '-Werror', '-o',
                                str(binary), str(SOURCE)], capture_output=True, text=True)
        except FileNotFoundError:
            raise GuestError(f'{cc} is missing: make deps installs it') from None
        if r.returncode:
            raise GuestError(f'building {SOURCE.name} for {arch} with {cc} failed:\n'
                             f'{r.stderr.strip()[-2000:]}')
        write_bytes(dest, binary.read_bytes(), mode=0o755)
    return dest


def initramfs(arch: str, out: Path) -> Path:
    """The workload's initramfs for arch, at out/its-msi-<arch>.gz."""
    if arch not in ARCHES:
        raise GuestError(f'the MSI workload needs an ITS: ARCH={"/".join(ARCHES)}, not {arch}')
    program = build(arch, out)
    with tempfile.TemporaryDirectory(prefix='kloc-initramfs-') as tmp:
        root = Path(tmp)
        for d in ('bin', 'proc', 'sys', 'dev'):
            (root / d).mkdir()
        shutil.copy2(busybox(arch), root / 'bin' / 'busybox')
        shutil.copy2(program, root / 'bin' / 'its-msi')
        (root / 'init').write_text(INIT)
        (root / 'init').chmod(0o755)
        return pack(root, out / f'its-msi-{arch}.gz')
