#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A LAVA lab on this machine, for make compare / make review LAVA_URL=...:
# Debian's lava-server (PostgreSQL, gunicorn, the scheduler), a lava-worker
# beside it, and QEMU devices that take the package's jobs (docs/lava.md).
# Needs root: it installs packages and runs the services.
#
#   tools/lava-lab.sh setup    install what is missing, set the lab up, start it
#   tools/lava-lab.sh start    start the services of a lab set up before
#   tools/lava-lab.sh stop     stop them
#   tools/lava-lab.sh status   the services and the devices
#
# setup prints the URL and the token file, which make compare/review take as
# LAVA_URL= and LAVA_TOKEN_FILE=. Environment: LAVA_LAB_PORT (8042) is where
# the server listens, on 127.0.0.1 only; LAVA_LAB_DEVICES (1) the QEMU devices,
# that is the jobs that run at once. Every step can be run again.

set -euo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tools/lib.sh
. tools/lib.sh

PORT=${LAVA_LAB_PORT:-8042}
DEVICES=${LAVA_LAB_DEVICES:-1}
CACHE=${KLOC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kloc}
STATE=$CACHE/lava-lab
URL=http://127.0.0.1:$PORT
WORKER=kloc-lab
LAB_USER=kloc
DEVICE_DIR=/etc/lava-server/dispatcher-config/devices
LOGS=/var/log/lava-server

say() { printf 'lava-lab: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
manage() { lava-server manage "$@"; }

need_root() {
	[ "$(id -u)" -eq 0 ] || die "needs root (it installs lava-server and runs its services): sudo $0 $*"
}

check_number() {
	case $2 in
	'' | *[!0-9]*) die "$1=$2 is not a number" ;;
	esac
}

install_packages() {
	local missing=() p
	for p in postgresql lava-server lavacli lava-dispatcher; do
		dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return
	say "installing ${missing[*]} from Debian (apt-get, no recommends: no apache2)"
	export DEBIAN_FRONTEND=noninteractive
	# PostgreSQL first and running: lava-server's postinst makes its database then.
	apt-get install -y --no-install-recommends postgresql >&2
	start_postgres
	apt-get install -y --no-install-recommends lava-server lavacli lava-dispatcher >&2
}

start_postgres() {
	local ver
	pg_isready -q && return
	ver=$(pg_lsclusters -h | awk 'NR == 1 { print $1 }')
	[ -n "$ver" ] || die "PostgreSQL has no cluster (pg_lsclusters): pg_createcluster <version> main"
	say "starting PostgreSQL $ver"
	pg_ctlcluster "$ver" main start
	pg_isready -q -t 30 || die "PostgreSQL did not start: see /var/log/postgresql/"
}

database() {
	# lava-server's postinst skips the database when PostgreSQL was down.
	if ! su postgres -c "psql -tAc \"SELECT 1 FROM pg_database WHERE datname = 'lavaserver'\"" |
		grep -q 1; then
		say "creating lava-server's database (its postinst.py)"
		python3 /usr/share/lava-server/postinst.py >&2
	fi
}

running() { [ -f "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

daemon() {
	local name=$1
	shift
	running "$name" && return
	setsid "$@" </dev/null >>"$STATE/$name.out" 2>&1 &
	echo $! >"$STATE/$name.pid"
}

wait_server() {
	local i
	for i in $(seq 60); do
		if curl -fsS -o /dev/null "$URL/api/v0.2/system/version/"; then
			return
		fi
		sleep 1
	done
	die "the server did not answer at $URL after 60 s: see $LOGS/gunicorn.log and $STATE/gunicorn.out"
}

start() {
	mkdir -p "$STATE"
	start_postgres
	# gunicorn as lava-server's unit runs it, on loopback only.
	daemon gunicorn gunicorn3 lava_server.wsgi --log-level INFO --log-file "$LOGS/gunicorn.log" \
		-u lavaserver -g lavaserver --worker-class eventlet --workers 2 --bind "127.0.0.1:$PORT"
	wait_server
	# The publisher's events wake the scheduler when a job is submitted or ends
	# (without them it looks every 20 s).
	daemon publisher lava-server manage lava-publisher --level INFO \
		--log-file "$LOGS/lava-publisher.log"
	daemon scheduler lava-server manage lava-scheduler --level INFO \
		--log-file "$LOGS/lava-scheduler.log"
	daemon worker lava-worker --name "$WORKER" --url "$URL/" --level INFO --ping-interval 5 \
		--log-file "$STATE/lava-worker.log"
	say "running: server $URL, publisher, scheduler, worker $WORKER (logs: $LOGS, $STATE)"
}

stop() {
	local name pid
	for name in worker scheduler publisher gunicorn; do
		if running "$name"; then
			pid=$(cat "$STATE/$name.pid")
			kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
			say "stopped $name ($pid)"
		fi
		rm -f "$STATE/$name.pid"
	done
}

token() {
	local file=$STATE/token
	if [ -s "$file" ]; then
		return
	fi
	manage users details "$LAB_USER" >/dev/null 2>&1 ||
		manage users add "$LAB_USER" --superuser --staff >/dev/null
	(umask 077 && manage tokens add --user "$LAB_USER" --description "kloc: make compare/review" >"$file")
	[ -s "$file" ] || die "lava-server gave no token for $LAB_USER"
	lavacli identities add --uri "$URL/RPC2" --username "$LAB_USER" \
		--token "$(cat "$file")" kloc-lab >/dev/null
}

devices() {
	local i name
	manage device-types details qemu >/dev/null 2>&1 || manage device-types add qemu
	# The worker registers itself when it first connects (from 127.0.0.1).
	for i in $(seq 30); do
		manage workers details "$WORKER" >/dev/null 2>&1 && break
		sleep 1
	done
	manage workers details "$WORKER" >/dev/null 2>&1 ||
		die "worker $WORKER did not register: see $STATE/lava-worker.log"
	for i in $(seq "$DEVICES"); do
		name=$(printf 'qemu-kloc%02d' "$i")
		kloc registry lava-dictionary >"$DEVICE_DIR/$name.jinja2"
		chown lavaserver:lavaserver "$DEVICE_DIR/$name.jinja2"
		manage devices details "$name" >/dev/null 2>&1 ||
			manage devices add --device-type qemu --worker "$WORKER" "$name"
		# No health check is defined for qemu: the device is good as it is.
		manage devices update --health GOOD "$name"
	done
}

status() {
	local name
	for name in gunicorn publisher scheduler worker; do
		if running "$name"; then
			echo "$name: running ($(cat "$STATE/$name.pid"))"
		else
			echo "$name: stopped"
		fi
	done
	if running gunicorn; then
		manage devices list
	fi
	[ -s "$STATE/token" ] && echo "LAVA_URL=$URL LAVA_TOKEN_FILE=$STATE/token"
	return 0
}

check_number LAVA_LAB_PORT "$PORT"
check_number LAVA_LAB_DEVICES "$DEVICES"
case ${1:-} in
setup)
	need_root setup
	t0=$(date +%s)
	install_packages
	start_postgres
	database
	start
	token
	devices
	say "set up in $(($(date +%s) - t0)) s"
	echo "LAVA_URL=$URL LAVA_TOKEN_FILE=$STATE/token"
	;;
start) need_root start && start ;;
stop) need_root stop && stop ;;
status) status ;;
*) die "usage: $0 setup|start|stop|status (see the head of the script)" ;;
esac
