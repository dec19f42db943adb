#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench-aa: A/A' reviews at make review's defaults, loopback only, and
# how often their verdict called a change. Reviews 1 to REPEATS are of
# layout-only patches ("kloc layout-patch": a function and two arrays
# nothing uses, added at a place that rotates over five files the guest
# builds), which change where code and data sit and nothing else: the false
# alarm a seeded comparison can still raise. Then two sanity checks, equal by
# construction: one image on both sides (AA=1) and a comment-only patch. The
# verdict is the counted one (COUNTED boots a side under the plugin). The
# findings (each review's verdict and raw p, Welch's and paired, the sides'
# correlation over the seeds, the count of calls, the bias checks) come from
# "kloc aa-report" (tools/kloc/bench/aa.py), printed and written to
# $OUT/bench-aa/report.txt. COUNTED=0 measures the timed verdict instead.
#
# The first review runs alone (it checks the base and stores its counted
# boots, which the others reuse); then STREAMS at a time, each booting
# nproc / STREAMS counted boots at once (JOBS): a counted boot runs on one
# host thread and counts the same however busy the host is. Each review
# keeps its runs, so an interrupted benchmark resumes.

set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=tools/lib.sh
. tools/lib.sh
OUT=${OUT:-out}
# The defaults of make bench-aa (README's targets table and make help name
# them from here); ALPHA's and COUNTED's are make review's (defaults.py).
# REPEATS layout-only reviews; two sanity checks follow
REPEATS=${REPEATS:-8}
RUNS=${RUNS:-5}
SECONDS_=${AA_SECONDS:-1}
ALPHA=${ALPHA:-$(kloc registry alpha)}
COUNTED=${COUNTED:-$(kloc registry review-counted)}
STREAMS=${STREAMS:-$(nproc)}
KERNEL=${KERNEL:-}
NOOP=selftests/lo_counters/review/noop.patch

if [ "$COUNTED" = 0 ]; then
	STREAMS=1   # the timed verdict: one boot at a time
fi
# Each review boots its counted boots JOBS at once: streams x jobs <= nproc.
JOBS=$(($(nproc) / STREAMS))
[ "$JOBS" -ge 1 ] || JOBS=1
root="$OUT/bench-aa"
mkdir -p "$root"

total=$((REPEATS + 2))

review() {
	local i=$1 what kind patch
	if [ "$i" -le "$REPEATS" ]; then
		if ! patch=$(kloc layout-patch ${KERNEL:+--kernel "$KERNEL"} \
			${KDIR:+--kdir "$KDIR"} --out "$OUT" $((i - 1))); then
			echo "review $i: FAILED: no layout-only patch $((i - 1)) (above)" >&2
			return 1
		fi
		what=(--patch "$patch")
		kind="layout-only patch $((i - 1))"
	elif [ "$i" = $((REPEATS + 1)) ]; then
		what=(--aa --tag "$i")
		kind="one image, AA=1"
	else
		what=(--patch "$NOOP")
		kind="comment-only patch"
	fi
	echo "=== review $i of $total ($kind; $COUNTED counted boots a side): log in" \
		"$root/$i.log ===" >&2
	if kloc review ${KERNEL:+--kernel "$KERNEL"} ${KDIR:+--kdir "$KDIR"} "${what[@]}" \
		--no-kunit --runs "$RUNS" --counted "$COUNTED" --seconds "$SECONDS_" \
		--alpha "$ALPHA" --jobs "$JOBS" --out "$root/$i" >"$root/$i.log" 2>&1; then
		echo "review $i: $("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["verdict"])' \
			"$root/$i"/review/*/review.json)" >&2
	else
		echo "review $i: FAILED; the end of $root/$i.log:" >&2
		tail -n 5 "$root/$i.log" >&2
		return 1
	fi
}

failed=0
for i in $(seq 1 "$total"); do
	if [ "$i" -le 1 ] || [ "$STREAMS" -le 1 ]; then
		review "$i" || failed=$((failed + 1))
		continue
	fi
	while [ "$(jobs -rp | wc -l)" -ge "$STREAMS" ]; do
		wait -n || failed=$((failed + 1))
	done
	review "$i" &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do
	wait -n || failed=$((failed + 1))
done
kloc aa-report --out "$OUT" --alpha "$ALPHA"
if [ "$failed" -gt 0 ]; then
	echo "bench-aa: $failed of $total reviews failed (their logs in $root);" \
		"make bench-aa again resumes them" >&2
	exit 1
fi
