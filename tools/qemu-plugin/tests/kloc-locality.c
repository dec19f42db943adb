// SPDX-License-Identifier: GPL-2.0
/*
 * A guest program for the kloc-count plugin's tests, run as /init's test
 * in a 2-node guest. Inside marked windows it does:
 *
 *   phase 1  on a CPU of node 1, sweep a buffer bound to node 0 (mbind)
 *   phase 2  on the same CPU, sweep a buffer bound to node 1
 *   phase 3  one thread per CPU (up to 4), each incrementing its own
 *            counter, the counters 8 bytes apart (one cache line)
 *   phase 4  the same, 64 bytes apart (a line each)
 *   phase 5  on CPU 0, a loop of two instructions an iteration, inside one
 *            asm statement with both markers: exactly 2 * iters user
 *            instructions
 *   phase 6  one thread per CPU, all adding atomically to one counter
 *            (true sharing: the same bytes, which is not false sharing)
 *   phase 7  two threads, on CPU 0 and on a CPU of node 1: one increments
 *            an 8-byte counter that straddles two pages (the first bound to
 *            node 0, the second to node 1, so never physically adjacent),
 *            the other a counter 8 bytes into the second page: false
 *            sharing, on the second page's first line, that only a plugin
 *            looking up the second page's own address sees
 *   phase 8  on a CPU of node 1, read one word a cache line of a 4 MiB
 *            buffer bound to node 0, twice: four times the plugin's modelled
 *            cache (1 MiB), so every line misses on both passes, remotely
 *   phase 9  read-write false sharing: a thread on CPU 0 increments bytes
 *            0..7 of a line while one on a CPU of node 1 reads bytes 32..39
 *   phase 10 the same loop at once on CPU 0 and on a CPU of node 1, the
 *            second running it three times as long: their user
 *            instructions are in the ratio 1:3 exactly (ratio_*), and the
 *            other CPUs run none (which vCPU ran each block, whoever
 *            translated it)
 *
 * and writes what it did as one JSON line to the file given with -j.
 * Static, no libnuma: mbind and get_mempolicy are raw syscalls.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../kloc-marker.h"

#define MPOL_BIND 2
#define MPOL_F_NODE 1
#define MPOL_F_ADDR 2
#define BUF_BYTES (1 << 20)
#define BIG_BYTES (4 << 20)	/* phase 8: four times the modelled cache */
#define MAX_THREADS 4

static long iters = 200000;
static int passes = 4;
static uint64_t sink;

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static int first_cpu_of_node(int node)
{
	char path[64];
	FILE *f;
	int cpu = -1;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &cpu) != 1)
		cpu = -1;
	fclose(f);
	return cpu;
}

/* A buffer of bytes whose pages the kernel must take from node; faulted in here. */
static uint64_t *bound_buffer(int node, size_t bytes, int *got_node)
{
	unsigned long mask = 1UL << node;
	uint64_t *b = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int where = -1;

	if (b == MAP_FAILED)
		return NULL;
	if (syscall(SYS_mbind, b, bytes, MPOL_BIND, &mask, 8 * sizeof(mask), 0)) {
		fprintf(stderr, "mbind to node %d: %s\n", node, strerror(errno));
		return NULL;
	}
	memset(b, 1, bytes);
	if (syscall(SYS_get_mempolicy, &where, NULL, 0, b, MPOL_F_NODE | MPOL_F_ADDR))
		where = -1;
	*got_node = where;
	return b;
}

static void sweep(uint64_t *b)
{
	for (int p = 0; p < passes; p++) {
		for (size_t i = 0; i < BUF_BYTES / sizeof(*b); i++)
			b[i] += i;
		__asm__ __volatile__("" : : : "memory");
	}
	sink += b[1];
}

/* Phase 8: one load a 64-byte line, passes times over bytes of b. */
static void read_lines(const volatile uint64_t *b, size_t bytes, int passes)
{
	uint64_t sum = 0;

	for (int p = 0; p < passes; p++)
		for (size_t i = 0; i < bytes / sizeof(*b); i += 64 / sizeof(*b))
			sum += b[i];
	sink += sum;
}

struct worker {
	pthread_t thread;
	volatile uint64_t *slot;
	int cpu;
	int shared;		/* every thread adds to the same counter */
	int unaligned;		/* slot is not 8-byte aligned */
	int reader;		/* only reads slot */
	uint64_t result;	/* the reader's sum */
};

