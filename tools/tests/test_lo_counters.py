# SPDX-License-Identifier: GPL-2.0
"""The lo_counters kselftest itself: bad options, faults, and one short real run.

The selftest is built standalone, with its own Makefile, into a temporary
directory against a cached kernel tree's tools/testing/selftests (skipped
when there is none). A bad option must be refused on one line of stderr
that names the option and its value, with exit 1 (KSFT_FAIL), before any
measurement: fast, and with no KTAP result lines. The faults (a thread
that cannot start, a CPU that sends nothing, no index for lo) are injected
with an LD_PRELOAD shim, and the runs need a network namespace: root. A
harness built from lo_counters.c feeds its rtnetlink reader crafted replies.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import struct
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

from kloc.bench import metrics
from kloc.counting.counts import PHASE_ALL, PHASE_SINGLE, marker_define
from kloc.paths import PACKAGE_ROOT, cache_dir

from .helpers import require_root

SOURCE = PACKAGE_ROOT / 'selftests' / 'lo_counters'
MARKERS = PACKAGE_ROOT / 'tools' / 'qemu-plugin' / 'kloc-marker.h'
RESULT = re.compile(r'^(not )?ok \d+ ', re.M)
# The default run measures for 2 x (0.5 + 2) s: a refusal takes far less.
FAST = 2.0
# A short real run: two phases of 0.1 s warm-up and 0.2 s measuring.
SHORT = ['-d', '0.2', '-w', '0.1']

# Fails the Nth pthread_create() ($SHIM_FAIL_CREATE) with EAGAIN; makes
# sendmmsg() send nothing on CPU $SHIM_MUTE_CPU (-1: on every CPU); with
# $SHIM_NO_IFINDEX, if_nametoindex() finds no interface.
SHIM = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/socket.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*sendmmsg_fn)(int, struct mmsghdr *, unsigned int, int);
typedef unsigned int (*nametoindex_fn)(const char *);

static int calls;

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	const char *fail = getenv("SHIM_FAIL_CREATE");
	create_fn real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");

	if (fail && __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST) == atoi(fail))
		return EAGAIN;
	return real(t, a, fn, arg);
}

int sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	const char *mute = getenv("SHIM_MUTE_CPU");
	sendmmsg_fn real = (sendmmsg_fn)dlsym(RTLD_NEXT, "sendmmsg");

	if (mute && (atoi(mute) < 0 || atoi(mute) == sched_getcpu())) {
		errno = EAGAIN;
		return -1;
	}
	return real(fd, v, n, flags);
}

unsigned int if_nametoindex(const char *name)
{
	nametoindex_fn real = (nametoindex_fn)dlsym(RTLD_NEXT, "if_nametoindex");

	if (getenv("SHIM_NO_IFINDEX")) {
		errno = ENODEV;
		return 0;
	}
	return real(name);
}
'''

# lo_counters.c's lo_stats(), its main() renamed away, with if_nametoindex()
# and recv() replaced: lo's index is $HARNESS_INDEX, and the RTM_GETLINK
# reply an RTM_NEWLINK whose IFLA_STATS64 has $HARNESS_STATS bytes of a
# struct rtnl_link_stats64 with rx 7, tx 5, rx_dropped 2 (the rest 0xff).
# It prints lo_stats()'s value, the counters, and the fds it left open.
HARNESS = r'''
#define _GNU_SOURCE
#include <dirent.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

static char reply[4096];
static size_t reply_len;

static unsigned int fake_if_nametoindex(const char *name)
{
	(void)name;
	return atoi(getenv("HARNESS_INDEX"));
}

static ssize_t fake_recv(int fd, void *buf, size_t len, int flags)
{
	(void)fd;
	(void)flags;
	if (reply_len > len)
		reply_len = len;
	if (reply_len > sizeof(reply))
		reply_len = sizeof(reply);
	memcpy(buf, reply, reply_len);
	return reply_len;
}

#define if_nametoindex fake_if_nametoindex
#define recv fake_recv
#define main lo_counters_main
#include "lo_counters.c"
#undef main

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = -1;	/* the directory's own */

	if (!d)
		exit(2);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int main(void)
{
	size_t size = atoi(getenv("HARNESS_STATS"));
	struct rtnl_link_stats64 st;
	struct lo_count c = { 0 };
	struct nlmsghdr *nh = (struct nlmsghdr *)reply;
	struct ifinfomsg *ifi = NLMSG_DATA(nh);
	struct rtattr *rta = IFLA_RTA(ifi);
	int fds, ret;

	memset(reply, 0xff, sizeof(reply));
	memset(&st, 0xff, sizeof(st));
	st.rx_packets = 7;
	st.tx_packets = 5;
	st.rx_dropped = 2;
	memset(ifi, 0, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = 1;
	rta->rta_type = IFLA_STATS64;
	rta->rta_len = RTA_LENGTH(size);
	memcpy(RTA_DATA(rta), &st, size < sizeof(st) ? size : sizeof(st));
	nh->nlmsg_type = RTM_NEWLINK;
	nh->nlmsg_flags = 0;
	nh->nlmsg_seq = 0;
	nh->nlmsg_pid = 0;
	nh->nlmsg_len = NLMSG_LENGTH(sizeof(*ifi)) + RTA_ALIGN(rta->rta_len);
	reply_len = nh->nlmsg_len;

	fds = open_fds();
	ret = lo_stats(&c);
	printf("ret %d rx %llu tx %llu dropped %llu leaked %d\n", ret,
	       (unsigned long long)c.rx, (unsigned long long)c.tx,
	       (unsigned long long)c.dropped, open_fds() - fds);
	return 0;
}
'''


def ksft_dir() -> Path:
    """A cached kernel tree's tools/testing/selftests, for kselftest.h."""
    for kernel in ('6.12', '6.1'):
        d = cache_dir() / 'trees' / f'linux-{kernel}' / 'src' / 'tools/testing/selftests'
        if (d / 'kselftest.h').is_file():
            return d
    raise unittest.SkipTest(f'no kernel tree with tools/testing/selftests in {cache_dir()}'
                            ' (make tree)')


