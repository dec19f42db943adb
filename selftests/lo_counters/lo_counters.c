// SPDX-License-Identifier: GPL-2.0
/*
 * Loopback throughput and per-CPU counter exactness.
 *
 * One UDP sender per CPU, pinned to it, sends small datagrams over lo with
 * sendmmsg() to a receiver socket that the same thread drains with
 * recvmmsg(). After a warm-up it counts packets over a fixed time: first
 * with one thread, then with one per CPU. It prints packets/s per CPU, per
 * node and in total, the scaling efficiency (N threads against N times one
 * thread), and checks that lo's counters, as the kernel sums them from its
 * per-CPU copies (RTM_GETLINK), rose by exactly the number of datagrams
 * sent. It runs in a network namespace of its own, so lo carries nothing
 * else.
 *
 * A bad option is named, with its value, on one line of stderr, and the
 * test exits KSFT_FAIL before it measures anything.
 */

#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <linux/if_link.h>
#include <linux/types.h>
#include <linux/rtnetlink.h>
#include <math.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"
#include "kloc-marker.h"

#define PROG		"lo_counters"
#define MAX_THREADS	1024
#define MAX_BATCH	256
#define MAX_PAYLOAD	1472
#define MAX_SECONDS	3600
#define MAX_COUNT	1000000000L
#define MAX_NODES	64
#define BASE_PORT	20000
/* IFLA_STATS64 up to the last counter read: a kernel's own may be longer. */
#define STATS64_NEED	(offsetof(struct rtnl_link_stats64, rx_dropped) + sizeof(__u64))

struct options {
	double seconds;
	double warmup;
	int payload;
	int batch;
	int nr_cpus;
	int cpus[MAX_THREADS];
	const char *json;
	long count;	/* -n: datagrams each thread sends per window; 0: by time */
};

/* With -n, the workers that reached the count, and how main learns it. */
struct quota {
	pthread_mutex_t lock;
	pthread_cond_t done;
	int reached;
};

struct worker {
	pthread_t thread;
	int cpu;
	int node;
	int port;
	const struct options *opt;
	bool *measuring;	/* read with __atomic_load_n() */
	bool *stop;
	struct quota *quota;
	__u64 sent;		/* every datagram sendmmsg() accepted */
	__u64 measured;	/* those sent inside the measuring window */
	int error;		/* an errno, from the call named below */
	const char *failed;
};

/* One run of n pinned workers. */
struct phase {
	struct worker *w;
	int n;
	int started;		/* the threads pthread_create() started */
	int create_err;		/* why thread started + 1 did not start */
	double secs;		/* the measuring window, as timed */
};

struct lo_count {
	__u64 rx;
	__u64 tx;
	__u64 dropped;	/* over netdev_max_backlog: neither tx nor rx */
};

struct measurement {
	struct phase one;	/* one thread, on the first CPU */
	struct phase all;	/* one thread per CPU */
	struct lo_count c0, c1;	/* lo's counters before and after */
};

struct figures {
	__u64 sent, tx, rx, dropped;
	__u64 nodes[MAX_NODES];
	double pps1, ppsn, eff;
	bool one_ok, all_ok, counters_ok;
};

