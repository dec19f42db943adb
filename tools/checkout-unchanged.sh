#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# What a command leaves in the checkout outside its OUT: every file git does
# not ignore that is new, changed or removed, against a record taken before.
# make test records at its start and checks as its last phase, so that an
# output written through a relative path resolved against another directory
# (tools/, where the Python tests run) is found, not left behind.
#
# Usage, in the checkout: checkout-unchanged.sh record FILE OUT
#                         checkout-unchanged.sh check FILE OUT
# OUT, where the command writes, is left out of both when it is inside.

set -euo pipefail

usage() {
	echo "usage: $0 record|check FILE OUT" >&2
	exit 2
}

[ $# -eq 3 ] || usage
mode=$1 record=$2 out=$3
case $mode in
record|check) ;;
*) usage ;;
esac

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	[ "$mode" = check ] && echo "not a git checkout: nothing to compare"
	exit 0
fi
top=$(git rev-parse --show-toplevel)
spec=(.)
rel=$(realpath -m --relative-to="$top" -- "$out")
case $rel in
..|../*) ;;
.) echo "OUT ($out) is the checkout itself: nothing to compare" >&2; exit 2 ;;
*) spec+=(":(exclude,top,literal)$rel") ;;
esac

state() {
	git -C "$top" status --porcelain=v1 --untracked-files=all -- "${spec[@]}" |
		LC_ALL=C sort
}

case $mode in
record)
	state >"$record"
	;;
check)
	[ -f "$record" ] || {
		echo "no record at $record: run '$0 record' before the command" >&2
		exit 2
	}
	if ! diff=$(diff -- "$record" <(state)); then
		echo "the checkout $top changed outside OUT ($out) since the record:"
		printf '%s\n' "$diff" | sed -n 's/^> /  now:    /p; s/^< /  before: /p' |
			awk 'NR <= 20 { print } END { if (NR > 20) print "  ... and " NR - 20 " more" }'
		echo "a command wrote where it should not (a relative path resolved in another directory?)"
		exit 1
	fi
	echo "the checkout $top: nothing new, changed or removed outside OUT"
	;;
esac
