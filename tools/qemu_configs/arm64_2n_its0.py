# SPDX-License-Identifier: GPL-2.0
# kunit.py --qemu_config for topology arm64_2n_its0 (see tools/kloc/qemu/topology.py).
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from kloc.qemu.topology import kunit_params  # noqa: E402
from ..qemu_config import QemuArchParams  # noqa: E402

QEMU_ARCH = QemuArchParams(**kunit_params('arm64_2n_its0'))
