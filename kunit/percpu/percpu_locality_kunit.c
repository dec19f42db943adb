// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for percpu locality: the copies of one percpu object for
 * different CPUs never share a cache line, and each sits on its CPU's node.
 *
 * In 2008, alloc_percpu() of a small object packed the copies of several
 * CPUs into one cache line, and every CPU contended on the loopback
 * device's statistics. mm/percpu.c now gives each CPU a unit of its own;
 * these tests keep it that way, for the chunk the kernel starts with and
 * for the chunks it adds later, and for the loopback device itself.
 */

#include <kunit/test.h>
#include <linux/atomic.h>
#include <linux/cache.h>
#include <linux/completion.h>
#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <linux/percpu.h>
#include <linux/percpu_counter.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <net/net_namespace.h>

#include <asm/sections.h>

#define PCPU_KUNIT_MAX_OBJS	256
#define PCPU_KUNIT_COUNT	20000
#define PCPU_KUNIT_WAIT_S	60	/* for the counting threads to finish */
#define PCPU_KUNIT_STALL_MS	300	/* the wait for threads that stall */

/*
 * The checkers. They are plain functions of addresses and node numbers,
 * so that they can be shown to fail on layouts the kernel no longer makes.
 */

/* Whether [a, a + size) and [b, b + size) touch a common @line-byte line. */
static bool pcpu_kunit_share_line(unsigned long a, unsigned long b, size_t size,
				  unsigned int line)
{
	unsigned long a_first = a / line, a_last = (a + size - 1) / line;
	unsigned long b_first = b / line, b_last = (b + size - 1) / line;

	return a_first <= b_last && b_first <= a_last;
}

/*
 * The first copy, by index, that shares a cache line with an earlier one
 * (stored in *@other), or -1 when no two copies share one.
 */
static int pcpu_kunit_find_sharing(const unsigned long *addr, int n, size_t size,
				   unsigned int line, int *other)
{
	int i, j;

	for (i = 1; i < n; i++) {
		for (j = 0; j < i; j++) {
			if (pcpu_kunit_share_line(addr[i], addr[j], size, line)) {
				*other = j;
				return i;
			}
		}
	}
	return -1;
}

/* How many of @n copies are not on the node they should be on. */
static int pcpu_kunit_count_misplaced(const int *nid, const int *want, int n)
{
	int i, bad = 0;

	for (i = 0; i < n; i++)
		bad += nid[i] != want[i];
	return bad;
}

/* The layout of one percpu object: one address and node per possible CPU. */
struct pcpu_kunit_layout {
	int n;
	int cpu[NR_CPUS];
	unsigned long addr[NR_CPUS];
	int nid[NR_CPUS];
	int want[NR_CPUS];
};

static int pcpu_kunit_nid_of(void *va)
{
	return page_to_nid(pfn_to_page(PHYS_PFN(per_cpu_ptr_to_phys(va))));
}

static void pcpu_kunit_read_layout(const void __percpu *p, struct pcpu_kunit_layout *l)
{
	int cpu;

	l->n = 0;
	for_each_possible_cpu(cpu) {
		void *va = per_cpu_ptr((void __percpu *)p, cpu);

		l->cpu[l->n] = cpu;
		l->addr[l->n] = (unsigned long)va;
		l->nid[l->n] = pcpu_kunit_nid_of(va);
		l->want[l->n] = cpu_to_node(cpu);
		l->n++;
	}
}

/* Expect no two CPUs' copies to share a line, by both measures of a line. */
static void pcpu_kunit_expect_no_sharing(struct kunit *test, const char *what,
					 const struct pcpu_kunit_layout *l, size_t size)
{
	unsigned int lines[] = { cache_line_size(), L1_CACHE_BYTES };
	int i, bad, other;

	for (i = 0; i < ARRAY_SIZE(lines); i++) {
		bad = pcpu_kunit_find_sharing(l->addr, l->n, size, lines[i], &other);
		/* the message is formatted only when bad >= 0 */
		KUNIT_EXPECT_LT_MSG(test, bad, 0,
				    "%s (%zu bytes): the copies of CPU %d (%#lx) and CPU %d (%#lx) share a %u-byte line",
				    what, size, l->cpu[bad], l->addr[bad], l->cpu[other],
				    l->addr[other], lines[i]);
	}
}

