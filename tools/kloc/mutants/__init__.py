# SPDX-License-Identifier: GPL-2.0
"""make mutants: small breakages of the kernel that the suites must catch."""