/* A usage error: "lo_counters: -X VALUE: why" on stderr; the value -1. */
#define usage_error(c, val, fmt, ...) \
	(fprintf(stderr, PROG ": -%c %s: " fmt "\n", c, val, ##__VA_ARGS__), -1)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Sleep until CLOCK_MONOTONIC reads t seconds. Unlike usleep(), whose
 * argument is 32 bits of microseconds, this cannot wrap, and a signal
 * does not cut it short.
 */
static void sleep_until(double t)
{
	struct timespec ts = { .tv_sec = (time_t)t };

	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	if (ts.tv_nsec < 0)
		ts.tv_nsec = 0;
	if (ts.tv_nsec > 999999999L)
		ts.tv_nsec = 999999999L;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static int cpu_node(int cpu)
{
	char path[128];
	int node;

	for (node = 0; node < 1024; node++) {
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/node%d", cpu, node);
		if (access(path, F_OK) == 0)
			return node;
	}
	return 0;
}

static void *worker_fn(void *arg)
{
	struct mmsghdr tx[MAX_BATCH], rx[MAX_BATCH];
	struct iovec txv[MAX_BATCH], rxv[MAX_BATCH];
	struct worker *w = arg;
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_port = htons(w->port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	char *payload = NULL, *rxbuf = NULL;
	int rxfd = -1, txfd = -1, i, n;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	n = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (n) {
		w->error = n;
		w->failed = "pthread_setaffinity_np";
		return NULL;
	}
	payload = calloc(w->opt->batch, MAX_PAYLOAD);
	rxbuf = calloc(w->opt->batch, MAX_PAYLOAD);
	if (!payload || !rxbuf) {
		w->error = ENOMEM;
		w->failed = "calloc";
		goto out;
	}
	rxfd = socket(AF_INET, SOCK_DGRAM, 0);
	txfd = socket(AF_INET, SOCK_DGRAM, 0);
	if (rxfd < 0 || txfd < 0 ||
	    bind(rxfd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    connect(txfd, (struct sockaddr *)&addr, sizeof(addr))) {
		w->error = errno;
		w->failed = "socket/bind/connect";
		goto out;
	}
	memset(tx, 0, sizeof(tx));
	memset(rx, 0, sizeof(rx));
	for (i = 0; i < w->opt->batch; i++) {
		txv[i].iov_base = payload + i * MAX_PAYLOAD;
		txv[i].iov_len = w->opt->payload;
		tx[i].msg_hdr.msg_iov = &txv[i];
		tx[i].msg_hdr.msg_iovlen = 1;
		rxv[i].iov_base = rxbuf + i * MAX_PAYLOAD;
		rxv[i].iov_len = MAX_PAYLOAD;
		rx[i].msg_hdr.msg_iov = &rxv[i];
		rx[i].msg_hdr.msg_iovlen = 1;
	}
	while (!__atomic_load_n(w->stop, __ATOMIC_RELAXED)) {
		n = sendmmsg(txfd, tx, w->opt->batch, 0);
		if (n < 0 && errno != EAGAIN && errno != ENOBUFS) {
			w->error = errno;
			w->failed = "sendmmsg";
			break;
		}
		if (n > 0) {
			w->sent += n;
			if (__atomic_load_n(w->measuring, __ATOMIC_RELAXED))
				w->measured += n;
		}
		if (w->opt->count && (long)w->measured >= w->opt->count) {
			/* -n: this thread's share of the window is sent */
			pthread_mutex_lock(&w->quota->lock);
			w->quota->reached++;
			pthread_cond_signal(&w->quota->done);
			pthread_mutex_unlock(&w->quota->lock);
			break;
		}
		while (recvmmsg(rxfd, rx, w->opt->batch, MSG_DONTWAIT, NULL) > 0)
			;
	}
out:
	if (txfd >= 0)
		close(txfd);
	if (rxfd >= 0)
		close(rxfd);
	free(payload);
	free(rxbuf);
	return NULL;
}

/* -n: wait until every started thread sent its count, or until the deadline. */
static void wait_quota(struct quota *q, int threads, double deadline)
{
	struct timespec ts = {
		.tv_sec = (time_t)deadline,
		.tv_nsec = (long)((deadline - (time_t)deadline) * 1e9),
	};

	pthread_mutex_lock(&q->lock);
	while (q->reached < threads &&
	       pthread_cond_timedwait(&q->done, &q->lock, &ts) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&q->lock);
}

/*
 * Run one worker per CPU in cpus[0..ph->n). Every thread that started is
 * stopped and joined before this returns, also when a later one did not
 * start: the workers read flags on this function's stack.
 *
 * For the kloc-count QEMU plugin, the measuring window is marked with a
 * no-op instruction each end (kloc-marker.h, which also numbers the phases:
 * KLOC_PHASE_*), so that a counted run counts the window only, not the
 * warm-up.
 */
static void run_phase(const struct options *opt, struct phase *ph, unsigned int phase)
{
	bool measuring = false, stop = false;
	struct quota quota = { .lock = PTHREAD_MUTEX_INITIALIZER };
	pthread_condattr_t attr;
	double start, end;
	int i;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&quota.done, &attr);
	pthread_condattr_destroy(&attr);

	ph->started = 0;
	ph->create_err = 0;
	ph->secs = 0;
	for (i = 0; i < ph->n; i++) {
		memset(&ph->w[i], 0, sizeof(ph->w[i]));
		ph->w[i].cpu = opt->cpus[i];
		ph->w[i].node = cpu_node(ph->w[i].cpu);
		ph->w[i].port = BASE_PORT + i;
		ph->w[i].opt = opt;
		ph->w[i].measuring = &measuring;
		ph->w[i].stop = &stop;
		ph->w[i].quota = &quota;
	}
	for (i = 0; i < ph->n; i++) {
		ph->create_err = pthread_create(&ph->w[i].thread, NULL, worker_fn, &ph->w[i]);
		if (ph->create_err)
			break;
		ph->started++;
	}
	if (!ph->create_err) {
		sleep_until(now() + opt->warmup);
		__atomic_store_n(&measuring, true, __ATOMIC_RELAXED);
		kloc_mark_start(phase);
		start = now();
		if (opt->count)
			wait_quota(&quota, ph->started, start + opt->seconds);
		else
			sleep_until(start + opt->seconds);
		kloc_mark_end(phase);
		__atomic_store_n(&measuring, false, __ATOMIC_RELAXED);
		end = now();
		ph->secs = end - start;
	}
	__atomic_store_n(&stop, true, __ATOMIC_RELAXED);
	for (i = 0; i < ph->started; i++)
		pthread_join(ph->w[i].thread, NULL);
	pthread_cond_destroy(&quota.done);
}

/*
 * The counters in an RTM_GETLINK reply of len bytes (len < 0: none came):
 * 0, or -1 when it has no IFLA_STATS64, or one too short to hold them.
 */
static int link_stats(void *buf, int len, struct lo_count *c)
{
	struct rtnl_link_stats64 st;
	struct nlmsghdr *nh;
	int ret = -1;

	/* len > 0: NLMSG_OK() compares it with a __u32 */
	for (nh = buf; len > 0 && NLMSG_OK(nh, (__u32)len); nh = NLMSG_NEXT(nh, len)) {
		struct ifinfomsg *ifi = NLMSG_DATA(nh);
		struct rtattr *rta = IFLA_RTA(ifi);
		int alen = IFLA_PAYLOAD(nh);

		if (nh->nlmsg_type != RTM_NEWLINK)
			continue;
		for (; RTA_OK(rta, alen); rta = RTA_NEXT(rta, alen)) {
			if (rta->rta_type != IFLA_STATS64)
				continue;
			if (RTA_PAYLOAD(rta) < STATS64_NEED)
				return -1;
			/* Counters this kernel does not have read 0. */
			memset(&st, 0, sizeof(st));
			memcpy(&st, RTA_DATA(rta),
			       RTA_PAYLOAD(rta) < sizeof(st) ? RTA_PAYLOAD(rta) : sizeof(st));
			c->rx = st.rx_packets;
			c->tx = st.tx_packets;
			c->dropped = st.rx_dropped;
			ret = 0;
		}
	}
	return ret;
}

/* lo's packet counters, as the kernel sums them, through RTM_GETLINK. */
static int lo_stats(struct lo_count *c)
{
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
	} req = {
		.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)),
		.nh.nlmsg_type = RTM_GETLINK,
		.nh.nlmsg_flags = NLM_F_REQUEST,
		.ifi.ifi_family = AF_UNSPEC,
	};
	char buf[16384];
	int fd, ret = -1;

	req.ifi.ifi_index = if_nametoindex("lo");
	if (!req.ifi.ifi_index)
		return -1;
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -1;
	if (send(fd, &req, req.nh.nlmsg_len, 0) >= 0)
		ret = link_stats(buf, recv(fd, buf, sizeof(buf), 0), c);
	close(fd);
	return ret;
}

static int lo_up(void)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	int ret;

	if (fd < 0)
		return -1;
	ret = ioctl(fd, SIOCGIFFLAGS, &ifr);
	if (!ret) {
		ifr.ifr_flags |= IFF_UP;
		ret = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	close(fd);
	return ret;
}

static void print_help(FILE *f)
{
	fprintf(f, "usage: " PROG " [-t threads] [-c cpu,...] [-d secs] [-w warmup]");
	fprintf(f, " [-s payload] [-b batch] [-n count] [-j file|-]\n");
	fprintf(f, "  -t 1..CPUs  -d (0, %d] s  -w [0, %d] s  -s 1..%d bytes  -b 1..%d\n",
		MAX_SECONDS, MAX_SECONDS, MAX_PAYLOAD, MAX_BATCH);
	fprintf(f, "  -n 1..%ld: each thread sends that many datagrams per window, which\n"
		"     ends when all have (-d is then the longest it may take)\n", MAX_COUNT);
}

/* s, all of it, as a base-10 integer in [min, max]. */
static bool parse_long(const char *s, long min, long max, long *val)
{
	char *end;

	errno = 0;
	*val = strtol(s, &end, 10);
	return end != s && !*end && !errno && *val >= min && *val <= max;
}

/* s, all of it, as a finite number in [min, max]; open at min if so told. */
static bool parse_double(const char *s, double min, bool open_min, double max, double *val)
{
	char *end;

	errno = 0;
	*val = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(*val))
		return false;
	return (open_min ? *val > min : *val >= min) && *val <= max;
}