static void pcpu_kunit_expect_on_nodes(struct kunit *test, const char *what,
				       const struct pcpu_kunit_layout *l)
{
	int i;

	if (!pcpu_kunit_count_misplaced(l->nid, l->want, l->n))
		return;
	for (i = 0; i < l->n; i++)
		KUNIT_EXPECT_EQ_MSG(test, l->nid[i], l->want[i],
				    "%s: CPU %d's copy (%#lx) is on node %d, the CPU on node %d",
				    what, l->cpu[i], l->addr[i], l->nid[i], l->want[i]);
}

/* The first chunk, as the units of the kernel's own static percpu data. */
struct pcpu_kunit_first_chunk {
	unsigned long start;	/* CPU 0's unit */
	unsigned long stride;	/* the smallest distance between two units */
	bool embedded;		/* units in the linear map, not vmalloc space */
};

static void pcpu_kunit_first_chunk(struct pcpu_kunit_first_chunk *fc)
{
	unsigned long first = (unsigned long)__per_cpu_start;
	int a, b;

	fc->start = first + per_cpu_offset(0);
	fc->stride = ULONG_MAX;
	for_each_possible_cpu(a) {
		for_each_possible_cpu(b) {
			unsigned long d = per_cpu_offset(b) - per_cpu_offset(a);

			if (per_cpu_offset(b) > per_cpu_offset(a) && d < fc->stride)
				fc->stride = d;
		}
	}
	fc->embedded = virt_addr_valid((void *)fc->start);
}

static bool pcpu_kunit_in_first_chunk(const struct pcpu_kunit_first_chunk *fc,
				      const void __percpu *p)
{
	unsigned long a = (unsigned long)per_cpu_ptr((void __percpu *)p, 0);

	return a >= fc->start && (fc->stride == ULONG_MAX || a - fc->start < fc->stride);
}

/* Synthetic layouts: the checkers must flag what they exist to flag. */

/* 2008: alloc_percpu(8) gave CPU n the 8 bytes at base + 8n. */
static void pcpu_kunit_checker_flags_2008_layout(struct kunit *test)
{
	unsigned long addr[4];
	int cpu, other;

	for (cpu = 0; cpu < ARRAY_SIZE(addr); cpu++)
		addr[cpu] = 0x100000 + cpu * 8;
	KUNIT_EXPECT_EQ(test, pcpu_kunit_find_sharing(addr, 4, 8, 64, &other), 1);
	KUNIT_EXPECT_EQ(test, other, 0);
	KUNIT_EXPECT_GE(test, pcpu_kunit_find_sharing(addr, 4, 8, 32, &other), 0);
}

static void pcpu_kunit_checker_flags_straddling(struct kunit *test)
{
	unsigned long addr[4];
	int cpu, other;

	/* 72-byte copies 64 bytes apart run into the next CPU's line */
	for (cpu = 0; cpu < ARRAY_SIZE(addr); cpu++)
		addr[cpu] = 0x100000 + cpu * 64;
	KUNIT_EXPECT_GE(test, pcpu_kunit_find_sharing(addr, 4, 72, 64, &other), 0);
	/* 64-byte copies 64 bytes apart but off by 32 share lines too */
	for (cpu = 0; cpu < ARRAY_SIZE(addr); cpu++)
		addr[cpu] = 0x100020 + cpu * 64;
	KUNIT_EXPECT_GE(test, pcpu_kunit_find_sharing(addr, 4, 64, 64, &other), 0);
	/* aligned 64-byte copies, one line each, share nothing */
	for (cpu = 0; cpu < ARRAY_SIZE(addr); cpu++)
		addr[cpu] = 0x100000 + cpu * 64;
	KUNIT_EXPECT_LT(test, pcpu_kunit_find_sharing(addr, 4, 64, 64, &other), 0);
}

