# SPDX-License-Identifier: GPL-2.0
"""make lava: LAVA job definitions for the KUnit kernels and the guest kselftest,
run here with lava-run (make test), and their results read back."""
