#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The QEMU cpu_index bug of docs/qemu-cpu-index.md, in four boots of one x86_64
# Linux guest with four vCPUs that all run (kloc's x86_64 guests do: their
# kselftest sends on every CPU): cpu-index-check.c (beside this script) under
# the round-robin scheduler (-icount) and under MTTCG, then QEMU's own
# tests/tcg/plugins/bb.c with inline=on, under each.
#
# usage: reproduce.sh QEMU_SYSTEM_X86_64 PLUGIN_DIR BZIMAGE INITRD [OUTDIR]
#   PLUGIN_DIR holds libcpu-index-check.so and libbb.so, each built against that
#   QEMU's qemu-plugin.h:
#   gcc -O2 -shared -fPIC -o libbb.so bb.c -I<dir of qemu-plugin.h> \
#       $(pkg-config --cflags glib-2.0)

set -euo pipefail
if [ $# -lt 4 ]; then
	sed -n '/^# usage/,/^$/p' "$0" >&2
	exit 2
fi
qemu=$1 plugins=$2 kernel=$3 initrd=$4 out=${5:-.}
mkdir -p "$out"

boot() {
	local name=$1 plugin=$2
	shift 2
	local t0=$SECONDS
	timeout 900 "$qemu" -machine pc -cpu max -smp 4 -m 1024 -nographic -nodefaults \
		-serial stdio -no-reboot -kernel "$kernel" -initrd "$initrd" \
		-append 'console=ttyS0 panic=-1 quiet nokaslr' \
		-plugin "$plugin" -d plugin -D "$out/$name.plugin" "$@" \
		>"$out/$name.console" 2>&1 || true
	printf '== %s (%d s): %s\n' "$name" $((SECONDS - t0)) "$*"
	cat "$out/$name.plugin"
	grep -a -E -m 3 'Kernel panic|BUG:|Oops|self-test|alg: |qemu-system|corruption' "$out/$name.console" || true
	tail -n 2 "$out/$name.console"
}

rr=(-accel 'tcg,thread=single' -icount 'shift=0,sleep=off')
mttcg=(-accel 'tcg,thread=multi')
boot rr-index "$plugins/libcpu-index-check.so" "${rr[@]}"
boot mttcg-index "$plugins/libcpu-index-check.so" "${mttcg[@]}"
boot rr-inline "$plugins/libbb.so,inline=on" "${rr[@]}"
boot mttcg-inline "$plugins/libbb.so,inline=on" "${mttcg[@]}"
