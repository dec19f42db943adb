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
#   tools/lava-lab.sh token    setup's step for the lab's user, its token and lavacli identity
#
# setup prints the URL and the token file, which make compare/review take as
# LAVA_URL= and LAVA_TOKEN_FILE=. Environment: LAVA_LAB_PORT (8042) is where
# the server listens, on 127.0.0.1 only; LAVA_LAB_DEVICES (1) the QEMU devices,
# that is the jobs that run at once. Every step can be run again.
#
# Its files (pid files, logs, the token) are in the cache's folder lava-lab, which
# kloc makes and checks as every kloc command checks the cache (kloc cache-path:
# a folder of yours that nobody else may write); each is a regular file of yours,
# never a symbolic link, created mode 600, never over a file that is there. The lab's
# user may submit jobs and read them, no more (not a superuser); its token goes
# through pipes and files, never on a command line. stop signals only the
# process groups start made: each pid file must name a live process (not 1)
# with the service's command line, leading its own process group, started when
# the pid file says. Each refusal is one line "kloc lava-lab: error: ...", exit 2.

set -euo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=tools/lib.sh
. tools/lib.sh

PORT=${LAVA_LAB_PORT:-8042}
DEVICES=${LAVA_LAB_DEVICES:-1}
STATE=''	# the lab's folder in the cache: check_state sets it
URL=http://127.0.0.1:$PORT
WORKER=kloc-lab
IDENTITY=kloc-lab
LAB_USER=kloc
SERVICES=(gunicorn publisher scheduler worker)
DEVICE_DIR=/etc/lava-server/dispatcher-config/devices
LOGS=/var/log/lava-server

say() { printf 'lava-lab: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
# A refusal: one line naming the problem and the fix; exit 2.
refuse() {
	printf 'kloc lava-lab: error: %s\n' "$*" >&2
	exit 2
}
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

# The lab's folder in the cache, made where missing, and each --file NAME there
# that exists, checked by kloc (tools/kloc/paths.py); its refusal is the lab's.
lab_dir() {
	local out
	out=$(kloc cache-path lava-lab "$@" 2>&1) || refuse "${out#kloc cache-path: error: }"
	printf '%s\n' "$out"
}

# A file of the lab, if it is there: a regular file of yours nobody else may write.
check_file() {
	lab_dir --file "$(basename -- "$1")" >/dev/null	# refuses, and exits, itself
}

# The lab's folder and every file in it, checked before any is used.
check_state() {
	local name files=(--file lava-worker.log --file token)
	for name in "${SERVICES[@]}"; do
		files+=(--file "$name.pid" --file "$name.out")
	done
	STATE=$(lab_dir "${files[@]}") || exit 2
}

# stdin into a new file of the lab, mode 600: never through a link, never over
# a file that appeared meanwhile (noclobber opens it O_CREAT|O_EXCL).
new_file() {
	check_file "$1"
	rm -f -- "$1"
	(
		set -o noclobber
		umask 077
		cat >"$1"
	)
}

# A log of the lab, to append to: mode 600, made if it is not there.
log_file() {
	check_file "$1"
	[ -e "$1" ] || new_file "$1" </dev/null
	chmod 600 -- "$1"
}

# The fields of /proc/PID/stat after the command name (state, ppid, pgrp, session,
# ... starttime is the 20th), on one line; nothing if there is no such process.
stat_fields() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	echo "${stat##*) }"
}

# What the command line of the lab's process of that name holds.
marker() {
	case $1 in
	gunicorn) echo lava_server.wsgi ;;
	publisher) echo 'manage lava-publisher' ;;
	scheduler) echo 'manage lava-scheduler' ;;
	worker) echo "lava-worker --name $WORKER" ;;
	esac
}

# The pid of the lab's service of that name, if it runs; nothing if it never
# started or has ended. The pid file must hold what daemon wrote, "PID START"
# (PID alone from an older setup), PID > 1 and naming a process with the
# service's command line that leads its own process group and started at START;
# anything else is refused, and nothing is signalled.
lab_pid() {
	local name=$1 file=$STATE/$1.pid line pid start extra fields
	local keep="if the lab is not running, remove it (rm $file)"
	check_file "$file"
	[ -e "$file" ] || return 0
	line=$(head -c 200 -- "$file" | head -n 1)
	read -r pid start extra <<<"$line" || true
	case $pid:$start in
	:* | *[!0-9:]* | 0* | *:*:*) pid=0 ;;
	esac
	if [ -n "$extra" ] || [ "${#pid}" -gt 9 ] || [ "$pid" -le 1 ]; then
		refuse "$file holds $(printf %q "$line"), not the pid of the lab's $name: $keep"
	fi
	fields=$(stat_fields "$pid")
	# No such process, or one that has ended (a zombie): the service is not running.
	case $fields in
	'' | 'Z '*) return 0 ;;
	esac
	case $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) in
	*"$(marker "$name")"*) ;;
	*) refuse "$file names process $pid ($(cat "/proc/$pid/comm" 2>/dev/null)), which is not the lab's $name: $keep" ;;
	esac
	# shellcheck disable=SC2086 # the fields, split
	set -- $fields
	[ "${3:-}" = "$pid" ] ||
		refuse "$file names process $pid, which does not lead its own process group as the lab's $name does: $keep"
	[ -z "$start" ] || [ "${20:-}" = "$start" ] ||
		refuse "$file names process $pid, which started after the lab's $name did: $keep"
	echo "$pid"
}