static void pcpu_kunit_checker_passes_units(struct kunit *test)
{
	unsigned long addr[4];
	int cpu, other;

	for (cpu = 0; cpu < ARRAY_SIZE(addr); cpu++)
		addr[cpu] = 0x100000 + cpu * SZ_32K + 8;
	KUNIT_EXPECT_LT(test, pcpu_kunit_find_sharing(addr, 4, 4096, 64, &other), 0);
}

static void pcpu_kunit_checker_flags_misplaced(struct kunit *test)
{
	const int want[4] = { 0, 0, 1, 1 };
	const int good[4] = { 0, 0, 1, 1 };
	const int bad[4] = { 0, 0, 0, 1 };

	KUNIT_EXPECT_EQ(test, pcpu_kunit_count_misplaced(good, want, 4), 0);
	KUNIT_EXPECT_EQ(test, pcpu_kunit_count_misplaced(bad, want, 4), 1);
}

/*
 * The first chunk: which allocator made it, the unit stride, and where
 * each CPU's unit lives. Both first-chunk allocators place each CPU's unit
 * on its node when the architecture tells them the node, as arm64 and
 * x86 do.
 */
static void pcpu_kunit_first_chunk_on_nodes(struct kunit *test)
{
	struct pcpu_kunit_first_chunk fc;
	struct pcpu_kunit_layout *l;
	int i;

	pcpu_kunit_first_chunk(&fc);
	/*
	 * Parsed: the package's runner checks the machine it booted against
	 * the topology from this line. Keep its "kloc: key=value" format.
	 */
	kunit_info(test, "kloc: online_nodes=%u possible_cpus=%u\n",
		   num_online_nodes(), num_possible_cpus());
	kunit_info(test, "first chunk: %s allocator, unit stride %lu bytes, %u possible CPUs, %u online nodes\n",
		   fc.embedded ? "embed" : "page", fc.stride == ULONG_MAX ? 0 : fc.stride,
		   num_possible_cpus(), num_online_nodes());
	l = kunit_kzalloc(test, sizeof(*l), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, l);
	pcpu_kunit_read_layout((void __percpu __force *)__per_cpu_start, l);
	for (i = 0; i < l->n; i++)
		kunit_info(test, "cpu %d: node %d, unit at %#lx on node %d\n",
			   l->cpu[i], l->want[i], l->addr[i], l->nid[i]);
	pcpu_kunit_expect_on_nodes(test, "first chunk unit", l);
}

/* The allocation calls under test. */
enum pcpu_kunit_how {
	PCPU_KUNIT_ALLOC_PERCPU,	/* alloc_percpu(type): natural alignment */
	PCPU_KUNIT_ALLOC_SIZE,		/* __alloc_percpu(size, align) */
	PCPU_KUNIT_ALLOC_GFP,		/* __alloc_percpu_gfp(.., GFP_KERNEL) */
	PCPU_KUNIT_ALLOC_NOWAIT,	/* __alloc_percpu_gfp(.., GFP_NOWAIT) */
};

struct pcpu_kunit_alloc_case {
	const char *name;
	enum pcpu_kunit_how how;
	size_t align;		/* 0: natural */
};

static const struct pcpu_kunit_alloc_case pcpu_kunit_alloc_cases[] = {
	{ "alloc_percpu", PCPU_KUNIT_ALLOC_PERCPU, 0 },
	{ "__alloc_percpu natural", PCPU_KUNIT_ALLOC_SIZE, 0 },
	{ "__alloc_percpu cache line", PCPU_KUNIT_ALLOC_SIZE, SMP_CACHE_BYTES },
	{ "__alloc_percpu 256", PCPU_KUNIT_ALLOC_SIZE, 256 },
	{ "alloc_percpu_gfp GFP_KERNEL", PCPU_KUNIT_ALLOC_GFP, 0 },
	{ "alloc_percpu_gfp GFP_NOWAIT", PCPU_KUNIT_ALLOC_NOWAIT, 0 },
	{ "alloc_percpu_gfp GFP_KERNEL cache line", PCPU_KUNIT_ALLOC_GFP, SMP_CACHE_BYTES },
};