static atomic_int ready, go;

static void *work(void *arg)
{
	struct worker *w = arg;

	pin(w->cpu);
	atomic_fetch_add(&ready, 1);
	while (!atomic_load(&go))
		sched_yield();
	if (w->reader) {
		uint64_t sum = 0;

		for (long i = 0; i < iters; i++)
			sum += *w->slot;
		w->result = sum;
	} else if (w->shared) {
		for (long i = 0; i < iters; i++)
			__atomic_fetch_add(w->slot, 1, __ATOMIC_RELAXED);
	} else if (w->unaligned) {
		/* one 8-byte load and one 8-byte store, wherever slot is */
		for (long i = 0; i < iters; i++) {
			uint64_t v;

			memcpy(&v, (void *)w->slot, sizeof(v));
			v++;
			memcpy((void *)w->slot, &v, sizeof(v));
			__asm__ __volatile__("" : : : "memory");
		}
	} else {
		for (long i = 0; i < iters; i++)
			(*w->slot)++;
	}
	return NULL;
}

/* Start the workers' threads, and count, in window phase, while they run. */
static void run_workers(unsigned int phase, struct worker *w, int n)
{
	atomic_store(&ready, 0);
	atomic_store(&go, 0);
	for (int i = 0; i < n; i++)
		pthread_create(&w[i].thread, NULL, work, &w[i]);
	while (atomic_load(&ready) < n)
		sched_yield();
	kloc_mark_start(phase);
	atomic_store(&go, 1);
	for (int i = 0; i < n; i++)
		pthread_join(w[i].thread, NULL);
	kloc_mark_end(phase);
}

/*
 * Returns 0 when every counter reached iters (stride 0: the one counter
 * reached nthreads * iters).
 */
static int contend(unsigned int phase, size_t stride, int nthreads)
{
	static uint64_t slots[MAX_THREADS * 8] __attribute__((aligned(64)));
	struct worker w[MAX_THREADS];
	int bad = 0;

	memset(slots, 0, sizeof(slots));
	memset(w, 0, sizeof(w));
	for (int i = 0; i < nthreads; i++) {
		w[i].slot = &slots[i * stride / sizeof(uint64_t)];
		w[i].cpu = i;
		w[i].shared = !stride;
	}
	run_workers(phase, w, nthreads);
	if (!stride)
		return slots[0] != (uint64_t)nthreads * (uint64_t)iters;
	for (int i = 0; i < nthreads; i++)
		bad |= *w[i].slot != (uint64_t)iters;
	return bad;
}

/*
 * Phase 7: a counter across the boundary of two pages bound to different
 * nodes, and another on the second page's first line. Returns 0 when both
 * reached iters.
 */
static int page_cross(unsigned int phase, int cpu1)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long node0 = 1UL << 0, node1 = 1UL << 1;
	struct worker w[2];
	uint64_t a, b;
	char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED ||
	    syscall(SYS_mbind, p, page, MPOL_BIND, &node0, 8 * sizeof(node0), 0) ||
	    syscall(SYS_mbind, p + page, page, MPOL_BIND, &node1, 8 * sizeof(node1), 0)) {
		fprintf(stderr, "page_cross: %s\n", strerror(errno));
		return 1;
	}
	memset(p, 0, 2 * page);
	memset(w, 0, sizeof(w));
	w[0].slot = (volatile uint64_t *)(p + page - 4);	/* bytes 0..3 of page 2 */
	w[0].unaligned = 1;
	w[0].cpu = 0;
	w[1].slot = (volatile uint64_t *)(p + page + 8);	/* bytes 8..15 of page 2 */
	w[1].cpu = cpu1;
	run_workers(phase, w, 2);
	memcpy(&a, p + page - 4, sizeof(a));
	memcpy(&b, p + page + 8, sizeof(b));
	munmap(p, 2 * page);
	return a != (uint64_t)iters || b != (uint64_t)iters;
}

/*
 * Phase 9: a writer on CPU 0 (bytes 0..7 of a line) and a reader on cpu1
 * (bytes 32..39). Returns 0 when the writer's counter reached iters.
 */