class Built:
    """The selftest, the shim and the harness, built once for the module."""
    tmp: tempfile.TemporaryDirectory[str] | None = None
    binary = Path()
    shim = Path()
    harness = Path()


def setUpModule() -> None:
    ksft = ksft_dir()
    if shutil.which('cc') is None or shutil.which('make') is None:
        raise unittest.SkipTest('no cc or make')
    Built.tmp = tempfile.TemporaryDirectory(prefix='kloc-lo_counters-')
    build = Path(Built.tmp.name) / 'lo_counters'
    build.mkdir()
    for name in ('Makefile', 'lo_counters.c'):
        shutil.copy2(SOURCE / name, build / name)
    shutil.copy2(MARKERS, build / MARKERS.name)      # beside it, as in a kernel tree
    # CFLAGS on the command line, as kselftest-host.sh does: no warnings.
    r = subprocess.run(['make', '-s', '-C', str(build), f'KSFT_DIR={ksft}',
                        'CFLAGS=-O2 -Wall -Wextra -Werror'],
                       capture_output=True, text=True)
    if r.returncode:
        raise AssertionError(f'lo_counters does not build:\n{r.stdout}{r.stderr}')
    Built.binary = build / 'lo_counters'
    src = Path(Built.tmp.name) / 'shim.c'
    src.write_text(SHIM)
    Built.shim = Path(Built.tmp.name) / 'shim.so'
    subprocess.run(['cc', '-O2', '-Wall', '-Wextra', '-Werror', '-shared', '-fPIC', '-o',
                    str(Built.shim), str(src), '-ldl'], check=True)
    src = build / 'harness.c'        # beside lo_counters.c, which it includes
    src.write_text(HARNESS)
    Built.harness = build / 'harness'
    r = subprocess.run(['cc', '-O2', '-Wall', '-Wextra', '-Werror', '-iquote', f'{ksft}/net',
                        '-o', str(Built.harness), str(src), '-lpthread', '-lm'],
                       capture_output=True, text=True)
    if r.returncode:
        raise AssertionError(f'the harness does not build:\n{r.stdout}{r.stderr}')


def tearDownModule() -> None:
    if Built.tmp is not None:
        Built.tmp.cleanup()