daemon() {
	local name=$1 pid fields
	shift
	pid=$(lab_pid "$name") || exit 2
	[ -z "$pid" ] || return 0
	log_file "$STATE/$name.out"
	# setsid: the service leads a process group of its own, which stop signals.
	setsid "$@" </dev/null >>"$STATE/$name.out" 2>&1 &
	pid=$!
	fields=$(stat_fields "$pid")
	# shellcheck disable=SC2086 # the fields, split
	set -- $fields
	echo "$pid ${20:-}" | new_file "$STATE/$name.pid"
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
	check_state
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
	log_file "$STATE/lava-worker.log"
	daemon worker lava-worker --name "$WORKER" --url "$URL/" --level INFO --ping-interval 5 \
		--log-file "$STATE/lava-worker.log"
	say "running: server $URL, publisher, scheduler, worker $WORKER (logs: $LOGS, $STATE)"
}

stop() {
	local name pid pids=()
	check_state
	# Every pid file is checked before anything is signalled.
	for name in worker scheduler publisher gunicorn; do
		pid=$(lab_pid "$name") || exit 2
		pids+=("$name:$pid")
	done
	for pid in "${pids[@]}"; do
		name=${pid%%:*}
		pid=${pid#*:}
		if [ -n "$pid" ]; then
			# The process group daemon made (setsid): the service and its children.
			kill -TERM -- "-$pid" 2>/dev/null || true
			say "stopped $name ($pid)"
		fi
		rm -f -- "$STATE/$name.pid"
	done
}

# A token file is trusted only as setup makes it: a regular file of yours,
# mode 600, holding one token (lava-server's are 128 letters and digits).
check_token() {
	local file=$1 mode
	check_file "$file"
	mode=$(stat -c %a -- "$file")
	[ "$mode" = 600 ] ||
		refuse "$file has mode $mode, not 600 (others may have read the token): remove it (rm $file) and run setup again"
	if [ "$(wc -l <"$file")" -ne 1 ] || ! grep -qxE '[A-Za-z0-9_-]{32,256}' -- "$file"; then
		refuse "$file does not hold a LAVA token: remove it (rm $file) and run setup again"
	fi
}

# The lab's user submits jobs and reads them: LAVA lets any active user submit
# to a device type and devices that have no permissions set (as setup adds
# them) and read the jobs it submitted, so it is neither superuser nor staff
# (a user an earlier setup made both is demoted). users add prints the random
# password it sets; nobody logs in with it.
lab_user() {
	manage users details "$LAB_USER" >/dev/null 2>&1 ||
		manage users add "$LAB_USER" >/dev/null
	manage users update "$LAB_USER" --not-superuser --not-staff
}

token() {
	local file=$STATE/token
	if [ -e "$file" ] || [ -L "$file" ]; then
		check_token "$file"
	fi
	lab_user
	if [ ! -e "$file" ]; then
		# From lava-server's output into the new file: never on a command line.
		manage tokens add --user "$LAB_USER" --description "kloc: make compare/review" |
			new_file "$file"
	fi
	check_token "$file"
	lavacli_identity "$file"
}

# The lab's identity, kloc-lab, in lavacli's configuration (lavacli reads
# ${XDG_CONFIG_HOME:-~/.config}/lavacli.yaml): a new file, mode 600, renamed
# over the old one, whose other identities it keeps; the token is read from its
# file (lavacli identities add would take it on its command line).
lavacli_identity() {
	"$PYTHON" - "${XDG_CONFIG_HOME:-$HOME/.config}" "$IDENTITY" "$URL/RPC2" "$LAB_USER" "$1" <<'EOF'
import os
import stat
import sys

import yaml

config_dir, identity, uri, user, token_file = sys.argv[1:]
path = os.path.join(config_dir, 'lavacli.yaml')


def refuse(why):
    print(f'kloc lava-lab: error: {why}', file=sys.stderr)
    sys.exit(2)


def trusted(st):
    return st.st_uid in (os.getuid(), 0)


def existing():
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return {}
    if not stat.S_ISREG(st.st_mode) or not trusted(st):
        refuse(f'{path} is not a regular file of yours (a link?): move it away and run setup again')
    with open(path, encoding='utf-8') as f:
        config = yaml.safe_load(f) or {}
    if not isinstance(config, dict):
        refuse(f'{path} is not a mapping of lavacli identities: fix it, or move it away')
    return config


try:
    os.makedirs(config_dir, mode=0o700, exist_ok=True)
    d = os.lstat(config_dir)
    if not stat.S_ISDIR(d.st_mode) or not trusted(d) or d.st_mode & 0o022:
        refuse(f'{config_dir} is not a directory of yours that only you may write: '
               'chmod go-w it, or set XDG_CONFIG_HOME= to one')
    config = existing()
    with open(token_file, encoding='utf-8') as f:
        config[identity] = {'uri': uri, 'username': user, 'token': f.read().strip()}
    tmp = f'{path}.{os.getpid()}.new'
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, 'w', encoding='utf-8') as f:
        f.write(yaml.safe_dump(config, default_flow_style=False))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
except (OSError, yaml.YAMLError) as e:
    refuse(f'cannot write the lavacli identity {identity} into {path}: {e}')
EOF
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
	local name pid server=''
	check_state
	for name in gunicorn publisher scheduler worker; do
		pid=$(lab_pid "$name") || exit 2
		if [ -n "$pid" ]; then
			echo "$name: running ($pid)"
			[ "$name" != gunicorn ] || server=$pid
		else
			echo "$name: stopped"
		fi
	done
	if [ -n "$server" ]; then
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
	check_state
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
token)
	need_root token
	check_state
	token
	;;
*) die "usage: $0 setup|start|stop|status|token (see the head of the script)" ;;
esac