static int read_write(unsigned int phase, int cpu1)
{
	static uint64_t line[8] __attribute__((aligned(64)));
	struct worker w[2];

	memset(line, 0, sizeof(line));
	memset(w, 0, sizeof(w));
	w[0].slot = &line[0];
	w[0].cpu = 0;
	w[1].slot = &line[4];
	w[1].cpu = cpu1;
	w[1].reader = 1;
	run_workers(phase, w, 2);
	return line[0] != (uint64_t)iters;
}

/*
 * Phase 5: the markers and the loop in one asm statement, so that the
 * compiler puts nothing of its own in the window: it holds exactly 2 * n
 * instructions (n > 0), none of which touches memory.
 */
static void exact_loop(long n)
{
#if defined(__x86_64__)
	__asm__ __volatile__(".byte 0x0f, 0x1f, 0x80\n\t.long %c1\n"
			     "1:\tdec %0\n\tjnz 1b\n\t"
			     ".byte 0x0f, 0x1f, 0x80\n\t.long %c2"
			     : "+r" (n)
			     : "i" (KLOC_MARK_IMM_X86(KLOC_MARK_KIND_START, 5)),
			       "i" (KLOC_MARK_IMM_X86(KLOC_MARK_KIND_END, 5))
			     : "cc", "memory");
#elif defined(__aarch64__)
	__asm__ __volatile__(".inst 0xd2e0001f | (%c1 << 5)\n"
			     "1:\tsubs %0, %0, #1\n\tb.ne 1b\n\t"
			     ".inst 0xd2e0001f | (%c2 << 5)"
			     : "+r" (n)
			     : "i" (KLOC_MARK_IMM_A64(KLOC_MARK_KIND_START, 5)),
			       "i" (KLOC_MARK_IMM_A64(KLOC_MARK_KIND_END, 5))
			     : "cc", "memory");
#else
	(void)n;
#endif
}

/*
 * Phase 10, in assembly so that every instruction in the window is known.
 * ratio_main() runs on CPU 0: its start marker, a futex wake of the
 * waiting thread, kloc_spin(n), a futex wait for that thread's exit (the
 * kernel clears and wakes its tid), its end marker. The thread, cloned
 * beforehand and asleep in a futex wait on its CPU, wakes, runs
 * kloc_spin(3n + 11) and exits. One loop, one address, run by both vCPUs
 * in the one window. Strictly between the markers:
 *   ratio_main:  syscall; mov; call; 2n + ret; 4 or 5 to wait; syscall
 *                = 2n + 9 on both architectures
 *   the thread:  mov; call; 2(3n + 11) + ret; mov; syscall
 *                = 6n + 27 = 3 (2n + 9)
 */
#define RATIO_PHASE 10
#define RATIO_MAIN_EXTRA 9	/* ratio_main's instructions besides its loop */
#define RATIO_CHILD_TURNS(n) (3 * (n) + 11)
#define RATIO_START_X86 0x4b4c010a
#define RATIO_END_X86 0x4b4c020a
#define RATIO_START_A64 0xb10a
#define RATIO_END_A64 0xb20a
#define STR_(x) #x
#define STR(x) STR_(x)

static_assert(RATIO_START_X86 == KLOC_MARK_IMM_X86(KLOC_MARK_KIND_START, RATIO_PHASE) &&
	      RATIO_END_X86 == KLOC_MARK_IMM_X86(KLOC_MARK_KIND_END, RATIO_PHASE) &&
	      RATIO_START_A64 == KLOC_MARK_IMM_A64(KLOC_MARK_KIND_START, RATIO_PHASE) &&
	      RATIO_END_A64 == KLOC_MARK_IMM_A64(KLOC_MARK_KIND_END, RATIO_PHASE),
	      "phase 10's markers");

struct ratio_arg {
	int go;			/* never changes: a futex to wait on */
	long turns;		/* offset 8 */
	struct timespec timeout;	/* offset 16: a lost wake-up ends, late */
};

void ratio_main(int *go, volatile int *tid, long tid_value, long n);
int ratio_thread(void *arg);

