#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make test: the tool tests, KUnit on the default kernel (KERNELS="7.2 6.12 6.1":
# on each of those; tools/kloc/trees/kernels.py) on the topologies of
# Kernel.make_test_arches (the arm64 ones), each of their known upstream
# failures against its fix, the default kernel's x86_64 guest and the
# counting plugin on it, the MSI workload in its arm64 guest, its LAVA jobs run
# with lava-run and compared with those runs, the mutants on it, and the lint
# gates. Prints each phase with its elapsed time; runs every phase even when one
# fails, and exits non-zero if any did.

set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

# shellcheck source=tools/lib.sh
. tools/lib.sh
# Absolute: phases run the Python tests from tools/, where a relative OUT would
# name tools/out (the KDIR proof's output went there until this was absolute).
OUT=$(realpath -m -- "${OUT:-out}/test") || exit 1
JOBS=${JOBS:-$(nproc)}
TIMEOUT=${TIMEOUT:-300}
export OUT
start=$(date +%s)
passed=0
failed=0
failures=()


phase() {
	local name=$1 t0 rc
	shift
	t0=$(date +%s)
	printf '\n=== make test: %s (at %ds) ===\n' "$name" $((t0 - start))
	"$@"
	rc=$?
	# one JSON line a phase, for report.html (kloc html-report)
	printf '{"name": "%s", "ok": %s, "exit": %d, "seconds": %d}\n' \
		"$(printf '%s' "$name" | sed 's/[\\"]/\\&/g')" \
		"$([ $rc -eq 0 ] && echo true || echo false)" $rc $(($(date +%s) - t0)) \
		>>"$OUT/phases.jsonl"
	if [ $rc -eq 0 ]; then
		passed=$((passed + 1))
		printf '=== %s: ok in %ds ===\n' "$name" $(($(date +%s) - t0))
	else
		failed=$((failed + 1))
		failures+=("$name")
		printf '=== %s: FAILED (exit %d) in %ds ===\n' "$name" $rc $(($(date +%s) - t0))
	fi
}

# the kernels first: a bad KERNELS= is refused before anything runs or is removed
kernels=${KERNELS:-$(kloc registry make-test-kernels)} || exit 1
all=$(kloc registry kernels) || exit 1
for k in $kernels; do
	case " $all " in
	*" $k "*) ;;
	*) echo "make test: KERNELS has '$k', not a kernel kloc knows ($all)" >&2
	   echo "make test: give some of them, e.g. KERNELS=\"7.2 6.12 6.1\"" >&2
	   exit 2 ;;
	esac