/* The CPUs in set as a list of ranges, "0-3,8". */
static void format_cpus(const cpu_set_t *set, char *buf, size_t len)
{
	size_t off = 0;
	int i, j;

	buf[0] = '\0';
	for (i = 0; i < CPU_SETSIZE && off < len; i = j + 1) {
		j = i;
		if (!CPU_ISSET(i, set))
			continue;
		while (j + 1 < CPU_SETSIZE && CPU_ISSET(j + 1, set))
			j++;
		if (j > i)
			off += snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", i, j);
		else
			off += snprintf(buf + off, len - off, "%s%d", off ? "," : "", i);
	}
}

/* -c's list: each CPU a number, in this task's affinity, and listed once. */
static int parse_cpus(const char *arg, const cpu_set_t *allowed, struct options *opt)
{
	const char *p = arg;
	char cpus[256];
	char *end;
	long cpu;
	int i;

	for (;;) {
		errno = 0;
		cpu = strtol(p, &end, 10);
		if (end == p || errno || (*end && *end != ',') || cpu < 0)
			return usage_error('c', arg, "\"%.*s\" is not a CPU number",
					   (int)strcspn(p, ","), p);
		if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, allowed)) {
			format_cpus(allowed, cpus, sizeof(cpus));
			return usage_error('c', arg,
					   "CPU %ld is not online / not in this task's affinity (%s)",
					   cpu, cpus);
		}
		for (i = 0; i < opt->nr_cpus; i++)
			if (opt->cpus[i] == cpu)
				return usage_error('c', arg, "CPU %ld is listed twice", cpu);
		if (opt->nr_cpus == MAX_THREADS)
			return usage_error('c', arg, "more than %d CPUs", MAX_THREADS);
		opt->cpus[opt->nr_cpus++] = cpu;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

