#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The lint gates: shellcheck, mypy --strict, flake8 (configured in
# .flake8), checkpatch --strict on every C file and every exported patch,
# and a W=1 + sparse build of the driver with the package installed, for
# each kernel that has a KUnit build dir.

set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=tools/lib.sh
. tools/lib.sh
# checkpatch runs spdxcheck.py with the python3 on PATH: use the one with Debian's packages.
export PATH="/usr/bin:$PATH"
OUT=${OUT:-out}
KERNELS=${KERNELS:-$(kloc registry make-test-kernels)}
fail=0
checkpatch() {
	local tree=$1
	shift
	(cd "$tree" && GIT_DIR=/nonexistent scripts/checkpatch.pl --strict --quiet \
		--no-summary "$@")
}
step() { echo "lint: $*" >&2; }

step "shellcheck"
mapfile -t shells < <(git ls-files '*.sh' .ci/run tools/qemu-accel/qemu-system 2>/dev/null || find . -name '*.sh')
shellcheck "${shells[@]}" || fail=1

step "mypy --strict"
(cd tools && mypy --strict --no-error-summary kloc tests) || fail=1

step "flake8"
flake8 tools || fail=1

step "the counting plugin: -Wall -Wextra -Werror build, and its marker header for x86_64 and arm64"
mkdir -p "$OUT/lint"
if ! make -s -C tools/qemu-plugin O="$(realpath -m "$OUT")/lint/qemu-plugin" \
	>"$OUT/lint/qemu-plugin.log" 2>&1; then
	cat "$OUT/lint/qemu-plugin.log"
	fail=1
fi
for cc in gcc "$(kloc registry cross arm64)gcc"; do
	echo '#include "kloc-marker.h"
int main(void) { kloc_mark_start(1); kloc_mark_end(1); return 0; }' |
		"$cc" -O2 -Wall -Wextra -Werror -Itools/qemu-plugin -x c -c -o /dev/null - || fail=1
done

for k in $KERNELS; do
	# kloc's copy of the tree, the series applied: get_maintainer.pl and the W=1
	# build need the package's files in it.
	tree=$(kloc tree --kernel "$k") || { fail=1; continue; }
	step "checkpatch --strict (Linux $k)"
	out="$OUT/lint/$k"
	rm -rf "$out"
	kloc patches --kernel "$k" --out "$out" >/dev/null
	# checkpatch runs from the tree with no git repository around it: its
	# SPDX helper needs git and is skipped; every other check runs.
	while IFS= read -r -d '' f; do
		checkpatch "$tree" -f "$PWD/$f" || fail=1
	done < <(find kunit selftests tools/qemu-plugin/kloc-marker.h -name '*.[ch]' -print0)
	# The QEMU plugin is user-space C against glib and qemu-plugin.h, not
	# kernel C; what checkpatch asks of the kernel that it cannot follow:
	# CAMELCASE: glib's, inttypes.h's and C11's own names (GHashTable,
	#   PRIx64, _Static_assert);
	# PREFER_DEFINED_ATTRIBUTE_MACRO: the kernel's __aligned()/__printf()
	#   macros do not exist outside it;
	# SPLIT_STRING: its JSON is written with printf formats longer than a
	#   line, split where the JSON has a field boundary.
	# The fake plugin API its model is tested against is the same kind of C.
	for f in kloc-count.c kloc-model.c kloc-count.h tests/fake-qemu.c upstream/cpu-index-check.c; do
		checkpatch "$tree" --ignore CAMELCASE,PREFER_DEFINED_ATTRIBUTE_MACRO,SPLIT_STRING \
			-f "$PWD/tools/qemu-plugin/$f" || fail=1
	done
	# checkpatch asks whether MAINTAINERS needs updating for every new
	# file; answer it: each one must already have a maintainer.
	for p in "$out"/patches/*/*.patch; do
		checkpatch "$tree" --ignore FILE_PATH_CHANGES "$(realpath "$p")" || fail=1
		while read -r f; do
			if ! (cd "$tree" && scripts/get_maintainer.pl --no-git --no-git-fallback \
				--no-rolestats -f "$f" | grep -q .); then
				step "$f has no maintainer in MAINTAINERS"
				fail=1
			fi
		done < <(sed -n 's|^+++ b/\(.*\)|\1|p' "$p" | sort -u)
	done

	build=$(kloc builddir --kernel "$k")
	if [ ! -f "$build/.config" ]; then
		step "no arm64 build of Linux $k yet: run make kunit KERNEL=$k first"
		fail=1
		continue
	fi
	step "W=1 C=2 build of the package's objects (Linux $k, arm64)"
	cross=$(kloc registry cross arm64)
	read -r -a objects <<<"$(kloc registry lint-objects)"
	log="$out/w1.log"
	if ! make -s -C "$tree" O="$build" ARCH=arm64 CROSS_COMPILE="$cross" \
		W=1 C=2 "${objects[@]}" \
		>"$log" 2>&1; then
		cat "$log"
		fail=1
		continue
	fi
	# Every compiler warning counts. sparse also reports on the driver's
	# own code; of those, only the lines this package adds count.
	kloc added-lines --kernel "$k" >"$out/added-lines"
	if grep -E '(warning|error):.*\[-W' "$log"; then
		fail=1
	fi
	if grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error):' "$log" |
		awk -F: 'NR == FNR { ours[$1 ":" $2] = 1; next }
			 ($1 ":" $2) in ours' "$out/added-lines" - | grep .; then
		fail=1
	fi
done

exit $fail
