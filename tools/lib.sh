# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
#
# Sourced by the scripts in tools/: the interpreter and the kloc command.
# The caller has cd'd to the package root.

PYTHON=${PYTHON:-/usr/bin/python3}
kloc() { PYTHONPATH="$PWD/tools" "$PYTHON" -m kloc "$@"; }
# Who runs make test's tool tests when make test runs as root: an ordinary
# user, with a cache of its own (tools/deps.sh makes it, as root).
KLOC_TEST_USER=${KLOC_TEST_USER:-kloc-tests}