/*
 * Whether fopen(path, "w") could open -j's file, asked without creating or
 * truncating it: that is done only once there is a record to write. 0, or
 * -1 with errno.
 */
static int writable(const char *path)
{
	struct stat st;
	char *dir;
	int ret;

	if (!stat(path, &st)) {
		if (S_ISDIR(st.st_mode)) {
			errno = EISDIR;
			return -1;
		}
		return access(path, W_OK);
	}
	if (errno != ENOENT)
		return -1;
	dir = strdup(path);
	if (!dir)
		return -1;
	ret = access(dirname(dir), W_OK | X_OK);
	free(dir);
	return ret;
}

/* 0 to run, 1 after -h, -1 after a usage error: named on stderr. */
static int parse(int argc, char **argv, struct options *opt)
{
	const char *threads = NULL;
	cpu_set_t allowed;
	bool listed;
	long val;
	int c, i;

	*opt = (struct options){ .seconds = 2, .warmup = 0.5, .payload = 64, .batch = 32 };
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		fprintf(stderr, PROG ": cannot read this task's CPU affinity: %s\n",
			strerror(errno));
		return -1;
	}
	opterr = 0;
	while ((c = getopt(argc, argv, ":t:c:d:w:s:b:n:j:h")) != -1) {
		switch (c) {
		case 't':
			threads = optarg;	/* checked against the CPUs below */
			break;
		case 'c':
			if (parse_cpus(optarg, &allowed, opt))
				return -1;
			break;
		case 'd':
			if (!parse_double(optarg, 0, true, MAX_SECONDS, &opt->seconds))
				return usage_error(c, optarg,
						   "the measuring time must be in (0, %d] seconds",
						   MAX_SECONDS);
			break;
		case 'w':
			if (!parse_double(optarg, 0, false, MAX_SECONDS, &opt->warmup))
				return usage_error(c, optarg,
						   "the warm-up must be in [0, %d] seconds",
						   MAX_SECONDS);
			break;
		case 's':
			if (!parse_long(optarg, 1, MAX_PAYLOAD, &val))
				return usage_error(c, optarg, "the payload must be 1..%d bytes",
						   MAX_PAYLOAD);
			opt->payload = val;
			break;
		case 'b':
			if (!parse_long(optarg, 1, MAX_BATCH, &val))
				return usage_error(c, optarg, "the batch must be 1..%d datagrams",
						   MAX_BATCH);
			opt->batch = val;
			break;
		case 'n':
			if (!parse_long(optarg, 1, MAX_COUNT, &opt->count))
				return usage_error(c, optarg, "the count must be 1..%ld datagrams",
						   MAX_COUNT);
			break;
		case 'j':
			/* A record that cannot be written: before measuring. */
			if (strcmp(optarg, "-") && writable(optarg))
				return usage_error(c, optarg, "cannot write it: %s",
						   strerror(errno));
			opt->json = optarg;
			break;
		case 'h':
			print_help(stdout);
			return 1;
		case ':':
			fprintf(stderr, PROG ": -%c: needs a value\n", optopt);
			print_help(stderr);
			return -1;
		default:
			fprintf(stderr, PROG ": -%c: unknown option\n", optopt);
			print_help(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": %s: unexpected argument\n", argv[optind]);
		print_help(stderr);
		return -1;
	}
	listed = opt->nr_cpus > 0;
	if (!listed) {
		for (i = 0; i < CPU_SETSIZE && opt->nr_cpus < MAX_THREADS; i++)
			if (CPU_ISSET(i, &allowed))
				opt->cpus[opt->nr_cpus++] = i;
	}
	if (!opt->nr_cpus) {
		fprintf(stderr, PROG ": this task may run on no CPU\n");
		return -1;
	}
	if (threads) {
		if (!parse_long(threads, 1, opt->nr_cpus, &val))
			return usage_error('t', threads, "threads must be 1..%d (the CPUs %s)",
					   opt->nr_cpus,
					   listed ? "given with -c" : "this task may run on");
		opt->nr_cpus = val;
	}
	return 0;
}

