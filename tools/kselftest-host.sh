#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the package's kselftests standalone and in-tree (make -C
# tools/testing/selftests TARGETS=...), and run them in-tree through the
# kselftest runner on this machine's own kernel. Output goes to $OUT.

set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=tools/lib.sh
. tools/lib.sh
OUT=${OUT:-out}
KERNEL=${KERNEL:-$(kloc registry kernels | cut -d" " -f1)}
TARGETS=lo_counters

tree=$(kloc tree --kernel "$KERNEL")
kloc install --kernel "$KERNEL" >/dev/null
out=$(realpath -m "$OUT/kselftest")
rm -rf "$out"
mkdir -p "$out"
fail=0
for t in $TARGETS; do
	echo "kselftest: $t: standalone build" >&2
	make -s -C "selftests/$t" KSFT_DIR="$tree/tools/testing/selftests" \
		CFLAGS="-O2 -Wall -Wextra -Werror" clean all >"$out/$t-standalone.log" 2>&1 ||
		{ cat "$out/$t-standalone.log"; fail=1; }
	make -s -C "selftests/$t" KSFT_DIR="$tree/tools/testing/selftests" clean
	echo "kselftest: $t: in-tree run on this kernel ($(uname -r))" >&2
	make -s -C "$tree/tools/testing/selftests" TARGETS="$t" O="$out/build" \
		run_tests >"$out/$t.ktap" 2>&1 || true
	cat "$out/$t.ktap"
	grep -q "^ok [0-9]* selftests: $t: " "$out/$t.ktap" || fail=1
done
exit $fail