class Run:
    def __init__(self, args: list[str], env: dict[str, str] | None = None,
                 wrap: list[str] | None = None, binary: Path | None = None) -> None:
        start = time.monotonic()
        r = subprocess.run([*(wrap or []), str(binary or Built.binary), *args],
                           capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, **(env or {})))
        self.seconds = time.monotonic() - start
        self.rc = r.returncode
        self.stdout = r.stdout
        self.stderr = r.stderr

    def results(self) -> list[str]:
        return [x for x in self.stdout.splitlines() if RESULT.match(x)]

    def __str__(self) -> str:
        return f'exit {self.rc} in {self.seconds:.2f} s\n{self.stdout}{self.stderr}'


def allowed_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


class BadOptions(unittest.TestCase):
    """Each is refused, named with its value, exit 1, before measuring anything."""

    def refused(self, args: list[str], message: str) -> None:
        with self.subTest(args=args):
            r = Run(args)
            self.assertEqual(r.rc, 1, str(r))
            self.assertIn(message, r.stderr, str(r))
            self.assertEqual(len(r.stderr.splitlines()), 1, str(r))
            self.assertLess(r.seconds, FAST, str(r))
            self.assertIsNone(RESULT.search(r.stdout), str(r))
            self.assertNotIn('TAP version', r.stdout, str(r))

    def test_threads(self) -> None:
        n = min(len(allowed_cpus()), 1024)
        for value in ('0', 'abc', '100000', '-1', '2x', '', str(n + 1)):
            self.refused(['-t', value], f'lo_counters: -t {value}: threads must be 1..{n}')

    def test_threads_against_the_listed_cpus(self) -> None:
        cpu = allowed_cpus()[0]
        self.refused(['-c', str(cpu), '-t', '2'], '-t 2: threads must be 1..1 (the CPUs given '
                     'with -c)')

    def test_cpus(self) -> None:
        cpus = allowed_cpus()
        self.refused(['-c', 'abc'], 'lo_counters: -c abc: "abc" is not a CPU number')
        self.refused(['-c', f'{cpus[0]},'], f'-c {cpus[0]},: "" is not a CPU number')
        self.refused(['-c', '-1'], '-c -1: "-1" is not a CPU number')
        self.refused(['-c', f'{cpus[0]},{cpus[0]}'], f'CPU {cpus[0]} is listed twice')
        for cpu in (999, 1024, 99999999):
            if cpu not in cpus:
                self.refused(['-c', str(cpu)], f'lo_counters: -c {cpu}: CPU {cpu} is not '
                             "online / not in this task's affinity")
                self.refused(['-c', f'{cpus[0]},{cpu}'], f'-c {cpus[0]},{cpu}: CPU {cpu} is '
                             'not online')

    def test_seconds(self) -> None:
        # 4295 s wrapped usleep()'s 32-bit microseconds into a 33 ms run.
        for value in ('4295', '3600.5', '0', '-1', 'abc', '1s', 'nan', 'inf', '1e999'):
            self.refused(['-d', value], f'lo_counters: -d {value}: the measuring time must '
                         'be in (0, 3600] seconds')

    def test_warmup(self) -> None:
        for value in ('-1', 'abc', '4000', 'nan'):
            self.refused(['-w', value], f'lo_counters: -w {value}: the warm-up must be in '
                         '[0, 3600] seconds')

    def test_payload_and_batch(self) -> None:
        for value in ('0', '1473', 'abc', '64b'):
            self.refused(['-s', value], f'lo_counters: -s {value}: the payload must be '
                         '1..1472 bytes')
        for value in ('0', '257', 'abc', '1x'):
            self.refused(['-b', value], f'lo_counters: -b {value}: the batch must be '
                         '1..256 datagrams')

    def test_count(self) -> None:
        for value in ('0', '-5', 'abc', '2000000000'):
            self.refused(['-n', value], f'lo_counters: -n {value}: the count must be '
                         '1..1000000000 datagrams')

    def test_json_file_that_cannot_be_written(self) -> None:
        self.refused(['-j', '/nonexistent/dir/x.json'],
                     'lo_counters: -j /nonexistent/dir/x.json: cannot write it: No such file')
        with tempfile.TemporaryDirectory() as tmp:
            self.refused(['-j', tmp], f'lo_counters: -j {tmp}: cannot write it: Is a directory')
            # Refused, not created.
            self.refused(['-j', f'{tmp}/no/x.json'], f'-j {tmp}/no/x.json: cannot write it')
            self.assertEqual(os.listdir(tmp), [])

    def test_unknown_and_missing(self) -> None:
        for args, message in ((['-x'], 'lo_counters: -x: unknown option'),
                              (['-t'], 'lo_counters: -t: needs a value'),
                              (['extra'], 'lo_counters: extra: unexpected argument')):
            r = Run(args)
            self.assertEqual(r.rc, 1, str(r))
            self.assertEqual(r.stderr.splitlines()[0], message, str(r))
            self.assertIn('usage: lo_counters', r.stderr, str(r))
            self.assertIsNone(RESULT.search(r.stdout), str(r))

    def test_help(self) -> None:
        r = Run(['-h'])
        self.assertEqual(r.rc, 0, str(r))
        self.assertIn('usage: lo_counters', r.stdout)