#if defined(__x86_64__)
__asm__(".text\n"
	".type kloc_spin, @function\n"
	"kloc_spin:\n"			/* rdi = n > 0 */
	"1:\tdec %rdi\n\tjnz 1b\n\tret\n"
	".globl ratio_main\n.type ratio_main, @function\n"
	"ratio_main:\n\t"		/* rdi go, rsi tid, rdx its value, rcx n */
	"push %rbx\n\tmov %rcx, %rbx\n\tmov %rsi, %r8\n\tmov %rdx, %r9\n\t"
	"xor %r10d, %r10d\n\t"
	"mov $" STR(SYS_futex) ", %eax\n\tmov $" STR(FUTEX_WAKE_PRIVATE) ", %esi\n\t"
	"mov $1, %edx\n\t"
	".byte 0x0f, 0x1f, 0x80\n\t.long " STR(RATIO_START_X86) "\n\t"
	"syscall\n\t"
	"mov %rbx, %rdi\n\tcall kloc_spin\n\t"
	"mov $" STR(SYS_futex) ", %eax\n\tmov %r8, %rdi\n\t"
	"mov $" STR(FUTEX_WAIT) ", %esi\n\tmov %r9, %rdx\n\t"
	"syscall\n\t"
	".byte 0x0f, 0x1f, 0x80\n\t.long " STR(RATIO_END_X86) "\n\t"
	"pop %rbx\n\tret\n"
	".globl ratio_thread\n.type ratio_thread, @function\n"
	"ratio_thread:\n\t"		/* rdi = struct ratio_arg *; never returns */
	"mov 8(%rdi), %rbx\n\tlea 16(%rdi), %r10\n\t"
	"mov $" STR(SYS_futex) ", %eax\n\tmov $" STR(FUTEX_WAIT_PRIVATE) ", %esi\n\t"
	"xor %edx, %edx\n\t"
	"syscall\n\t"
	"mov %rbx, %rdi\n\tcall kloc_spin\n\t"
	"mov $" STR(SYS_exit) ", %eax\n\tsyscall\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".type kloc_spin, %function\n"
	"kloc_spin:\n"			/* x0 = n > 0 */
	"1:\tsubs x0, x0, #1\n\tb.ne 1b\n\tret\n"
	".globl ratio_main\n.type ratio_main, %function\n"
	"ratio_main:\n\t"		/* x0 go, x1 tid, x2 its value, x3 n */
	"stp x29, x30, [sp, #-16]!\n\tmov x9, x1\n\tmov x10, x2\n\tmov x11, x3\n\t"
	"mov x8, #" STR(SYS_futex) "\n\tmov x1, #" STR(FUTEX_WAKE_PRIVATE) "\n\t"
	"mov x2, #1\n\t"
	".inst 0xd2e0001f | (" STR(RATIO_START_A64) " << 5)\n\t"
	"svc #0\n\t"
	"mov x0, x11\n\tbl kloc_spin\n\t"
	"mov x0, x9\n\tmov x1, #" STR(FUTEX_WAIT) "\n\tmov x2, x10\n\tmov x3, #0\n\t"
	"svc #0\n\t"
	".inst 0xd2e0001f | (" STR(RATIO_END_A64) " << 5)\n\t"
	"ldp x29, x30, [sp], #16\n\tret\n"
	".globl ratio_thread\n.type ratio_thread, %function\n"
	"ratio_thread:\n\t"		/* x0 = struct ratio_arg *; never returns */
	"ldr x9, [x0, #8]\n\tadd x3, x0, #16\n\t"
	"mov x8, #" STR(SYS_futex) "\n\tmov x1, #" STR(FUTEX_WAIT_PRIVATE) "\n\t"
	"mov x2, #0\n\t"
	"svc #0\n\t"
	"mov x0, x9\n\tbl kloc_spin\n\t"
	"mov x8, #" STR(SYS_exit) "\n\tsvc #0\n");
#endif

