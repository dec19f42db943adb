#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the package's kselftests standalone, then install them the stock
# way (make -C tools/testing/selftests TARGETS=... install, as tuxmake,
# KernelCI and LKFT do) and run them from the install through
# run_kselftest.sh -c on this machine's own kernel. Output goes to $OUT.

set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=tools/lib.sh
. tools/lib.sh
OUT=${OUT:-out}
KERNEL=${KERNEL:-$(kloc registry kernels | cut -d" " -f1)}
TARGETS=lo_counters

# kloc's copy of the tree, the series applied (the tree itself is never written)
tree=$(kloc tree --kernel "$KERNEL")
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
done

echo "kselftest: make -C tools/testing/selftests TARGETS=\"$TARGETS\" install" >&2
if ! make -C "$tree/tools/testing/selftests" TARGETS="$TARGETS" O="$out/build" \
	INSTALL_PATH="$out/install" install >"$out/install.log" 2>&1; then
	cat "$out/install.log"
	exit 1
fi
# The test makes its own network namespace (unshare(CLONE_NEWNET)). An ordinary
# user runs it in a user namespace of its own, where that is allowed: no root.
userns=()
if [ "$(id -u)" -ne 0 ]; then
	userns=(unshare --map-root-user)
fi
for t in $TARGETS; do
	echo "kselftest: $t: run_kselftest.sh -c $t on this kernel ($(uname -r))" \
		"${userns[*]:+in a user namespace of its own (${userns[*]})}" >&2
	# Appended to: the runner reopens /dev/stdout (O_APPEND) for the test's output.
	: >"$out/$t.ktap"
	(cd "$out/install" && "${userns[@]}" ./run_kselftest.sh -c "$t") \
		>>"$out/$t.ktap" 2>&1 || fail=1
	cat "$out/$t.ktap"
	grep -Eq "^ok [0-9]+ selftests: $t: [^ ]+( # SKIP)?$" "$out/$t.ktap" || fail=1
	! grep -q "^not ok [0-9]* selftests: $t: " "$out/$t.ktap" || fail=1
done
exit $fail