static void pcpu_kunit_alloc_case_desc(const struct pcpu_kunit_alloc_case *c, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%s", c->name);
}

KUNIT_ARRAY_PARAM(pcpu_kunit_alloc, pcpu_kunit_alloc_cases, pcpu_kunit_alloc_case_desc);

static const size_t pcpu_kunit_sizes[] = {
	1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128, 256, 1024, 4096
};

/* alloc_percpu() of a type of each size, with that type's alignment. */
static void __percpu *pcpu_kunit_alloc_typed(size_t size)
{
	switch (size) {
	case 1:
		return alloc_percpu(u8);
	case 2:
		return alloc_percpu(u16);
	case 4:
		return alloc_percpu(u32);
	case 8:
		return alloc_percpu(u64);
	case 12:
		return alloc_percpu(u32[3]);
	case 16:
		return alloc_percpu(u64[2]);
	case 24:
		return alloc_percpu(u64[3]);
	case 32:
		return alloc_percpu(u64[4]);
	case 48:
		return alloc_percpu(u64[6]);
	case 64:
		return alloc_percpu(u64[8]);
	case 128:
		return alloc_percpu(u64[16]);
	case 256:
		return alloc_percpu(u64[32]);
	case 1024:
		return alloc_percpu(u64[128]);
	case 4096:
		return alloc_percpu(u64[512]);
	}
	return NULL;
}

static void __percpu *pcpu_kunit_alloc(const struct pcpu_kunit_alloc_case *c, size_t size)
{
	size_t align = c->align ?: min_t(size_t, size & -size, sizeof(u64));

	switch (c->how) {
	case PCPU_KUNIT_ALLOC_PERCPU:
		return pcpu_kunit_alloc_typed(size);
	case PCPU_KUNIT_ALLOC_SIZE:
		return __alloc_percpu(size, align);
	case PCPU_KUNIT_ALLOC_GFP:
		return __alloc_percpu_gfp(size, align, GFP_KERNEL);
	case PCPU_KUNIT_ALLOC_NOWAIT:
		return __alloc_percpu_gfp(size, align, GFP_NOWAIT);
	}
	return NULL;
}

/*
 * What a case allocates, freed by the suite's exit even when the case
 * stops at a failed assertion.
 */
struct pcpu_kunit_state {
	int n;
	void __percpu *p[PCPU_KUNIT_MAX_OBJS];
};

static int pcpu_kunit_init(struct kunit *test)
{
	test->priv = kunit_kzalloc(test, sizeof(struct pcpu_kunit_state), GFP_KERNEL);
	return test->priv ? 0 : -ENOMEM;
}

static void pcpu_kunit_exit(struct kunit *test)
{
	struct pcpu_kunit_state *st = test->priv;

	while (st && st->n)
		free_percpu(st->p[--st->n]);
}

/* Keep @p for the exit to free; false when it was NULL. */
static bool pcpu_kunit_keep(struct kunit *test, void __percpu *p)
{
	struct pcpu_kunit_state *st = test->priv;

	if (!p)
		return false;
	if (WARN_ON(st->n == PCPU_KUNIT_MAX_OBJS)) {
		free_percpu(p);
		return false;
	}
	st->p[st->n++] = p;
	return true;
}

/*
 * Every size, allocated over and over until the objects spill past the
 * first chunk into later ones: no two CPUs' copies share a line, and each
 * copy sits on its CPU's node.
 */
