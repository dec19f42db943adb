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
 */

#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <linux/if_link.h>
#include <linux/types.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "../kselftest.h"

#define MAX_THREADS	1024
#define MAX_BATCH	256
#define MAX_PAYLOAD	1472
#define BASE_PORT	20000

struct options {
	double seconds;
	double warmup;
	int payload;
	int batch;
	int nr_cpus;
	int cpus[MAX_THREADS];
	const char *json;
};

struct worker {
	pthread_t thread;
	int cpu;
	int node;
	int port;
	const struct options *opt;
	bool *measuring;	/* read with __atomic_load_n() */
	bool *stop;
	__u64 sent;		/* every datagram sendmmsg() accepted */
	__u64 measured;	/* those sent inside the measuring window */
	int error;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
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
	char *payload, *rxbuf;
	int rxfd = -1, txfd = -1, i, n;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(w->cpu, &set);
	if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set)) {
		w->error = EINVAL;
		return NULL;
	}
	payload = calloc(w->opt->batch, MAX_PAYLOAD);
	rxbuf = calloc(w->opt->batch, MAX_PAYLOAD);
	if (!payload || !rxbuf) {
		w->error = ENOMEM;
		goto out;
	}
	rxfd = socket(AF_INET, SOCK_DGRAM, 0);
	txfd = socket(AF_INET, SOCK_DGRAM, 0);
	if (rxfd < 0 || txfd < 0 ||
	    bind(rxfd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    connect(txfd, (struct sockaddr *)&addr, sizeof(addr))) {
		w->error = errno;
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
			break;
		}
		if (n > 0) {
			w->sent += n;
			if (__atomic_load_n(w->measuring, __ATOMIC_RELAXED))
				w->measured += n;
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

/* Run one worker per CPU in cpus[0..n); 0, or a negative errno. */
static int run_phase(const struct options *opt, int n, struct worker *w, double *secs)
{
	bool measuring = false, stop = false;
	double start, end;
	int i, err = 0;

	for (i = 0; i < n; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].cpu = opt->cpus[i];
		w[i].node = cpu_node(w[i].cpu);
		w[i].port = BASE_PORT + i;
		w[i].opt = opt;
		w[i].measuring = &measuring;
		w[i].stop = &stop;
		if (pthread_create(&w[i].thread, NULL, worker_fn, &w[i]))
			return -EAGAIN;
	}
	usleep(opt->warmup * 1e6);
	__atomic_store_n(&measuring, true, __ATOMIC_RELAXED);
	start = now();
	usleep(opt->seconds * 1e6);
	__atomic_store_n(&measuring, false, __ATOMIC_RELAXED);
	end = now();
	__atomic_store_n(&stop, true, __ATOMIC_RELAXED);
	for (i = 0; i < n; i++) {
		pthread_join(w[i].thread, NULL);
		if (w[i].error)
			err = -w[i].error;
	}
	*secs = end - start;
	return err;
}

struct lo_count {
	__u64 rx;
	__u64 tx;
	__u64 dropped;	/* over netdev_max_backlog: neither tx nor rx */
};

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
	struct nlmsghdr *nh;
	int fd, len, ret = -1;

	req.ifi.ifi_index = if_nametoindex("lo");
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0 || !req.ifi.ifi_index)
		return -1;
	if (send(fd, &req, req.nh.nlmsg_len, 0) < 0)
		goto out;
	len = recv(fd, buf, sizeof(buf), 0);
	for (nh = (struct nlmsghdr *)buf; len > 0 && NLMSG_OK(nh, len);
	     nh = NLMSG_NEXT(nh, len)) {
		struct ifinfomsg *ifi = NLMSG_DATA(nh);
		struct rtattr *rta = IFLA_RTA(ifi);
		int alen = IFLA_PAYLOAD(nh);

		if (nh->nlmsg_type != RTM_NEWLINK)
			continue;
		for (; RTA_OK(rta, alen); rta = RTA_NEXT(rta, alen)) {
			struct rtnl_link_stats64 st;

			if (rta->rta_type != IFLA_STATS64)
				continue;
			memcpy(&st, RTA_DATA(rta), sizeof(st));
			c->rx = st.rx_packets;
			c->tx = st.tx_packets;
			c->dropped = st.rx_dropped;
			ret = 0;
		}
	}
out:
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

static void print_help(const char *prog)
{
	fprintf(stderr, "%s [-t threads] [-c cpu,...] [-d secs] [-w warmup]", prog);
	fprintf(stderr, " [-s payload] [-b batch] [-j file|-]\n");
}

static int parse(int argc, char **argv, struct options *opt)
{
	int c, i, threads = 0;
	char *tok, *save;
	cpu_set_t set;

	*opt = (struct options){ .seconds = 2, .warmup = 0.5, .payload = 64, .batch = 32 };
	while ((c = getopt(argc, argv, "t:c:d:w:s:b:j:h")) != -1) {
		switch (c) {
		case 't':
			threads = atoi(optarg);
			break;
		case 'c':
			for (tok = strtok_r(optarg, ",", &save); tok && opt->nr_cpus < MAX_THREADS;
			     tok = strtok_r(NULL, ",", &save))
				opt->cpus[opt->nr_cpus++] = atoi(tok);
			break;
		case 'd':
			opt->seconds = atof(optarg);
			break;
		case 'w':
			opt->warmup = atof(optarg);
			break;
		case 's':
			opt->payload = atoi(optarg);
			break;
		case 'b':
			opt->batch = atoi(optarg);
			break;
		case 'j':
			opt->json = optarg;
			break;
		default:
			return -1;
		}
	}
	if (opt->seconds <= 0 || opt->warmup < 0 || opt->payload < 1 ||
	    opt->payload > MAX_PAYLOAD || opt->batch < 1 || opt->batch > MAX_BATCH)
		return -1;
	if (!opt->nr_cpus) {
		if (sched_getaffinity(0, sizeof(set), &set))
			return -1;
		for (i = 0; i < CPU_SETSIZE && opt->nr_cpus < MAX_THREADS; i++)
			if (CPU_ISSET(i, &set))
				opt->cpus[opt->nr_cpus++] = i;
	}
	if (threads > 0 && threads < opt->nr_cpus)
		opt->nr_cpus = threads;
	return opt->nr_cpus ? 0 : -1;
}

