# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Sourced by the scripts in tools/: the interpreter and the kloc command.
# The caller has cd'd to the package root.

PYTHON=${PYTHON:-/usr/bin/python3}
kloc() { PYTHONPATH="$PWD/tools" "$PYTHON" -m kloc "$@"; }