/* Both phases, between two readings of lo's counters; -1 if one failed. */
static int measure(const struct options *opt, struct measurement *m)
{
	if (lo_stats(&m->c0))
		return -1;
	m->one.n = 1;
	run_phase(opt, &m->one, KLOC_PHASE_SINGLE);
	m->all.n = opt->nr_cpus;
	run_phase(opt, &m->all, KLOC_PHASE_ALL);
	return lo_stats(&m->c1);
}

static double rate(__u64 count, double secs)
{
	return secs > 0 ? count / secs : 0;
}

/* Why a worker's figure cannot count, or NULL. */
static const char *worker_fault(const struct worker *w)
{
	if (w->error)
		return strerror(w->error);
	if (!w->measured)
		return "sent no datagrams in the measuring window";
	return NULL;
}

/* A phase passes when every thread started, and each one sent. */
static bool phase_ok(const struct phase *ph)
{
	int i;

	if (ph->create_err || ph->started != ph->n)
		return false;
	for (i = 0; i < ph->n; i++)
		if (worker_fault(&ph->w[i]))
			return false;
	return true;
}

static void check(const struct measurement *m, struct figures *f)
{
	const struct worker *w;
	int i;

	memset(f, 0, sizeof(*f));
	f->sent = m->one.w[0].sent;
	f->pps1 = rate(m->one.w[0].measured, m->one.secs);
	for (i = 0; i < m->all.n; i++) {
		w = &m->all.w[i];
		f->sent += w->sent;
		f->ppsn += rate(w->measured, m->all.secs);
		f->nodes[w->node % MAX_NODES] += w->measured;
	}
	f->eff = f->pps1 > 0 ? f->ppsn / (m->all.n * f->pps1) : 0;
	f->tx = m->c1.tx - m->c0.tx;
	f->rx = m->c1.rx - m->c0.rx;
	f->dropped = m->c1.dropped - m->c0.dropped;
	f->one_ok = phase_ok(&m->one);
	f->all_ok = phase_ok(&m->all);
	/* A datagram the backlog had no room for is a drop, not a count. */
	f->counters_ok = f->sent && f->tx + f->dropped == f->sent && f->rx == f->tx;
}