int main(int argc, char **argv)
{
	static struct worker one[1], all[MAX_THREADS];
	__u64 sent = 0, nodes[64] = { 0 }, tx, rx, dropped;
	struct lo_count c0, c1;
	double secs1, secsn, pps1, ppsn = 0, eff;
	struct options opt;
	FILE *json = NULL;
	int i, err;

	if (parse(argc, argv, &opt)) {
		print_help(argv[0]);
		return KSFT_FAIL;
	}
	ksft_print_header();
	if (unshare(CLONE_NEWNET)) {
		ksft_exit_skip("no privileges for a network namespace: %s\n", strerror(errno));
		return KSFT_SKIP;
	}
	if (lo_up())
		ksft_exit_fail_msg("cannot bring lo up: %s\n", strerror(errno));
	ksft_set_plan(3);
	if (lo_stats(&c0))
		ksft_exit_fail_msg("RTM_GETLINK gave no IFLA_STATS64 for lo\n");

	err = run_phase(&opt, 1, one, &secs1);
	pps1 = one[0].measured / secs1;
	sent += one[0].sent;
	ksft_print_msg("1 thread on cpu %d: %.0f packets/s (%d-byte payload, batch %d)\n",
		       one[0].cpu, pps1, opt.payload, opt.batch);
	ksft_test_result(!err && one[0].measured, "single thread sends\n");

	err = run_phase(&opt, opt.nr_cpus, all, &secsn);
	for (i = 0; i < opt.nr_cpus; i++) {
		double pps = all[i].measured / secsn;

		ppsn += pps;
		sent += all[i].sent;
		nodes[all[i].node % 64] += all[i].measured;
		ksft_print_msg("cpu %d node %d: %.0f packets/s\n", all[i].cpu, all[i].node, pps);
	}
	for (i = 0; i < 64; i++)
		if (nodes[i])
			ksft_print_msg("node %d: %.0f packets/s\n", i, nodes[i] / secsn);
	eff = pps1 > 0 ? ppsn / (opt.nr_cpus * pps1) : 0;
	ksft_print_msg("%d threads: %.0f packets/s in total, scaling efficiency %.3f\n",
		       opt.nr_cpus, ppsn, eff);
	ksft_test_result(!err && ppsn > 0, "one thread per CPU sends\n");

	if (lo_stats(&c1))
		ksft_exit_fail_msg("RTM_GETLINK gave no IFLA_STATS64 for lo\n");
	tx = c1.tx - c0.tx;
	rx = c1.rx - c0.rx;
	dropped = c1.dropped - c0.dropped;
	/* A datagram the backlog had no room for is a drop, not a count. */
	if (dropped)
		ksft_print_msg("lo dropped %llu datagrams over netdev_max_backlog\n",
			       (unsigned long long)dropped);
	if (tx + dropped != sent || rx != tx)
		ksft_print_msg("lo counted tx %llu rx %llu drop %llu of %llu sent: off by %lld\n",
			       (unsigned long long)tx, (unsigned long long)rx,
			       (unsigned long long)dropped, (unsigned long long)sent,
			       (long long)(tx + dropped - sent));
	ksft_test_result(tx + dropped == sent && rx == tx,
			 "lo counters rose by exactly the %llu datagrams sent\n",
			 (unsigned long long)sent);

	if (opt.json) {
		json = strcmp(opt.json, "-") ? fopen(opt.json, "w") : stdout;
		if (!json)
			ksft_exit_fail_msg("cannot write %s: %s\n", opt.json, strerror(errno));
		fprintf(json, "{\"payload\": %d, \"batch\": %d, \"seconds\": %.3f, ",
			opt.payload, opt.batch, secsn);
		fprintf(json, "\"threads\": %d, \"pps_single\": %.0f, \"pps_total\": %.0f, ",
			opt.nr_cpus, pps1, ppsn);
		fprintf(json, "\"scaling_efficiency\": %.4f, \"sent\": %llu, ", eff,
			(unsigned long long)sent);
		fprintf(json, "\"lo_tx\": %llu, \"lo_rx\": %llu, \"lo_dropped\": %llu, ",
			(unsigned long long)tx, (unsigned long long)rx,
			(unsigned long long)dropped);
		fprintf(json, "\"per_cpu\": [");
		for (i = 0; i < opt.nr_cpus; i++)
			fprintf(json, "%s{\"cpu\": %d, \"node\": %d, \"pps\": %.0f}", i ? ", " : "",
				all[i].cpu, all[i].node, all[i].measured / secsn);
		fprintf(json, "]}\n");
		if (json != stdout)
			fclose(json);
	}
	ksft_finished();
}
