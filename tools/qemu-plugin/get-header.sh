#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Print the directory that holds qemu-plugin.h of the installed QEMU: the
# header from Debian's qemu source package of exactly the version the
# installed qemu-system-* packages were built from. Fetched once with
# "apt-get source --download-only" into $KLOC_CACHE/qemu-src/<version>/
# (with docs/devel/tcg-plugins.rst, the API reference, and
# contrib/plugins/cache.c, QEMU's own cache model that kloc-count is
# cross-checked against, beside it, Debian's patches applied to both C files);
# every later call only compares versions (and fetches again a folder an
# earlier kloc made without one of those files).
#
# kloc runs as root, so only a header in a cache that is the user's alone is
# used: the cache, qemu-src/, qemu-src/<version>/ and the files in it must be
# real folders and files (not symlinks) owned by the user and writable by no
# one else, and no folder above the cache may let others replace it (writable
# by others without the sticky bit); anything else is refused, with the fix.
#
# Usage: get-header.sh [--add-deb-src]
#   --add-deb-src  as root, when apt knows no qemu source of that version, add
#                  /etc/apt/sources.list.d/kloc-src.sources (deb-src for the
#                  suites of the existing deb entries) and run apt-get update

set -euo pipefail

add_src=0
case "${1:-}" in
--add-deb-src) add_src=1 ;;
"") ;;
*)
	echo "usage: $0 [--add-deb-src]" >&2
	exit 2
	;;
esac

die() {
	echo "get-header.sh: $*" >&2
	exit 1
}

# The source version of the installed qemu-system-* packages; all must agree.
installed=()
version=
for pkg in qemu-system-x86 qemu-system-arm; do
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null) || continue
	[ "${status:0:2}" = ii ] || continue
	read -r src v < <(dpkg-query -W -f='${source:Package} ${source:Version}\n' "$pkg")
	[ "$src" = qemu ] || die "$pkg is built from source package '$src', not Debian's qemu"
	if [ -n "$version" ] && [ "$v" != "$version" ]; then
		die "the installed QEMU packages come from different qemu sources" \
			"(${installed[*]}: $version; $pkg: $v): upgrade them together," \
			"apt-get install qemu-system-x86 qemu-system-arm"
	fi
	version=$v
	installed+=("$pkg")
done
[ -n "$version" ] || die "no qemu-system-x86 or qemu-system-arm package is installed" \
	"(make deps installs them)"

# The cache's folder for it, made and checked as every kloc command checks the
# cache (tools/kloc/paths.py: the user's alone, no symlink, no other writer),
# and its files where they are there.
here=$(cd -- "$(dirname -- "$0")/.." && pwd)
dir=$(PYTHONPATH=$here "${PYTHON:-python3}" -m kloc cache-path qemu-src "${version//:/_}" \
	--file qemu-plugin.h --file source-version --file tcg-plugins.rst --file cache.c 2>&1) ||
	die "${dir##*error: }"
cache=$(dirname -- "$dir")
if [ -f "$dir/qemu-plugin.h" ] && [ -f "$dir/cache.c" ] &&
	[ "$(cat "$dir/source-version" 2>/dev/null)" = "$version" ]; then
	echo "$dir"
	exit 0
fi

known_versions() {
	{ apt-cache showsrc qemu 2>/dev/null || true; } | sed -n 's/^Version: //p' | sort -u
}