def need_netns(r: Run) -> None:
    if r.rc == 4:
        raise unittest.SkipTest(f'lo_counters skipped: {r.stdout.strip().splitlines()[-1]}')


class RealRun(unittest.TestCase):
    def test_short_run(self) -> None:
        threads = min(2, len(allowed_cpus()))
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / 'lo.json'
            r = Run([*SHORT, '-t', str(threads), '-j', str(out)])
            need_netns(r)
            self.assertEqual(r.rc, 0, str(r))
            record = json.loads(out.read_text())
        lines = r.stdout.splitlines()
        self.assertEqual(lines[:2], ['TAP version 13', '1..3'], str(r))
        self.assertEqual(r.results(),
                         ['ok 1 single thread sends', 'ok 2 one thread per CPU sends',
                          f'ok 3 lo counters rose by exactly the {record["sent"]} '
                          'datagrams sent'], str(r))
        self.assertRegex(r.stdout, r'# 1 thread on cpu \d+: \d+ packets/s \(64-byte payload, '
                         r'batch 32\)')
        self.assertRegex(r.stdout, rf'# {threads} threads: \d+ packets/s in total, scaling '
                         r'efficiency \d\.\d{3}')
        self.assertIn('# Totals: pass:3 fail:0', r.stdout)
        self.assertEqual(record['threads'], threads)
        self.assertGreater(record['sent'], 0)
        self.assertGreater(record['pps_single'], 0)
        self.assertGreater(record['pps_total'], 0)
        self.assertEqual(record['lo_tx'] + record['lo_dropped'], record['sent'])
        self.assertEqual(record['lo_rx'], record['lo_tx'])
        self.assertIs(record['counters_ok'], True)
        self.assertEqual(len(record['per_cpu']), threads)
        self.assertTrue(all(c['pps'] > 0 for c in record['per_cpu']), record)
        self.assertGreater(record['seconds'], 0.19)
        self.assertLess(record['seconds'], 2.0)
        got = metrics.extract(record)
        self.assertGreater(got['pps_total'], 0)

    def test_a_fixed_count_per_window(self) -> None:
        """-n: each thread sends that many datagrams (to a batch) in each window,
        whatever the time; -d only caps it. Counted boots use this."""
        threads = min(2, len(allowed_cpus()))
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / 'lo.json'
            r = Run(['-n', '3000', '-d', '30', '-w', '0.05', '-b', '32', '-t', str(threads),
                     '-j', str(out)])
            need_netns(r)
            self.assertEqual(r.rc, 0, str(r))
            record = json.loads(out.read_text())
        self.assertEqual(record['count'], 3000)
        for measured in [record['measured_single']] + [c['measured']
                                                       for c in record['per_cpu']]:
            self.assertGreaterEqual(measured, 3000, record)
            self.assertLess(measured, 3000 + 32, record)
        self.assertLess(record['seconds'], 30, 'the window waited for -d, not the count')
        self.assertIs(record['counters_ok'], True)

    def test_json_on_stdout(self) -> None:
        r = Run([*SHORT, '-t', '1', '-j', '-'])
        need_netns(r)
        self.assertEqual(r.rc, 0, str(r))
        record = json.loads(next(x for x in r.stdout.splitlines() if x.startswith('{')))
        self.assertEqual(record['threads'], 1)
        self.assertGreater(record['sent'], 0)