/* Why a phase failed: one diagnostic line per cause. */
static void report_faults(const struct phase *ph)
{
	const char *why;
	int i;

	if (ph->create_err)
		ksft_print_msg("cannot start thread %d of %d: %s\n", ph->started + 1, ph->n,
			       strerror(ph->create_err));
	for (i = 0; i < ph->started; i++) {
		why = worker_fault(&ph->w[i]);
		if (why && ph->w[i].error)
			ksft_print_msg("cpu %d: %s: %s\n", ph->w[i].cpu, ph->w[i].failed, why);
		else if (why)
			ksft_print_msg("cpu %d: %s\n", ph->w[i].cpu, why);
	}
}

static void report(const struct options *opt, const struct measurement *m,
		   const struct figures *f)
{
	const struct worker *w;
	int i;

	ksft_print_msg("1 thread on cpu %d: %.0f packets/s (%d-byte payload, batch %d)\n",
		       m->one.w[0].cpu, f->pps1, opt->payload, opt->batch);
	if (!f->one_ok)
		report_faults(&m->one);
	ksft_test_result(f->one_ok, "single thread sends\n");

	for (i = 0; i < m->all.n; i++) {
		w = &m->all.w[i];
		ksft_print_msg("cpu %d node %d: %.0f packets/s\n", w->cpu, w->node,
			       rate(w->measured, m->all.secs));
	}
	for (i = 0; i < MAX_NODES; i++)
		if (f->nodes[i])
			ksft_print_msg("node %d: %.0f packets/s\n", i,
				       rate(f->nodes[i], m->all.secs));
	ksft_print_msg("%d threads: %.0f packets/s in total, scaling efficiency %.3f\n",
		       m->all.n, f->ppsn, f->eff);
	if (!f->all_ok)
		report_faults(&m->all);
	ksft_test_result(f->all_ok, "one thread per CPU sends\n");

	if (f->dropped)
		ksft_print_msg("lo dropped %llu datagrams over netdev_max_backlog\n",
			       (unsigned long long)f->dropped);
	if (f->tx + f->dropped != f->sent || f->rx != f->tx)
		ksft_print_msg("lo counted tx %llu rx %llu drop %llu of %llu sent: off by %lld\n",
			       (unsigned long long)f->tx, (unsigned long long)f->rx,
			       (unsigned long long)f->dropped, (unsigned long long)f->sent,
			       (long long)(f->tx + f->dropped - f->sent));
	if (!f->sent)
		ksft_print_msg("no datagrams were sent: lo's counters have nothing to match\n");
	ksft_test_result(f->counters_ok, "lo counters rose by exactly the %llu datagrams sent\n",
			 (unsigned long long)f->sent);
}