done
export KERNELS=$kernels
default=$(kloc registry default) || exit 1
rm -rf "$OUT"
mkdir -p "$OUT"
# What the checkout holds outside OUT now; the last phase finds anything new.
tools/checkout-unchanged.sh record "$OUT/checkout.before" "$OUT" || exit 1
# The default kernel's two guests build in the background from here, the x86_64 one
# and then the arm64 one, their make at nice 19 (KLOC_BUILD_NICE; their boots at the
# usual priority), beside every phase until the first that needs each: they take the
# CPU that the tool tests (two workers that mostly wait on their subprocesses and
# QEMU), the KDIR proof's git work and the KUnit and mutants' boots leave idle, and
# little from the builds in front of them. The x86_64 one first: the mutants build
# their own from its objects (ccache). The phases that need neither guest run first,
# then those that need the arm64 one, then those that need the x86_64 one. The tests
# that use root's copy of the tree meanwhile find it fresh and share it
# (trees/workcopy.py), and those with time limits get the CPU first. Each guest's
# phase shows its output.
guests_from=$(($(date +%s) - start))
x86_log=$OUT/x86_64-guest.log
x86_rc=$OUT/x86_64-guest.rc
arm64_log=$OUT/arm64-guest.log
rm -f "$x86_rc"
(export KLOC_BUILD_NICE=19
kloc guest --kernel "$default" --out "$OUT" >"$x86_log" 2>&1
echo $? >"$x86_rc"
kloc guest --kernel "$default" --arch arm64 --out "$OUT" >"$arm64_log" 2>&1) &
guests_pid=$!
# The tool tests in $JOBS workers (tools/tests/run.py): the review's and the stock
# kselftest's take minutes each, side by side.
# Those that boot a guest under the counting plugin wait for the guest phase below.
# Nothing but make deps needs root: run by root, make test runs them as an ordinary
# user ($KLOC_TEST_USER, made by tools/deps.sh), in a copy of this checkout (what
# git lists, and .git: a test builds the plugin as it was), with a cache of its own;
# then, as root, the units in which a test was skipped for needing root (mounts,
# files of other users, lava-lab.sh's services).
tool_tests() {
	local home stage rc=0
	if [ "$(id -u)" -ne 0 ]; then
		(cd tools && KLOC_GUEST_TESTS=later "$PYTHON" -m tests.run --jobs "$JOBS")
		return
	fi
	if ! home=$(getent passwd "$KLOC_TEST_USER" | cut -d: -f6) || [ -z "$home" ]; then
		echo "make test: no user $KLOC_TEST_USER to run the tool tests as, not as root:" \
			"run tools/deps.sh as root (it adds the user), or set KLOC_TEST_USER" >&2
		return 1
	fi
	stage=$(mktemp -d /tmp/kloc-tool-tests.XXXXXX) || return
	git ls-files -co --exclude-standard -z | rsync -a --from0 --files-from=- . "$stage/" &&
		rsync -a .git "$stage/" && chown -R "$KLOC_TEST_USER:" "$stage" || rc=1
	if [ $rc -eq 0 ]; then
		echo "tool tests as $KLOC_TEST_USER in $stage (cache: $home/.cache/kloc)"
		# QEMU 10.0 into that cache first, as make deps puts it into root's
		# shellcheck disable=SC2016 # expanded by the inner bash
		runuser -u "$KLOC_TEST_USER" -- env -i HOME="$home" PATH=/usr/bin:/bin:/usr/sbin:/sbin \
			LANG=C.UTF-8 KLOC_GUEST_TESTS=later TIMEOUT="$TIMEOUT" \
			${KLOC_SYSTEM_QEMU:+KLOC_SYSTEM_QEMU="$KLOC_SYSTEM_QEMU"} \
			bash -c 'cd "$1/tools" && { [ "${KLOC_SYSTEM_QEMU:-}" = 1 ] ||
				"$2" -m kloc qemu >/dev/null; } &&
				"$2" -m tests.run --jobs "$3" --root-units "$1/root-units"' \
			tool-tests "$stage" "$PYTHON" "$JOBS" || rc=$?
	fi
	if [ -f "$stage/root-units" ] && [ ! -L "$stage/root-units" ]; then
		echo "the units that skipped tests for not being root, as root:"
		(cd tools && KLOC_GUEST_TESTS=later "$PYTHON" -m tests.run --jobs "$JOBS" \
			--units "$stage/root-units") || rc=1
	elif [ $rc -eq 0 ]; then
		echo "make test: the tool tests as $KLOC_TEST_USER left no list of root units" >&2
		rc=1
	fi
	rm -rf "$stage"
	return $rc
}
phase "tool tests" tool_tests
# The x86_64 guest's build and boot, from the background job: done once its exit
# status is in $x86_rc (or the job has ended without writing it).
x86_guest() {
	local rc
	while [ ! -s "$x86_rc" ] && kill -0 "$guests_pid" 2>/dev/null; do
		sleep 2
	done
	cat "$x86_log"
	rc=$(cat "$x86_rc" 2>/dev/null) || rc=1
	return "${rc:-1}"
}
# The arm64 guest's: the end of the background job.
arm64_guest() {
	local rc=0
	wait "$guests_pid" || rc=$?
	cat "$arm64_log"
	return $rc
}
for k in $kernels; do
	topologies=$(kloc registry make-test-topologies "$k") || exit 1
	# A known upstream failure (tools/kloc/kunitpy/known.py) must still fail on the
	# stock kernel, and nothing else may: the report says which.
	phase "kunit on Linux $k ($topologies)" kloc kunit --kernel "$k" --out "$OUT" \
		--jobs "$JOBS" --timeout "$TIMEOUT" --topologies "$topologies"
	if [ -n "$(kloc registry known-failures "$k")" ]; then
		phase "known upstream failures of Linux $k: stock fails, fixed passes" \
			kloc known-failures --kernel "$k" --out "$OUT" --jobs "$JOBS" \
			--timeout "$TIMEOUT"
	fi
done
# No command writes KDIR (tests/test_kdir_untouched.py): a 6.12 git tree with a
# NUMA-unaware table allocation left uncommitted, make kunit KDIR= on it killed during
# the copy, the series' writes and the build, then to the end (the guard fails) and
# on the reverted tree (it passes): every file of the tree, .git/ included, as before.
kdir_proof() {
	(cd tools && KLOC_KDIR_PROOF_OUT="$OUT/kdir-proof" "$PYTHON" -m \
		unittest -v tests.test_kdir_untouched)
}
phase "make kunit KDIR= writes nothing of the tree, killed or not (Linux $default)" \
	kdir_proof
# Before the guests' phases: these need neither, and their boots leave a core to
# their builds.
phase "kselftest on this machine's kernel" env OUT="$OUT" PYTHON="$PYTHON" \
	tools/kselftest-host.sh
phase "mutants on Linux $default" kloc mutants --kernel "$default" --out "$OUT" --jobs "$JOBS"
phase "arm64 guest of Linux $default (built in the background after the x86_64 one)" arm64_guest
# The MSI workload in the default kernel's arm64 guest,
# on arm64_2n_its1 and arm64_2n_its0, QEMU tracing its ITS: every interrupt's
# table reads, exactly, all on the ITS's node (tests/test_its_boot.py).
phase "ITS interrupt path in the arm64 guest of Linux $default" bash -c "cd tools && \
	KLOC_GUEST_TESTS=arm64 '$PYTHON' -m unittest -v tests.test_its_boot"