class Faults(unittest.TestCase):
    """Injected faults fail with a reason; nothing passes over no datagrams."""

    def run_with(self, args: list[str], **env: str) -> Run:
        r = Run([*SHORT, *args], dict(env, LD_PRELOAD=str(Built.shim)))
        need_netns(r)
        return r

    def test_nothing_sent_is_no_pass(self) -> None:
        r = self.run_with(['-t', '1'], SHIM_MUTE_CPU='-1')
        self.assertEqual(r.rc, 1, str(r))
        self.assertEqual(r.results(), ['not ok 1 single thread sends',
                                       'not ok 2 one thread per CPU sends',
                                       'not ok 3 lo counters rose by exactly the 0 datagrams '
                                       'sent'], str(r))
        self.assertIn('sent no datagrams in the measuring window', r.stdout, str(r))
        self.assertIn('no datagrams were sent', r.stdout, str(r))

    def test_one_cpu_that_sends_nothing_fails_the_phase(self) -> None:
        cpus = allowed_cpus()
        if len(cpus) < 2:
            self.skipTest('needs two CPUs')
        r = self.run_with(['-c', f'{cpus[0]},{cpus[1]}'], SHIM_MUTE_CPU=str(cpus[1]))
        self.assertEqual(r.rc, 1, str(r))
        self.assertEqual(r.results(), ['ok 1 single thread sends',
                                       'not ok 2 one thread per CPU sends',
                                       f'ok 3 lo counters rose by exactly the '
                                       f'{self.sent(r)} datagrams sent'], str(r))
        self.assertIn(f'# cpu {cpus[1]}: sent no datagrams in the measuring window', r.stdout)

    def test_thread_that_cannot_start(self) -> None:
        cpus = allowed_cpus()
        if len(cpus) < 2:
            self.skipTest('needs two CPUs')
        # Call 1 is the single thread; 3 is the second of the per-CPU phase.
        r = self.run_with(['-t', '2'], SHIM_FAIL_CREATE='3')
        self.assertEqual(r.rc, 1, str(r))
        self.assertIn('# cannot start thread 2 of 2: Resource temporarily unavailable',
                      r.stdout, str(r))
        # The one that started was stopped and joined before lo was read.
        self.assertEqual(r.results(), ['ok 1 single thread sends',
                                       'not ok 2 one thread per CPU sends',
                                       f'ok 3 lo counters rose by exactly the '
                                       f'{self.sent(r)} datagrams sent'], str(r))

    def test_a_run_that_stops_early_leaves_the_record_as_it_was(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            old, new = Path(tmp) / 'old.json', Path(tmp) / 'new.json'
            old.write_text(OLD_RECORD)
            for out in (old, new):
                r = self.run_with(['-t', '1', '-j', str(out)], SHIM_NO_IFINDEX='1')
                self.assertEqual(r.rc, 1, str(r))
                self.assertIn('Bail out! RTM_GETLINK gave no', r.stdout, str(r))
            # The old record as it was; no new one, not even empty.
            self.assertEqual({p.name: p.read_text() for p in Path(tmp).iterdir()},
                             {'old.json': OLD_RECORD})

    @staticmethod
    def sent(r: Run) -> str:
        m = re.search(r'exactly the (\d+) datagrams', r.stdout)
        return m.group(1) if m else '?'


OLD_RECORD = '{"the": "record of an earlier run"}\n'


def nobody() -> tuple[list[str], int, int]:
    """A wrapper that runs a command as user nobody, with its ids (root only)."""
    if os.geteuid():
        return [], os.geteuid(), os.getegid()     # unprivileged already
    if shutil.which('setpriv') is None:
        raise unittest.SkipTest('no setpriv to run it as nobody')
    try:
        pw = pwd.getpwnam('nobody')
    except KeyError:
        raise unittest.SkipTest('no user nobody') from None
    return (['setpriv', f'--reuid={pw.pw_uid}', f'--regid={pw.pw_gid}', '--clear-groups'],
            pw.pw_uid, pw.pw_gid)


class Unprivileged(unittest.TestCase):
    """With no privileges for a network namespace it skips, and writes no record."""

    def setUp(self) -> None:
        self.wrap, uid, gid = nobody()
        tmp = tempfile.TemporaryDirectory(prefix='kloc-lo_counters-')
        self.addCleanup(tmp.cleanup)
        top = Path(tmp.name)
        top.chmod(0o755)
        self.binary = top / 'lo_counters'
        shutil.copy2(Built.binary, self.binary)
        self.out = top / 'out'              # nobody's, with a record nobody may write
        self.out.mkdir()
        self.old = self.out / 'old.json'
        self.old.write_text(OLD_RECORD)
        for path in (self.out, self.old):
            os.chown(path, uid, gid)

    def run_it(self, args: list[str]) -> Run:
        return Run([*SHORT, *args], wrap=self.wrap, binary=self.binary)

    def test_a_skipped_run_leaves_the_record_as_it_was(self) -> None:
        for out in (self.old, self.out / 'new.json'):
            r = self.run_it(['-j', str(out)])
            if r.rc != 4:
                self.skipTest(f'it did not skip unprivileged: {r}')
            self.assertIn('# SKIP no privileges for a network namespace', r.stdout, str(r))
        # The old record as it was; no new one, not even empty.
        self.assertEqual({p.name: p.read_text() for p in self.out.iterdir()},
                         {'old.json': OLD_RECORD})

    def test_a_record_it_may_not_write_is_refused(self) -> None:
        if not self.wrap:
            require_root(self, 'runs the selftest as nobody')
        os.chown(self.old, 0, 0)
        r = self.run_it(['-j', str(self.old)])
        self.assertEqual(r.rc, 1, str(r))
        self.assertEqual(r.stderr, f'lo_counters: -j {self.old}: cannot write it: '
                         'Permission denied\n', str(r))
        self.assertEqual(self.old.read_text(), OLD_RECORD)


class StatsReader(unittest.TestCase):
    """lo_stats(), the RTM_GETLINK reader, on crafted replies (the harness)."""

    def read(self, index: int, stats: int) -> dict[str, int]:
        r = subprocess.run([str(Built.harness)], capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, HARNESS_INDEX=str(index),
                                    HARNESS_STATS=str(stats)))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        words = r.stdout.split()
        return {k: int(v) for k, v in zip(words[::2], words[1::2])}

    def test_no_index_for_lo_leaks_no_fd(self) -> None:
        got = self.read(0, 200)
        self.assertEqual(got['ret'], -1, got)
        self.assertEqual(got['leaked'], 0, got)

    def test_the_counters_are_read(self) -> None:
        # 184 bytes: the struct as 2.6.35 made it; a newer one only grows.
        for size in (184, 200, 256):
            with self.subTest(size=size):
                self.assertEqual(self.read(1, size), {'ret': 0, 'rx': 7, 'tx': 5,
                                                      'dropped': 2, 'leaked': 0})

    def test_a_short_stats64_is_refused(self) -> None:
        # 48 bytes end before rx_dropped, which lo_stats() reads.
        for size in (0, 8, 48, 55):
            with self.subTest(size=size):
                got = self.read(1, size)
                self.assertEqual(got['ret'], -1, got)
                self.assertEqual(got['leaked'], 0, got)