# deb-src entries for the suites of the deb entries, in the files' own formats.
add_deb_src() {
	local f out=/etc/apt/sources.list.d/kloc-src.sources
	local list=/etc/apt/sources.list.d/kloc-src.list
	: >"$out.tmp"
	for f in /etc/apt/sources.list.d/*.sources; do
		if [ ! -f "$f" ] || [ "$f" = "$out" ]; then
			continue
		fi
		awk 'BEGIN { RS = ""; ORS = "\n\n" }
		     /(^|\n)Types:[^\n]*(^| )deb( |\n|$)/ && !/(^|\n)Enabled: *no/ {
			sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' \
			"$f" >>"$out.tmp"
	done
	if [ -s "$out.tmp" ]; then
		mv "$out.tmp" "$out"
		echo "get-header.sh: added $out (deb-src for the deb entries' suites)" >&2
	else
		rm -f "$out.tmp"
	fi
	if [ -f /etc/apt/sources.list ] && grep -q '^deb[[:space:]]' /etc/apt/sources.list; then
		sed -n 's/^deb\([[:space:]]\)/deb-src\1/p' /etc/apt/sources.list >"$list"
		echo "get-header.sh: added $list (deb-src for /etc/apt/sources.list)" >&2
	fi
	apt-get update -q >&2
}

if ! known_versions | grep -qxF "$version"; then
	if [ $add_src -eq 1 ] && [ "$(id -u)" -eq 0 ]; then
		add_deb_src
	fi
fi
if ! known_versions | grep -qxF "$version"; then
	others=$(known_versions | tr '\n' ' ')
	if [ -n "$others" ]; then
		die "apt knows the qemu sources ${others% }, but not $version, the one" \
			"the installed ${installed[*]} were built from: run apt-get update, or" \
			"upgrade QEMU (apt-get install ${installed[*]})"
	fi
	die "apt knows no qemu source package, so qemu-plugin.h $version cannot be had." \
		"Add deb-src entries for the suites of your deb entries (see" \
		"/etc/apt/sources.list.d/debian.sources), e.g. a file" \
		"/etc/apt/sources.list.d/kloc-src.sources with the same stanzas and" \
		"'Types: deb-src', then apt-get update. As root, '$0 --add-deb-src'" \
		"(run by make deps) does both."
fi

tmp=$(mktemp -d "$cache/.get-header.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && apt-get source -q --download-only "qemu=$version") >"$tmp/apt.log" 2>&1; then
	die "apt-get source --download-only qemu=$version failed:" \
		"$(tail -n 5 "$tmp/apt.log")"
fi
# The files of exactly this version, by name (Debian's: qemu_UPSTREAM.orig.tar.*,
# qemu_VERSION.debian.tar.*, qemu_VERSION.dsc, VERSION without its epoch).
noepoch=${version#*:}
upstream=${noepoch%-*}
orig='' debian=''
for z in xz gz bz2; do
	if [ -f "$tmp/qemu_$upstream.orig.tar.$z" ]; then orig=$tmp/qemu_$upstream.orig.tar.$z; fi
	if [ -f "$tmp/qemu_$noepoch.debian.tar.$z" ]; then debian=$tmp/qemu_$noepoch.debian.tar.$z; fi
done
dsc=$tmp/qemu_$noepoch.dsc
if [ -z "$orig" ] || [ -z "$debian" ]; then
	die "apt-get source gave no qemu_$upstream.orig.tar.* and qemu_$noepoch.debian.tar.*" \
		"in $tmp"
fi
# Extracted as the user's own files, whoever the tarballs say owns them.
mkdir "$tmp/x"
tar -xf "$orig" --no-same-owner --no-same-permissions -C "$tmp/x" --wildcards \
	--no-anchored 'include/qemu/qemu-plugin.h' 'docs/devel/tcg-plugins.rst' \
	'contrib/plugins/cache.c'
tar -xf "$debian" --no-same-owner --no-same-permissions -C "$tmp/x" debian/patches
tops=()
for d in "$tmp"/x/*/; do
	d=${d%/}
	if [ "$d" != "$tmp/x/debian" ] && [ ! -L "$d" ]; then tops+=("$d"); fi
done
if [ ${#tops[@]} -ne 1 ] || [ ! -f "${tops[0]}/include/qemu/qemu-plugin.h" ] ||
	[ -L "${tops[0]}/include/qemu/qemu-plugin.h" ]; then
	die "$orig has no single top folder with include/qemu/qemu-plugin.h"
fi
top=${tops[0]}
# Debian's patches may change the header or cache.c: then unpack the whole source.
touching=()
if [ -f "$tmp/x/debian/patches/series" ]; then
	while read -r p _; do
		case "$p" in '' | '#'*) continue ;; esac
		if grep -qE '^\+\+\+ ([^/]*/)?(include/qemu/qemu-plugin\.h|contrib/plugins/cache\.c)' \
			"$tmp/x/debian/patches/$p"; then
			touching+=("$p")
		fi
	done <"$tmp/x/debian/patches/series"
fi
if [ ${#touching[@]} -gt 0 ]; then
	echo "get-header.sh: Debian's ${touching[*]} change qemu-plugin.h or cache.c:" \
		"unpacking the source" >&2
	[ -f "$dsc" ] || die "apt-get source gave no $(basename -- "$dsc") in $tmp"
	(cd "$tmp" && dpkg-source -q -x "$dsc" src >/dev/null 2>"$tmp/dpkg-source.log") ||
		die "dpkg-source -x $dsc failed: $(tail -n 5 "$tmp/dpkg-source.log")"
	top=$tmp/src
fi
grep -q '^#define QEMU_PLUGIN_VERSION [0-9]' "$top/include/qemu/qemu-plugin.h" ||
	die "$top/include/qemu/qemu-plugin.h defines no QEMU_PLUGIN_VERSION"
if [ ! -f "$top/contrib/plugins/cache.c" ] || [ -L "$top/contrib/plugins/cache.c" ]; then
	die "the qemu source $version has no regular contrib/plugins/cache.c"
fi
mkdir "$tmp/out"
cp "$top/include/qemu/qemu-plugin.h" "$top/contrib/plugins/cache.c" "$tmp/out/"
[ ! -f "$top/docs/devel/tcg-plugins.rst" ] || cp "$top/docs/devel/tcg-plugins.rst" "$tmp/out/"
echo "$version" >"$tmp/out/source-version"
rm -rf "$dir.old"
[ ! -e "$dir" ] || mv "$dir" "$dir.old"
mv "$tmp/out" "$dir"
rm -rf "$dir.old"
echo "get-header.sh: qemu-plugin.h and cache.c of Debian qemu $version in $dir" >&2
echo "$dir"
