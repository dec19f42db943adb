# SPDX-License-Identifier: GPL-2.0
"""kloc: install, build and run the kernel locality tests."""