# The plugin on that arm64 guest, on kloc's QEMU 10: the same patterns, the
# running vCPU checked against TPIDR_EL1, and the 1:3 window.
phase "kloc-count on the arm64 guest of Linux $default" bash -c "cd tools && \
	KLOC_GUEST_TESTS=arm64 '$PYTHON' -m unittest tests.test_counting.BootArm64 \
	tests.test_counting.PlacementArm64"
# A patch as it would be posted (against the stock driver) reviewed as make
# review does: applied to the stock file, the package installed on top, KUnit
# on both sides (BENCH=0: no loopback A/B), and the ITS path (a patch to the
# ITS driver). tests/test_review_its.py (MakeTestReviewProof) reads its
# review.json: every status change PASS -> FAIL, and some; the workload's four
# commands read remotely in every patched boot; no table read per interrupt moved.
review_proof() {
	local patch=kunit/its/mutants/$default/numa-unaware-cmdq.patch
	kloc review --kernel "$default" --patch "$patch" --topologies arm64_2n_its1 \
		--bench 0 --out "$OUT" --jobs "$JOBS" --timeout "$TIMEOUT" || return
	local f json=''
	for f in "$OUT"/review/numa-unaware-cmdq-*/review.json; do	# the newest
		[ "$f" -nt "$json" ] && json=$f
	done
	json=$(realpath -- "${json:-$OUT/review/no-review.json}") || return
	(cd tools && KLOC_REVIEW_JSON="$json" "$PYTHON" -m unittest -v \
		tests.test_review_its.MakeTestReviewProof)
}
phase "review of a stock-based ITS patch on Linux $default: PASS -> FAIL, commands remote" \
	review_proof
# The default kernel's x86_64 guest, built and booted once: the LAVA jobs deploy it
# (on a fresh machine nothing else has built it yet). The phases after it have no
# build beside them: kloc-count's two QEMU threads take both cores, and LAVA's
# check of its jobs' packet rates against direct boots is a timed one.
phase "guest of Linux $default (built in the background from ${guests_from}s)" x86_guest
# The plugin on that guest, on kloc's QEMU 10 (four vCPUs in one thread, as
# counted boots run): the test program's patterns counted, every callback's
# vCPU the running one, checked against the guest's per-CPU base register, and
# a 1:3 window exact, and the loopback kselftest counted alike by two boots of one
# seed (tests/test_counting.py). Beside it, in a process of its own on
# the system's QEMU 7.2 (where its bounds were set: on QEMU 10 cache.c given
# half its ways fell inside the bound in one boot of two, docs/measurements.md),
# its cache against QEMU's contrib/plugins/cache.c: a core's 32 KiB L1, and
# cache.c given half its ways, which must be caught (the 1 MiB default, a third
# boot, runs with the whole of test_crosscheck). Each side boots one QEMU thread
# at a time, and both compare counts of one boot (or one seed), not times: side
# by side they take one core each.
kloc_count_x86() {
	local log=$OUT/kloc-count-crosscheck.log rc=0 pid
	(cd tools && KLOC_GUEST_TESTS=x86_64 KLOC_SYSTEM_QEMU=1 "$PYTHON" -m unittest \
		tests.test_crosscheck.Parts tests.test_crosscheck.L1Cache \
		tests.test_crosscheck.Mismatch) >"$log" 2>&1 &
	pid=$!
	(cd tools && KLOC_GUEST_TESTS=x86_64 "$PYTHON" -m unittest tests.test_counting.BootX86 \
		tests.test_counting.PlacementX86 tests.test_counting.SeededX86) || rc=1
	wait "$pid" || rc=1
	echo "--- beside it, on the system's QEMU 7.2: tests.test_crosscheck ($log)"
	cat "$log"
	return $rc
}
phase "kloc-count on the guest of Linux $default" kloc_count_x86
# make lava's jobs for the default kernel, each validated, and run with lava-run:
# their results against the kunit phase's and against direct guest boots.
phase "LAVA jobs of Linux $default (lava-run)" kloc lava --kernel "$default" \
	--topologies "$(kloc registry make-test-topologies "$default")" --out "$OUT" --run --compare
phase "lint" env OUT="$OUT" PYTHON="$PYTHON" tools/lint.sh
phase "kunit report (every kernel)" kloc report --out "$OUT"
# make test's own report.html (its phases, KUnit, the mutants, the ITS path),
# rendered by headless Chromium; every phase, verdict and figure row of run.json
# must be in the page it shows (tests/test_report_html.py).
html_proof() {
	kloc html-report --out "$OUT" --phases "$OUT/phases.jsonl" \
		--label "Linux $kernels" || return
	(cd tools && KLOC_REPORT_OUT="$OUT" "$PYTHON" -m unittest -v \
		tests.test_report_html.MakeTestReport)
}
phase "report.html in a browser" html_proof
# Last: every phase wrote only under OUT and the caches, nothing into the
# checkout (git status against the record taken at the start).
phase "nothing written into the checkout outside OUT" \
	tools/checkout-unchanged.sh check "$OUT/checkout.before" "$OUT"

printf '\nmake test finished in %ds' $(($(date +%s) - start))
[ $failed -eq 0 ] || printf '; failed: %s' "${failures[*]}"
printf '\nmake test: %d passed, %d failed\n' $passed $failed
[ $failed -eq 0 ]