static void pcpu_kunit_copies_apart_and_local(struct kunit *test)
{
	const struct pcpu_kunit_alloc_case *c = test->param_value;
	struct pcpu_kunit_first_chunk fc;
	struct pcpu_kunit_layout *l;
	struct pcpu_kunit_state *st = test->priv;
	int s, first = 0, later = 0, nowait_failed = 0;
	size_t bytes = 0;

	pcpu_kunit_first_chunk(&fc);
	l = kunit_kzalloc(test, sizeof(*l), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, l);

	for (s = 0; st->n < PCPU_KUNIT_MAX_OBJS; s = (s + 1) % ARRAY_SIZE(pcpu_kunit_sizes)) {
		size_t size = pcpu_kunit_sizes[s];
		void __percpu *p = pcpu_kunit_alloc(c, size);
		char what[96];

		if (!p && c->how == PCPU_KUNIT_ALLOC_NOWAIT) {
			/* GFP_NOWAIT may not grow the area: that is allowed. */
			nowait_failed++;
			if (nowait_failed > 8)
				break;
			continue;
		}
		KUNIT_ASSERT_TRUE_MSG(test, pcpu_kunit_keep(test, p), "%s of %zu bytes failed",
				      c->name, size);
		bytes += size;
		if (pcpu_kunit_in_first_chunk(&fc, p))
			first++;
		else
			later++;
		snprintf(what, sizeof(what), "%s object %d", c->name, st->n);
		pcpu_kunit_read_layout(p, l);
		pcpu_kunit_expect_no_sharing(test, what, l, size);
		pcpu_kunit_expect_on_nodes(test, what, l);
		/* Enough once two objects of every size are in later chunks. */
		if (later >= 2 * ARRAY_SIZE(pcpu_kunit_sizes))
			break;
	}
	kunit_info(test, "%s: %d objects (%zu bytes per CPU): %d in the first chunk, %d in later chunks\n",
		   c->name, st->n, bytes, first, later);
	if (c->how != PCPU_KUNIT_ALLOC_NOWAIT)
		KUNIT_EXPECT_GT_MSG(test, later, 0, "%s never reached a later chunk", c->name);
}

static void pcpu_kunit_expect_stats_apart_and_local(struct kunit *test, const char *what,
						    const void __percpu *p, size_t size)
{
	struct pcpu_kunit_layout *l = kunit_kzalloc(test, sizeof(*l), GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, l);
	pcpu_kunit_read_layout(p, l);
	pcpu_kunit_expect_no_sharing(test, what, l, size);
	pcpu_kunit_expect_on_nodes(test, what, l);
}

/* The loopback device's counters, and a netdev_alloc_pcpu_stats() block. */
static void pcpu_kunit_netdev_stats_apart_and_local(struct kunit *test)
{
#if IS_ENABLED(CONFIG_NET)
	struct net_device *lo = init_net.loopback_dev;
	struct pcpu_sw_netstats __percpu *tstats;

	KUNIT_ASSERT_NOT_NULL_MSG(test, lo, "init_net has no loopback device");
	KUNIT_ASSERT_TRUE_MSG(test, !!lo->lstats, "lo has no per-CPU lstats");
	pcpu_kunit_expect_stats_apart_and_local(test, "lo lstats", lo->lstats,
						sizeof(struct pcpu_lstats));

	tstats = netdev_alloc_pcpu_stats(struct pcpu_sw_netstats);
	KUNIT_ASSERT_TRUE(test, pcpu_kunit_keep(test, tstats));
	pcpu_kunit_expect_stats_apart_and_local(test, "netdev_alloc_pcpu_stats", tstats,
						sizeof(struct pcpu_sw_netstats));
#else
	kunit_skip(test, "CONFIG_NET is off: no loopback device");
#endif
}

/*
 * One counting run: a kthread bound to each online CPU adds
 * PCPU_KUNIT_COUNT to the percpu_counter and to its CPU's copy of @hits.
 */
struct pcpu_kunit_counting {
	struct percpu_counter counter;
	u64 __percpu *hits;
	bool stall;		/* each thread waits to be stopped before it reports */
	atomic_t running;	/* threads yet to report, and 1 while they start */
	atomic_t live;		/* threads that may still touch this context */
	struct completion done;	/* running reached 0 */
	struct task_struct *task[NR_CPUS];	/* held from creation to kthread_stop() */
	struct cpumask started;	/* the CPUs a thread was started on */
	int never_ran;		/* threads stopped before they ran */
	bool timed_out;		/* the threads did not all report in time */
	s64 sum;		/* percpu_counter_sum() once all had exited */
};

/* Sleep until kthread_stop(), which sets the flag and wakes the thread. */
static void pcpu_kunit_sleep_until_stopped(void)
{
	set_current_state(TASK_INTERRUPTIBLE);
	while (!kthread_should_stop()) {
		schedule();
		set_current_state(TASK_INTERRUPTIBLE);
	}
	__set_current_state(TASK_RUNNING);
}