/* A thread's state letter in /proc (S: asleep, here in its futex wait). */
static char task_state(int tid)
{
	char path[64], buf[512], *p;
	size_t len;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/*
 * Phase 10 (see above): this thread on CPU 0 with n turns, a thread cloned
 * onto cpu1 with 3n + 11. Returns 0 when the thread ran and exited.
 */
static int ratio(int cpu1, long n)
{
	static struct ratio_arg arg;
	static volatile int tid;
	const size_t stack_bytes = 64 << 10;
	char *stack;
	cpu_set_t set;
	int got, waits = 0;

	if (n <= 0 || pin(0))
		return 1;
	stack = mmap(NULL, stack_bytes, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		return 1;
	arg = (struct ratio_arg){ .turns = RATIO_CHILD_TURNS(n), .timeout = { 5, 0 } };
	got = clone(ratio_thread, stack + stack_bytes,
		    CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
		    CLONE_SYSVSEM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID,
		    &arg, (int *)&tid, NULL, (int *)&tid);
	if (got < 0) {
		fprintf(stderr, "ratio: clone: %s\n", strerror(errno));
		return 1;
	}
	CPU_ZERO(&set);
	CPU_SET(cpu1, &set);
	if (sched_setaffinity(got, sizeof(set), &set))
		fprintf(stderr, "ratio: cannot move thread %d to CPU %d\n", got, cpu1);
	/* asleep in its futex wait before the window opens: nothing of it runs */
	while (task_state(got) != 'S' && waits++ < 10000)
		usleep(1000);
	ratio_main(&arg.go, &tid, got, n);
	if (tid)
		return 1;
	munmap(stack, stack_bytes);
	return 0;
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	int opt, cpu1, remote_node = -1, local_node = -1, nthreads;
	int bad_packed, bad_padded, bad_shared, bad_cross, bad_rw, bad_ratio = 0;
	int big_node = -1;
	uint64_t *remote, *local, *big;
	FILE *f;

	while ((opt = getopt(argc, argv, "n:p:j:")) != -1) {
		switch (opt) {
		case 'n':
			iters = atol(optarg);
			break;
		case 'p':
			passes = atoi(optarg);
			break;
		case 'j':
			json = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s [-n iters] [-p passes] [-j file]\n", argv[0]);
			return 2;
		}
	}
	cpu1 = first_cpu_of_node(1);
	if (cpu1 < 0) {
		fprintf(stderr, "no node 1 in /sys/devices/system/node\n");
		return 1;
	}
	if (pin(cpu1)) {
		fprintf(stderr, "cannot run on CPU %d\n", cpu1);
		return 1;
	}
	remote = bound_buffer(0, BUF_BYTES, &remote_node);
	local = bound_buffer(1, BUF_BYTES, &local_node);
	big = bound_buffer(0, BIG_BYTES, &big_node);
	if (!remote || !local || !big)
		return 1;

	kloc_mark_start(1);
	sweep(remote);
	kloc_mark_end(1);

	kloc_mark_start(2);
	sweep(local);
	kloc_mark_end(2);

	nthreads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;
	bad_packed = contend(3, 8, nthreads);
	bad_padded = contend(4, 64, nthreads);
	bad_shared = contend(6, 0, nthreads);
	bad_cross = page_cross(7, cpu1);
	bad_rw = read_write(9, cpu1);

	pin(cpu1);
	kloc_mark_start(8);
	read_lines(big, BIG_BYTES, 2);
	kloc_mark_end(8);

	pin(0);
	if (iters > 0) {
		exact_loop(iters);
		bad_ratio = ratio(cpu1, iters);
	}

	f = json ? fopen(json, "w") : stdout;
	if (!f)
		return 1;
	fprintf(f, "{\"cpu\": %d, \"remote_buffer_node\": %d, \"local_buffer_node\": %d, "
		"\"threads\": %d, \"iters\": %ld, \"passes\": %d, \"buffer_bytes\": %d, "
		"\"big_buffer_bytes\": %d, \"big_buffer_node\": %d, "
		"\"counters_exact\": %s, \"ratio_cpus\": [0, %d], "
		"\"ratio_insns\": [%ld, %ld], \"ratio_ran\": %s, \"sink\": %llu}\n",
		cpu1, remote_node, local_node, nthreads, iters, passes, BUF_BYTES, BIG_BYTES,
		big_node,
		bad_packed || bad_padded || bad_shared || bad_cross || bad_rw ? "false" : "true",
		cpu1, 2 * iters + RATIO_MAIN_EXTRA, 2 * RATIO_CHILD_TURNS(iters) + 5,
		bad_ratio ? "false" : "true", (unsigned long long)sink);
	if (f != stdout)
		fclose(f);
	return bad_packed || bad_padded || bad_shared || bad_cross || bad_rw || bad_ratio ||
	       remote_node != 0 || local_node != 1 || big_node != 0;
}