/*
 * The JSON record, one line, to stdout for "-", else to the file, opened
 * only now that there are results: a run that skips or stops before them
 * leaves the file as it was, and makes none. Parsed: tools/kloc reads it
 * (guests/guest.py finds it, bench/metrics.py takes the figures,
 * mutants/mutants.py the counter verdict), so keys are only ever added.
 * 0, or -1 with errno.
 */
static int write_json(const char *path, const struct measurement *m,
		      const struct options *opt, const struct figures *f)
{
	FILE *json = strcmp(path, "-") ? fopen(path, "w") : stdout;
	const struct worker *w;
	int i, ret;

	if (!json)
		return -1;

	fprintf(json, "{\"payload\": %d, \"batch\": %d, \"seconds\": %.3f, ",
		opt->payload, opt->batch, m->all.secs);
	fprintf(json, "\"count\": %ld, ", opt->count);
	fprintf(json, "\"threads\": %d, \"pps_single\": %.0f, \"pps_total\": %.0f, ",
		m->all.n, f->pps1, f->ppsn);
	fprintf(json, "\"scaling_efficiency\": %.4f, \"sent\": %llu, ", f->eff,
		(unsigned long long)f->sent);
	fprintf(json, "\"measured_single\": %llu, \"seconds_single\": %.3f, ",
		(unsigned long long)m->one.w[0].measured, m->one.secs);
	fprintf(json, "\"lo_tx\": %llu, \"lo_rx\": %llu, \"lo_dropped\": %llu, ",
		(unsigned long long)f->tx, (unsigned long long)f->rx,
		(unsigned long long)f->dropped);
	fprintf(json, "\"counters_ok\": %s, ", f->counters_ok ? "true" : "false");
	fprintf(json, "\"per_cpu\": [");
	for (i = 0; i < m->all.n; i++) {
		w = &m->all.w[i];
		fprintf(json, "%s{\"cpu\": %d, \"node\": %d, \"pps\": %.0f, \"measured\": %llu}",
			i ? ", " : "", w->cpu, w->node, rate(w->measured, m->all.secs),
			(unsigned long long)w->measured);
	}
	fprintf(json, "]}\n");
	ret = fflush(json) || ferror(json) ? -1 : 0;
	if (json != stdout && fclose(json))
		ret = -1;
	return ret;
}

int main(int argc, char **argv)
{
	static struct worker one[1], all[MAX_THREADS];
	struct measurement m = { .one.w = one, .all.w = all };
	struct options opt;
	struct figures f;
	int ret;

	ret = parse(argc, argv, &opt);
	if (ret)
		return ret < 0 ? KSFT_FAIL : KSFT_PASS;
	ksft_print_header();
	if (unshare(CLONE_NEWNET)) {
		ksft_exit_skip("no privileges for a network namespace: %s\n", strerror(errno));
		return KSFT_SKIP;
	}
	if (lo_up())
		ksft_exit_fail_msg("cannot bring lo up: %s\n", strerror(errno));
	ksft_set_plan(3);
	if (measure(&opt, &m))
		ksft_exit_fail_msg("RTM_GETLINK gave no usable IFLA_STATS64 for lo\n");
	check(&m, &f);
	report(&opt, &m, &f);
	if (opt.json && write_json(opt.json, &m, &opt, &f))
		ksft_exit_fail_msg("-j %s: cannot write the record: %s\n", opt.json,
				   strerror(errno));
	ksft_finished();
}