static int pcpu_kunit_count_fn(void *data)
{
	struct pcpu_kunit_counting *ctx = data;
	bool stall = ctx->stall;
	int i;

	for (i = 0; i < PCPU_KUNIT_COUNT && !kthread_should_stop(); i++) {
		percpu_counter_add(&ctx->counter, 1);
		this_cpu_inc(*ctx->hits);
		if (!(i & 1023))
			cond_resched();
	}
	/* A stalled thread touches the context again only once stopped. */
	if (stall)
		pcpu_kunit_sleep_until_stopped();
	if (atomic_dec_and_test(&ctx->running))
		complete(&ctx->done);
	atomic_dec(&ctx->live);	/* the last access to ctx */
	return 0;	/* so that -EINTR from kthread_stop() means it never ran */
}

/*
 * Count from a kthread bound to each online CPU, and wait up to @timeout
 * jiffies for all of them to report; with @stall, each waits to be
 * stopped before it reports, so the wait times out. Whatever the wait's
 * outcome, every thread has been stopped and has exited, and the counter
 * has been destroyed, when this returns: nothing uses the context any
 * more, and KUnit may free it at the end of the case.
 */
static struct pcpu_kunit_counting *pcpu_kunit_count(struct kunit *test, bool stall,
						    unsigned long timeout)
{
	struct pcpu_kunit_counting *ctx;
	int cpu;

	ctx = kunit_kzalloc(test, sizeof(*ctx), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ctx);
	ctx->hits = alloc_percpu(u64);
	KUNIT_ASSERT_TRUE(test, pcpu_kunit_keep(test, ctx->hits));
	/* The last assertion: once a thread runs, the case must not end early. */
	KUNIT_ASSERT_EQ(test, percpu_counter_init(&ctx->counter, 0, GFP_KERNEL), 0);
	ctx->stall = stall;
	init_completion(&ctx->done);
	atomic_set(&ctx->running, 1);

	cpus_read_lock();
	for_each_online_cpu(cpu) {
		struct task_struct *t = kthread_create_on_cpu(pcpu_kunit_count_fn, ctx, cpu,
							      "kunit-pcpu/%u");

		if (IS_ERR(t)) {
			KUNIT_FAIL(test, "no kthread on CPU %d: %ld", cpu, PTR_ERR(t));
			continue;
		}
		/* kthread_stop() needs the task even once the thread has exited. */
		get_task_struct(t);
		ctx->task[cpu] = t;
		cpumask_set_cpu(cpu, &ctx->started);
		atomic_inc(&ctx->running);
		atomic_inc(&ctx->live);
		wake_up_process(t);
	}
	cpus_read_unlock();
	if (atomic_dec_and_test(&ctx->running))
		complete(&ctx->done);
	ctx->timed_out = !wait_for_completion_timeout(&ctx->done, timeout);

	for_each_cpu(cpu, &ctx->started) {
		if (kthread_stop(ctx->task[cpu]) == -EINTR) {
			/* Stopped before it first ran: it will never report. */
			ctx->never_ran++;
			atomic_dec(&ctx->running);
			atomic_dec(&ctx->live);
		}
		put_task_struct(ctx->task[cpu]);
		ctx->task[cpu] = NULL;
	}
	ctx->sum = percpu_counter_sum(&ctx->counter);
	percpu_counter_destroy(&ctx->counter);
	return ctx;
}

/* Whether percpu_counter_destroy() has freed the counter's percpu part. */
static bool pcpu_kunit_counter_destroyed(const struct percpu_counter *fbc)
{
#ifdef CONFIG_SMP
	return !fbc->counters;
#else
	return true;	/* a UP counter has nothing to free */
#endif
}

