# SPDX-License-Identifier: GPL-2.0
"""The architectures: one declaration each, for every build and every boot."""

from __future__ import annotations

import platform
from dataclasses import dataclass

from kloc.errors import KlocError


class ArchError(KlocError):
    """An architecture kloc does not know."""


@dataclass(frozen=True)
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
    Arch('arm64', 'aarch64', 'qemu-system-arm', ('aarch64', 'arm64'), 'aarch64-linux-gnu-',
         'gcc-aarch64-linux-gnu', 'arm64', 'arch/arm64/boot/Image',
         'arch/arm64/boot/Image.gz', 'ttyAMA0', ('-machine', 'virt,gic-version=3'),
         ('-machine', 'virt,gic-version=3,its=on', '-cpu', 'cortex-a57')),
    Arch('x86_64', 'x86_64', 'qemu-system-x86', ('x86_64', 'amd64'), 'x86_64-linux-gnu-',
         'gcc-x86-64-linux-gnu', 'amd64', 'arch/x86/boot/bzImage', 'arch/x86/boot/bzImage',
         'ttyS0', ('-machine', 'pc'), ('-machine', 'pc', '-cpu', 'max')),
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
