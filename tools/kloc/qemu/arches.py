# SPDX-License-Identifier: GPL-2.0
"""The architectures: one declaration each, for every build and every boot."""

from __future__ import annotations

import platform
from dataclasses import dataclass

from kloc.errors import KlocError


class ArchError(KlocError):
    """An architecture kloc does not know."""


@dataclass(frozen=True, kw_only=True)
class Arch:
    name: str                   # the kernel's ARCH=
    qemu: str                   # qemu-system-<qemu>
    qemu_package: str           # the Debian package holding it
    hosts: tuple[str, ...]      # uname -m of a machine of this arch
    cross: str                  # CROSS_COMPILE from another host
    cross_package: str          # the Debian package holding that compiler
    debian: str                 # dpkg's name for it
    image: str                  # the guest kernel image, in the build dir
    kunit_image: str            # what kunit.py boots
    console: str
    machine: tuple[str, ...]    # QEMU -machine for a plain boot (the KVM probe)
    numa_machine: tuple[str, ...]   # -machine and -cpu of the topologies' boots

    @property
    def qemu_binary(self) -> str:
        return f'qemu-system-{self.qemu}'

    def cross_prefix(self, host: str | None = None) -> str:
        """CROSS_COMPILE for building on host (this machine by default)."""
        return '' if (host or platform.machine()) in self.hosts else self.cross


ARCHES = {a.name: a for a in (
    Arch(name='arm64', qemu='aarch64', qemu_package='qemu-system-arm',
         hosts=('aarch64', 'arm64'), cross='aarch64-linux-gnu-',
         cross_package='gcc-aarch64-linux-gnu', debian='arm64',
         image='arch/arm64/boot/Image', kunit_image='arch/arm64/boot/Image.gz',
         console='ttyAMA0', machine=('-machine', 'virt,gic-version=3'),
         numa_machine=('-machine', 'virt,gic-version=3,its=on', '-cpu', 'cortex-a57')),
    Arch(name='x86_64', qemu='x86_64', qemu_package='qemu-system-x86',
         hosts=('x86_64', 'amd64'), cross='x86_64-linux-gnu-',
         cross_package='gcc-x86-64-linux-gnu', debian='amd64',
         image='arch/x86/boot/bzImage', kunit_image='arch/x86/boot/bzImage',
         console='ttyS0', machine=('-machine', 'pc'),
         numa_machine=('-machine', 'pc', '-cpu', 'max')),
)}


def get(name: str) -> Arch:
    try:
        return ARCHES[name]
    except KeyError:
        raise ArchError(f'ARCH={name} is not supported; use one of '
                        f'{", ".join(ARCHES)}') from None


def host() -> Arch | None:
    m = platform.machine()
    return next((a for a in ARCHES.values() if m in a.hosts), None)