/* Concurrent adds from a kthread bound to every online CPU lose nothing. */
static void pcpu_kunit_counters_are_exact(struct kunit *test)
{
	struct pcpu_kunit_counting *ctx;
	u64 total = 0;
	int cpu, n;

	ctx = pcpu_kunit_count(test, false, PCPU_KUNIT_WAIT_S * HZ);
	if (ctx->timed_out) {
		KUNIT_FAIL(test, "counting threads did not finish in %d s", PCPU_KUNIT_WAIT_S);
		return;
	}

	n = cpumask_weight(&ctx->started);
	for_each_possible_cpu(cpu) {
		u64 v = *per_cpu_ptr(ctx->hits, cpu);

		total += v;
		if (cpumask_test_cpu(cpu, &ctx->started))
			KUNIT_EXPECT_EQ_MSG(test, v, (u64)PCPU_KUNIT_COUNT,
					    "CPU %d counted %llu of its %d increments", cpu, v,
					    PCPU_KUNIT_COUNT);
	}
	KUNIT_EXPECT_EQ(test, total, (u64)n * PCPU_KUNIT_COUNT);
	KUNIT_EXPECT_EQ(test, ctx->sum, (s64)n * PCPU_KUNIT_COUNT);
	kunit_info(test, "%d CPUs x %d increments: this_cpu_inc total %llu, percpu_counter_sum %lld\n",
		   n, PCPU_KUNIT_COUNT, total, ctx->sum);
}

/*
 * Threads that do not report in time: with every thread stalled, the wait
 * times out, and still no thread outlives the run, nor the counter.
 */
static void pcpu_kunit_counting_timeout_stops_threads(struct kunit *test)
{
	struct pcpu_kunit_counting *ctx;
	int n, live;

	ctx = pcpu_kunit_count(test, true, msecs_to_jiffies(PCPU_KUNIT_STALL_MS));
	n = cpumask_weight(&ctx->started);
	live = atomic_read(&ctx->live);
	KUNIT_EXPECT_GT(test, n, 0);
	KUNIT_EXPECT_TRUE_MSG(test, ctx->timed_out,
			      "the wait for %d stalled threads did not time out", n);
	KUNIT_EXPECT_EQ_MSG(test, live, 0, "%d of %d threads still run after the timeout",
			    live, n);
	KUNIT_EXPECT_EQ(test, atomic_read(&ctx->running), 0);
	if (!pcpu_kunit_counter_destroyed(&ctx->counter)) {
		KUNIT_FAIL(test, "the percpu_counter is still live after the timeout");
		/* Not for KUnit to free while it is on the CPU hotplug list. */
		percpu_counter_destroy(&ctx->counter);
	}
	kunit_info(test, "%d threads stalled past a %d ms wait: %d stopped before they ran, %d still live\n",
		   n, PCPU_KUNIT_STALL_MS, ctx->never_ran, live);
}

static struct kunit_case pcpu_kunit_checker_cases[] = {
	KUNIT_CASE(pcpu_kunit_checker_flags_2008_layout),
	KUNIT_CASE(pcpu_kunit_checker_flags_straddling),
	KUNIT_CASE(pcpu_kunit_checker_passes_units),
	KUNIT_CASE(pcpu_kunit_checker_flags_misplaced),
	{}
};

static struct kunit_suite pcpu_kunit_checker_suite = {
	.name = "percpu_locality_checker",
	.test_cases = pcpu_kunit_checker_cases,
};

static struct kunit_case pcpu_kunit_locality_cases[] = {
	KUNIT_CASE(pcpu_kunit_first_chunk_on_nodes),
	KUNIT_CASE_PARAM(pcpu_kunit_copies_apart_and_local, pcpu_kunit_alloc_gen_params),
	KUNIT_CASE(pcpu_kunit_netdev_stats_apart_and_local),
	KUNIT_CASE(pcpu_kunit_counters_are_exact),
	KUNIT_CASE(pcpu_kunit_counting_timeout_stops_threads),
	{}
};

static struct kunit_suite pcpu_kunit_locality_suite = {
	.name = "percpu_locality",
	.init = pcpu_kunit_init,
	.exit = pcpu_kunit_exit,
	.test_cases = pcpu_kunit_locality_cases,
};

kunit_test_suites(&pcpu_kunit_checker_suite, &pcpu_kunit_locality_suite);
