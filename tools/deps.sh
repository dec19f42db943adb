#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Check that everything kloc needs is installed. As root on Debian, install
# what is missing with apt-get; otherwise print the list and the command,
# and fail before anything else runs.
#
# Usage: tools/deps.sh [--check-only]

set -euo pipefail
# shellcheck source=tools/lib.sh
. "$(dirname "$0")/lib.sh"

# Debian package, then the file or command that shows it is installed.
DEPS=(
	"make make"
	"gcc gcc"
	"git git"
	"patch patch"
	"xz-utils xz"
	"perl perl"
	"python3 /usr/bin/python3"
	"libc6-dev-arm64-cross /usr/aarch64-linux-gnu/lib/libc.a"
	"flex flex"
	"bison bison"
	"bc bc"
	"libelf-dev /usr/include/libelf.h"
	"libssl-dev /usr/include/openssl/ssl.h"
	"device-tree-compiler fdtput"
	"busybox-static /bin/busybox"
	"cpio cpio"
	"rsync rsync"
	"ccache ccache"
	"sparse sparse"
	"shellcheck shellcheck"
	"mypy /usr/bin/mypy"
	"flake8 /usr/bin/flake8"
	"python3-ply /usr/lib/python3/dist-packages/ply"
	"python3-git /usr/lib/python3/dist-packages/git"
	"python3-scipy /usr/lib/python3/dist-packages/scipy"
	"python3-hypothesis /usr/lib/python3/dist-packages/hypothesis"
	"libglib2.0-dev /usr/include/glib-2.0/glib.h"
	"pkg-config pkg-config"
	# tests/test_plot.py renders the review and compare plots to PNG with it
	"librsvg2-bin rsvg-convert"
	# tests render report.html in a real browser, headless (--dump-dom, --screenshot)
	"chromium chromium"
	"dpkg-dev dpkg-source"
	# lava-run (make lava RUN=1, make test); it brings python3-yaml and python3-jinja2,
	# which make lava uses to write the jobs and render the device.
	"lava-dispatcher /usr/bin/lava-run"
)

# The kernels' linux-source packages, the arches' QEMU and cross compilers: kloc
# says them (trees/kernels.py, qemu/arches.py), once python3 is here. Without it
# they are missing too; the install below runs this script again for them.
registry=()
if [ -x "$PYTHON" ]; then
	if ! mapfile -t registry < <(PYTHONPATH="$(dirname "$0")" "$PYTHON" -m kloc registry deps) ||
		[ ${#registry[@]} -eq 0 ]; then
		echo "kloc: $PYTHON -m kloc registry deps failed (above): the kernels' and" \
			"arches' packages are not checked" >&2
		exit 1
	fi
	DEPS+=("${registry[@]}")
fi

# Extra "package probe" pairs, separated by ';', e.g. from a CI image.
IFS=';' read -r -a extra <<<"${KLOC_DEPS_EXTRA:-}"
for entry in "${extra[@]}"; do
	[ -n "$entry" ] && DEPS+=("$entry")
done

present() {
	case "$1" in
	/*) [ -e "$1" ] ;;
	*) command -v "$1" >/dev/null 2>&1 ;;
	esac
}

# arm64 guests take Debian's arm64 busybox-static (apt-get download), which
# needs arm64 in dpkg's foreign architectures.
foreign_arm64() {
	[ "$(dpkg --print-architecture 2>/dev/null)" = arm64 ] ||
		dpkg --print-foreign-architectures 2>/dev/null | grep -qx arm64
}
if command -v dpkg >/dev/null && ! foreign_arm64; then
	if [ "${1:-}" != "--check-only" ] && [ "$(id -u)" -eq 0 ]; then
		echo "kloc: adding arm64 to dpkg's architectures (for arm64 guests' busybox)" >&2
		dpkg --add-architecture arm64
		apt-get update -q >&2
	else
		echo "kloc: note: arm64 guests need, as root:" \
			"dpkg --add-architecture arm64 && apt-get update" >&2
	fi
fi

missing=()
for entry in "${DEPS[@]}"; do
	read -r pkg probe <<<"$entry"
	present "$probe" || missing+=("$pkg")
done

# The counting plugin builds against the qemu-plugin.h of the QEMU it runs
# on; QEMU 10.0's comes with it, the installed QEMU's (KLOC_SYSTEM_QEMU=1, and
# the tests of the plugin on QEMU 7.2's API) is fetched here, as any user
# (tools/kloc/qemu/system.py: no deb-src entry, /etc/apt untouched).
plugin_header() {
	[ "${1:-}" != --check-only ] || return 0
	KLOC_SYSTEM_QEMU=1 PYTHONPATH="$(dirname "$0")" "${PYTHON:-python3}" -m kloc \
		qemu-header >/dev/null ||
		echo "kloc: note: the installed QEMU's qemu-plugin.h could not be fetched" \
			"(above); runs on QEMU 10.0 do not need it" >&2
}

# QEMU 10.0 from Debian's bookworm-backports, into the cache, not installed
# (tools/kloc/qemu/release.py). Where it cannot be had, kloc runs on the
# system's QEMU and refuses what needs 10.0: one line says so, deps goes on.
qemu_release() {
	[ "${1:-}" != --check-only ] || return 0
	[ "${KLOC_SYSTEM_QEMU:-}" != 1 ] || return 0
	PYTHONPATH="$(dirname "$0")" "${PYTHON:-python3}" -m kloc qemu >/dev/null ||
		echo "kloc: note: QEMU 10.0 could not be fetched (above); the system's QEMU" \
			"runs, and counted boots of Linux 6.1 are refused" >&2
}

# make test, run as root, runs its tool tests as an ordinary user (tools/make-test.sh).
test_user() {
	[ "${1:-}" != --check-only ] && [ "$(id -u)" -eq 0 ] || return 0
	id -u "$KLOC_TEST_USER" >/dev/null 2>&1 && return 0
	echo "kloc: adding the user $KLOC_TEST_USER, who runs make test's tool tests" >&2
	useradd --system --create-home --home-dir "/var/lib/$KLOC_TEST_USER" \
		--shell /usr/sbin/nologin "$KLOC_TEST_USER"
}

if [ ${#missing[@]} -eq 0 ]; then
	plugin_header "${1:-}"
	qemu_release "${1:-}"
	test_user "${1:-}"
	exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "${1:-}" = "--check-only" ] || [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
	echo "kloc: missing: ${missing[*]}" >&2
	if command -v apt-get >/dev/null; then
		echo "kloc: install them as root with:" >&2
		echo "  apt-get update && $cmd" >&2
	else
		echo "kloc: this is not a Debian system; install the equivalents of these" >&2
		echo "  Debian packages with your package manager" >&2
	fi
	exit 1
fi

echo "kloc: installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
if [ ${#registry[@]} -eq 0 ] && [ -z "${KLOC_DEPS_AGAIN:-}" ]; then
	# python3 is here now: the registries' packages, in a second pass
	KLOC_DEPS_AGAIN=1 exec "$0" "$@"
fi
plugin_header "${1:-}"
qemu_release "${1:-}"
test_user "${1:-}"
