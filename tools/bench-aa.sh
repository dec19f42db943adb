#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench-aa: REPEATS short A/A reviews (the base kernel against
# itself, loopback only, timed runs alone: COUNTED=0) and the share of
# them that called a significant difference. With sound statistics that
# share stays near or under ALPHA.
# Each review keeps its runs, so an interrupted benchmark resumes.

set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=tools/lib.sh
. tools/lib.sh
OUT=${OUT:-out}
# The defaults of make bench-aa (README's targets table and make help name
# them from here); ALPHA's is kloc's own (tools/kloc/defaults.py).
REPEATS=${REPEATS:-20}
RUNS=${RUNS:-6}
SECONDS_=${AA_SECONDS:-1}
ALPHA=${ALPHA:-$(kloc registry alpha)}
KERNEL=${KERNEL:-}


called=0
for i in $(seq 1 "$REPEATS"); do
	echo "=== A/A review $i of $REPEATS ($RUNS runs a side, ${SECONDS_} s) ===" >&2
	kloc review ${KERNEL:+--kernel "$KERNEL"} ${KDIR:+--kdir "$KDIR"} --aa --tag "$i" --no-kunit \
		--runs "$RUNS" --counted 0 --seconds "$SECONDS_" --alpha "$ALPHA" --out "$OUT/bench-aa" \
		>/dev/null
	verdict=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' \
		"$OUT/bench-aa/review/aa-$i/review.json")
	case "$verdict" in
	no\ significant*|inconclusive*) ;;
	*) called=$((called + 1)) ;;
	esac
	echo "A/A $i: $verdict" >&2
done
echo "bench-aa: $called of $REPEATS A/A reviews called a significant difference" \
	"(alpha $ALPHA, Holm over the 3 primary figures); expected at most $ALPHA x $REPEATS"
