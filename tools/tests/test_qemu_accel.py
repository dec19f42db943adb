# SPDX-License-Identifier: GPL-2.0
"""tools/qemu-accel: kunit.py exec runs QEMU with the accelerator the package chose.

7.x's kunit.py puts "-accel kvm -accel hvf -accel tcg" before the QEMU
config's arguments. On a machine whose /dev/kvm opens but cannot run an
x86_64 guest (this one: no VT-x, yet the device), QEMU took KVM and
aborted ("failed to set MSR 0x10a"), so no 7.2 x86_64 KUnit run booted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import unittest
from pathlib import Path

from kloc.kunitpy import runner

QEMU = 'qemu-system-x86_64'
KUNIT_PYS = ['-accel', 'kvm', '-accel', 'hvf', '-accel', 'tcg']


def info_kvm(qemu: str, args: list[str], env: dict[str, str]) -> str:
    """What QEMU's monitor says of KVM, for a machine with no devices."""
    r = subprocess.run([qemu, *args, '-machine', 'none', '-nodefaults', '-display', 'none',
                        '-monitor', 'stdio'], input='info kvm\nquit\n', capture_output=True,
                       text=True, timeout=60, env=env)
    return next((ln.strip() for ln in r.stdout.splitlines() if 'kvm support' in ln),
                r.stdout + r.stderr)


@unittest.skipUnless(shutil.which(QEMU), f'{QEMU} is not installed (make deps)')
class AccelShimTest(unittest.TestCase):
    def test_kunit_pys_accelerators_give_way_to_the_configs(self) -> None:
        env = runner.exec_env(Path('/nonexistent-cache'))
        shim = str(runner.QEMU_ACCEL_SHIM / QEMU)
        self.assertEqual(shutil.which(QEMU, path=env['PATH']), shim)
        # kunit.py's three, then the config's TCG: TCG it is
        self.assertEqual(info_kvm(QEMU, KUNIT_PYS + ['-accel', 'tcg'], env),
                         'kvm support: disabled')
        if os.access('/dev/kvm', os.R_OK | os.W_OK):
            # the same arguments straight to QEMU: KVM, which cannot run a guest here
            self.assertEqual(info_kvm(QEMU, KUNIT_PYS + ['-accel', 'tcg'], dict(os.environ)),
                             'kvm support: enabled')

    def test_other_arguments_pass_unchanged(self) -> None:
        env = runner.exec_env(Path('/nonexistent-cache'))
        r = subprocess.run([QEMU, '-accel', 'kvm', '-accel', 'tcg', '--version'],
                           capture_output=True, text=True, timeout=60, env=env)
        direct = subprocess.run([QEMU, '--version'], capture_output=True, text=True, timeout=60)
        # not kunit.py's three in a row: QEMU gets them, and prints its version
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, direct.stdout)


if __name__ == '__main__':
    unittest.main()
