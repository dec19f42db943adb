#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench-aa: REPEATS A/A reviews at make review's defaults, loopback
# only, and how often their verdict called a significant difference. The
# verdict is the counted one (COUNTED boots a side under the plugin decide
# it): odd reviews run one image on both sides (AA=1), even ones a
# comment-only patch (two builds, as a real review has). The findings
# (each review's raw p, the count of calls, the bias checks) come from
# "kloc aa-report" (tools/kloc/bench/aa.py), printed and written to
# $OUT/bench-aa/report.txt. COUNTED=0 measures the timed verdict instead.
#
# Reviews run STREAMS at a time once the first two have built both
# kernels, each booting nproc / STREAMS counted boots at once (JOBS): a
# counted boot runs on one host thread and counts the same however busy the
# host is; the timed runs (shown, not judged, where counted boots are) then
# run slower. Each review
# keeps its runs, so an interrupted benchmark resumes.

set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=tools/lib.sh
. tools/lib.sh
OUT=${OUT:-out}
# The defaults of make bench-aa (README's targets table and make help name
# them from here); ALPHA's and COUNTED's are make review's (defaults.py).
REPEATS=${REPEATS:-20}
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

review() {
	local i=$1 what=(--aa --tag "$1")
	if [ $((i % 2)) = 0 ]; then
		what=(--patch "$NOOP")
	fi
	echo "=== A/A review $i of $REPEATS (${what[0]#--}; $RUNS timed runs and $COUNTED" \
		"counted boots a side): log in $root/$i.log ===" >&2
	if kloc review ${KERNEL:+--kernel "$KERNEL"} ${KDIR:+--kdir "$KDIR"} "${what[@]}" \
		--no-kunit --runs "$RUNS" --counted "$COUNTED" --seconds "$SECONDS_" \
		--alpha "$ALPHA" --jobs "$JOBS" --out "$root/$i" >"$root/$i.log" 2>&1; then
		echo "A/A $i: $("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["verdict"])' \
			"$root/$i"/review/*/review.json)" >&2
	else
		echo "A/A $i: FAILED; the end of $root/$i.log:" >&2
		tail -n 5 "$root/$i.log" >&2
		return 1
	fi
}

failed=0
for i in $(seq 1 "$REPEATS"); do
	if [ "$i" -le 2 ] || [ "$STREAMS" -le 1 ]; then
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
	echo "bench-aa: $failed of $REPEATS reviews failed (their logs in $root);" \
		"make bench-aa again resumes them" >&2
	exit 1
fi