class Markers(unittest.TestCase):
    """Each measuring window is marked for the counting plugin: one no-op each end."""

    def test_both_phases_are_marked(self) -> None:
        if os.uname().machine != 'x86_64':
            self.skipTest('checks the x86_64 encoding')
        code = Built.binary.read_bytes()
        magic = marker_define('KLOC_MARK_MAGIC') << 16
        for phase in (PHASE_SINGLE, PHASE_ALL):
            for kind, what in ((marker_define('KLOC_MARK_KIND_START'), 'start'),
                               (marker_define('KLOC_MARK_KIND_END'), 'end')):
                # disp32 of nopl: the magic, then the kind in bits 11..8 and the phase
                nop = b'\x0f\x1f\x80' + struct.pack('<I', magic | kind << 8 | phase)
                self.assertIn(nop, code, f'no {what} marker of phase {phase}')

    def test_the_record_has_the_datagrams_of_each_window(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / 'r.json'
            r = Run(['-d', '0.2', '-w', '0.05', '-t', '1', '-j', str(out)])
            if r.rc == 4:
                self.skipTest('no network namespace here')
            self.assertEqual(r.rc, 0, str(r))
            rec = json.loads(out.read_text())
            self.assertGreater(rec['measured_single'], 0)
            self.assertGreater(rec['seconds_single'], 0)
            self.assertTrue(all(c['measured'] > 0 for c in rec['per_cpu']), rec)
