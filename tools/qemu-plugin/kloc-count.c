// SPDX-License-Identifier: GPL-2.0
/*
 * kloc-count: a QEMU TCG plugin that counts, per vCPU, inside windows the
 * guest marks (kloc-marker.h): instructions (kernel and user apart, by the
 * top bit of the virtual address), loads and stores, accesses to memory on
 * the vCPU's own NUMA node and on other nodes, and (kloc-model.c) what a
 * model of private caches makes of those accesses. At exit it writes one
 * JSON file. This half: the arguments, the running vCPU, the markers and
 * their windows, the instructions, the accesses' nodes, and the JSON.
 * docs/counting.md says how it counts and what the figures stand for;
 * tools/qemu-plugin/README.md gives the arguments and the JSON.
 *
 * Threads: a vCPU's counts are written only by the thread running it; the
 * windows (which phase is open, each vCPU's totals at its start) change
 * under win_lock, taken by markers and at exit; the register cross-check's
 * lookups have check_lock, vCPU init thread_lock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <glib.h>
#include <qemu-plugin.h>

#include "kloc-count.h"
#include "kloc-marker.h"

#ifndef KLOC_QEMU_HEADER
#define KLOC_QEMU_HEADER "unknown"
#endif

#define KLOC_COUNT_VERSION "3.1"
#define MIN_PAGE 4096U		/* an access's two halves are looked up apart */

#ifdef KLOC_TEST
#include "kloc-test.h"
#endif

/* Scoreboards came with plugin API 2 (QEMU 9.0); resets tried on QEMU 10.0 (API 4). */
#if QEMU_PLUGIN_VERSION >= 2
#define KLOC_INLINE 1
#else
#define KLOC_INLINE 0
#endif

_Static_assert(sizeof(void *) == 8, "kloc-count needs a 64-bit host");

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* A vCPU as the counting sees it. */
struct vcpu {
	struct counts ph[KLOC_MARK_PHASE_COUNT];
	uint64_t insns[2];	/* user, kernel instructions of the TBs it ran, by callback */
	uint64_t start[2];	/* its user, kernel totals when the window opened */
	pthread_t thread;
	bool seen;
	/* the callbacks that asked while it ran, and those QEMU gave another index */
	uint64_t callbacks, index_wrong;
} __attribute__((aligned(64)));

/* The arguments' defaults (the table at the end of the file sets them). */
static struct kloc_config cfg = {
	.top_n = 20,
	.pcs_n = PC_SLOTS,
	.lines_max = 100000,
	.cache_bytes = 1U << 20,	/* a server core's private L2: 1 MiB, */
	.assoc = 16,			/* 16-way, */
	.line_bytes = 64,		/* 64-byte lines */
	.coherence = true,
};

static struct vcpu *vcpus;
static int nvcpus;
static const char *target;
static int api_min, api_cur;

static pthread_mutex_t win_lock = PTHREAD_MUTEX_INITIALIZER;
static int active_phase = -1;	/* atomic; changes under win_lock */
static uint64_t windows[KLOC_MARK_PHASE_COUNT];
static uint64_t unmatched_ends, nested_starts;
static uint64_t bad_markers;	/* atomic */

void plugin_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("kloc-count: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/*
 * The running vCPU, from QEMU's current_cpu (docs/counting.md, "Which vCPU ran it").
 * cpu_states[i] is qemu_get_cpu(i): learnt at vCPU init, and again when a
 * callback finds a CPU it does not know. current_cpu is thread-local:
 * resolved on each thread that runs callbacks, for that thread's copy.
 */
static void *(*qemu_get_cpu_fn)(int index);
static void *cpu_states[MAX_VCPUS];	/* atomic */
static __thread void **current_cpu_slot;
static uint64_t index_unresolved;	/* atomic: callbacks whose vCPU was not found */

static void learn_cpus(void)
{
	for (int i = 0; i < nvcpus; i++)
		__atomic_store_n(&cpu_states[i], qemu_get_cpu_fn(i), RELAXED);
}

/* The index of the vCPU running this callback; passed: the one QEMU gave it. */
static unsigned int running_vcpu(unsigned int passed)
{
	void *cpu;

	if (!qemu_get_cpu_fn)
		return passed;
	if (!current_cpu_slot)
		current_cpu_slot = dlsym(RTLD_DEFAULT, "current_cpu");
	if (current_cpu_slot) {
		cpu = *current_cpu_slot;
		if (passed < (unsigned int)nvcpus &&
		    __atomic_load_n(&cpu_states[passed], RELAXED) == cpu && cpu) {
			vcpus[passed].callbacks++;
			return passed;
		}
		for (int pass = 0; cpu && pass < 2; pass++) {
			for (int i = 0; i < nvcpus; i++) {
				if (__atomic_load_n(&cpu_states[i], RELAXED) != cpu)
					continue;
				vcpus[i].callbacks++;
				vcpus[i].index_wrong += (unsigned int)i != passed;
				return (unsigned int)i;
			}
			if (!pass)
				learn_cpus();
		}
	}
	__atomic_fetch_add(&index_unresolved, 1, RELAXED);
	return passed < (unsigned int)nvcpus ? passed : 0;
}

/* At load: QEMU's running-vCPU pointer, and its index lookup, or a refusal. */
static void find_current_cpu(void)
{
	void *get = dlsym(RTLD_DEFAULT, "qemu_get_cpu");

	if (get && dlsym(RTLD_DEFAULT, "current_cpu")) {
		qemu_get_cpu_fn = (void *(*)(int))get;
		return;
	}
	if (nvcpus > 1 && api_cur < 4)
		plugin_err("this QEMU exports no %s: the per-vCPU figures use the index QEMU passes each callback, which before plugin API 4 (QEMU 10.0) is the running vCPU's",
			   get ? "current_cpu" : "qemu_get_cpu");
	else if (nvcpus > 1)
		plugin_err("this QEMU exports no %s: where vCPUs share a thread (icount, thread=single) the per-vCPU figures are refused, not guessed",
			   get ? "current_cpu" : "qemu_get_cpu");
}

/*
 * The cross-check (plugin API 4 on): the guest's per-CPU base register at
 * the start of each block inside a window, looked up in the guest's
 * __per_cpu_offset[] (percpu=), whose position is the running vCPU's.
 */
#if QEMU_PLUGIN_VERSION >= 4
#define KLOC_REGCHECK 1
#else
#define KLOC_REGCHECK 0
#endif

static bool percpu_read;	/* atomic; percpu_base holds the guest's */
static const char *base_reg_names[2];
static uint64_t check_blocks, check_agree, check_disagree, check_unmapped,
		check_pending;	/* atomic */

#if KLOC_REGCHECK
static uint64_t percpu_base[MAX_VCPUS];
static int base_regs_state;	/* atomic; 0: not looked for, 1: found, -1: none */
static struct qemu_plugin_register *base_regs[2];
/*
 * Made at load, freed at exit: reg_bufs[i] is used by the thread running vCPU i,
 * percpu_buf under check_lock. No buffer is made or freed in a callback.
 */
static GByteArray *reg_bufs[MAX_VCPUS];
static GByteArray *percpu_buf;
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;

static void check_bufs_new(void)
{
	for (int i = 0; i < nvcpus; i++)
		reg_bufs[i] = g_byte_array_sized_new(64);
	percpu_buf = g_byte_array_sized_new(8 * (guint)nvcpus);
}

static void check_bufs_free(void)
{
	for (int i = 0; i < MAX_VCPUS; i++) {
		if (reg_bufs[i])
			g_byte_array_free(reg_bufs[i], TRUE);
		reg_bufs[i] = NULL;
	}
	if (percpu_buf)
		g_byte_array_free(percpu_buf, TRUE);
	percpu_buf = NULL;
}

/* The registers that hold the guest's per-CPU base: x86_64 two, arm64 one. */
static bool find_base_regs(void)
{
	static const char * const x86[] = { "gs_base", "k_gs_base" };
	static const char * const a64[] = { "TPIDR_EL1", NULL };
	const char * const *want = target[0] == 'x' ? x86 : a64;
	int state = __atomic_load_n(&base_regs_state, __ATOMIC_ACQUIRE);
	GArray *regs;

	if (state)
		return state > 0;
	pthread_mutex_lock(&check_lock);
	if (!base_regs_state) {
		regs = qemu_plugin_get_registers();
		for (int k = 0; k < 2 && want[k]; k++) {
			for (guint i = 0; regs && i < regs->len; i++) {
				qemu_plugin_reg_descriptor *d =
					&g_array_index(regs, qemu_plugin_reg_descriptor, i);

				if (!strcasecmp(d->name, want[k])) {
					base_regs[k] = d->handle;
					base_reg_names[k] = want[k];
				}
			}
		}
		if (regs)
			g_array_free(regs, TRUE);
		__atomic_store_n(&base_regs_state, base_regs[0] ? 1 : -1, __ATOMIC_RELEASE);
		if (!base_regs[0])
			plugin_err("no %s register in this QEMU: no register cross-check of the running vCPU",
				   want[0]);
	}
	pthread_mutex_unlock(&check_lock);
	return base_regs[0];
}

/* A register of the running vCPU @vi, through its buffer. */
static bool read_u64_reg(unsigned int vi, struct qemu_plugin_register *reg, uint64_t *val)
{
	GByteArray *buf = reg_bufs[vi];

	g_byte_array_set_size(buf, 0);
	if (qemu_plugin_read_register(reg, buf) != 8 || buf->len != 8)
		return false;
	memcpy(val, buf->data, 8);	/* the guest's byte order: little-endian */
	return true;
}

/*
 * __per_cpu_offset[], once the running vCPU's page tables map it: read and
 * published once, under check_lock. percpu_base is written only before
 * percpu_read is set, and read (unlocked, by vcpu_of_base()) only after.
 */
static bool read_percpu(void)
{
	bool ok;

	if (__atomic_load_n(&percpu_read, __ATOMIC_ACQUIRE))
		return true;
	pthread_mutex_lock(&check_lock);
	ok = __atomic_load_n(&percpu_read, __ATOMIC_RELAXED);
	if (!ok) {
		g_byte_array_set_size(percpu_buf, 0);
		ok = qemu_plugin_read_memory_vaddr(cfg.percpu_addr, percpu_buf,
						   8 * (size_t)nvcpus) &&
		     percpu_buf->len == 8 * (guint)nvcpus;
		if (ok) {
			memcpy(percpu_base, percpu_buf->data, 8 * (size_t)nvcpus);
			__atomic_store_n(&percpu_read, true, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&check_lock);
	return ok;
}

static int vcpu_of_base(uint64_t base)
{
	for (int i = 0; i < nvcpus; i++)
		if (percpu_base[i] == base)
			return i;
	return -1;
}

/* udata: as tb_exec's. At the start of a block inside a window. */
static void tb_check(unsigned int vcpu_index, void *udata)
{
	unsigned int vi;
	uint64_t base;

	(void)udata;
	if (__atomic_load_n(&active_phase, RELAXED) < 0)
		return;
	vi = running_vcpu(vcpu_index);
	__atomic_fetch_add(&check_blocks, 1, RELAXED);
	if (!find_base_regs() || !read_percpu()) {
		__atomic_fetch_add(&check_pending, 1, RELAXED);
		return;
	}
	/* x86_64 in user mode (and at kernel entry before swapgs): k_gs_base */
	for (int k = 0; k < 2 && base_regs[k]; k++) {
		int i;

		if (!read_u64_reg(vi, base_regs[k], &base))
			continue;
		i = vcpu_of_base(base);
		if (i < 0)
			continue;
		__atomic_fetch_add((unsigned int)i == vi ? &check_agree : &check_disagree, 1,
				   RELAXED);
		return;
	}
	__atomic_fetch_add(&check_unmapped, 1, RELAXED);
}
#else

static void tb_check(unsigned int vcpu_index, void *udata)
{
	(void)vcpu_index;
	(void)udata;
}

static void check_bufs_new(void)
{
}

static void check_bufs_free(void)
{
}

#endif /* KLOC_REGCHECK */

/* Markers: x86_64 nopl disp32(%rax), arm64 movz xzr, #imm16, lsl #48. */
static bool marker_payload(struct qemu_plugin_insn *insn, uint32_t *payload)
{
	size_t n = qemu_plugin_insn_size(insn);
	uint32_t w;
#if QEMU_PLUGIN_VERSION >= 3
	/* API 3 (QEMU 9.0) on: the bytes are copied out, no longer lent. */
	uint8_t b[8];

	if (n != (target[0] == 'x' ? 7 : 4) || qemu_plugin_insn_data(insn, b, n) != n)
		return false;
#else
	const uint8_t *b = qemu_plugin_insn_data(insn);
#endif

	if (target[0] == 'x') {
		uint32_t d;

		if (n != 7 || b[0] != 0x0f || b[1] != 0x1f || b[2] != 0x80)
			return false;
		d = b[3] | b[4] << 8 | b[5] << 16 | (uint32_t)b[6] << 24;
		if (d >> 16 != KLOC_MARK_MAGIC)
			return false;
		/* bits 15..12 set: a marker, but a bad one (kind 0) */
		*payload = d & 0xf000 ? 0 : d & 0xfff;
		return true;
	}
	if (n != 4)
		return false;
	w = b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
	if ((w & 0xffe0001fU) != 0xd2e0001fU || ((w >> 17) & 0xf) != KLOC_MARK_MAGIC_A64)
		return false;
	*payload = (w >> 5) & 0xfff;
	return true;
}

static bool bad_marker(unsigned int kind, unsigned int phase)
{
	if ((kind == KLOC_MARK_KIND_START || kind == KLOC_MARK_KIND_END) &&
	    phase < KLOC_MARK_PHASE_COUNT)
		return false;
	__atomic_fetch_add(&bad_markers, 1, RELAXED);
	return true;
}

/* udata: the TB's instructions << 1 | kernel. */
static void tb_exec(unsigned int vcpu_index, void *udata)
{
	struct vcpu *v = &vcpus[running_vcpu(vcpu_index)];
	uintptr_t u = (uintptr_t)udata;
	uint64_t *total = &v->insns[u & 1];

	if (!KLOC_INLINE && !v->seen) {	/* else vcpu_init() notes its thread */
		v->thread = pthread_self();
		v->seen = true;
	}
	/* only this vCPU's thread writes it; markers read it */
	__atomic_store_n(total, *total + (u >> 1), __ATOMIC_RELAXED);
}

/*
 * What differs from one plugin API to the next, in one place: scoreboards,
 * vCPU init and resets came with API 2 (QEMU 9.0). Before it, instructions
 * are counted by callback and every translation has memory callbacks.
 */
static void register_callbacks(qemu_plugin_id_t id);

#if KLOC_INLINE
struct totals {			/* a vCPU's scoreboard entry */
	uint64_t insns[2];	/* user, kernel instructions of the TBs counted inline */
};

static qemu_plugin_id_t plugin_id;
static struct qemu_plugin_scoreboard *score;
static qemu_plugin_u64 insns_inline[2];
static pthread_mutex_t thread_lock = PTHREAD_MUTEX_INITIALIZER;
static bool parallel;		/* atomic; vCPUs started in more than one thread */
static bool mem_on;		/* atomic, set under win_lock: translate with memory callbacks */
static bool reset_pending;	/* under win_lock; a qemu_plugin_reset() is under way */

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
	pthread_t self = pthread_self();

	(void)id;
	if (qemu_get_cpu_fn && (int)vcpu_index < nvcpus)
		__atomic_store_n(&cpu_states[vcpu_index], qemu_get_cpu_fn((int)vcpu_index),
				 RELAXED);
	pthread_mutex_lock(&thread_lock);
	for (int i = 0; i < nvcpus; i++) {
		if (vcpus[i].seen && !pthread_equal(vcpus[i].thread, self))
			__atomic_store_n(&parallel, true, __ATOMIC_RELAXED);
	}
	if ((int)vcpu_index < nvcpus) {
		vcpus[vcpu_index].thread = self;
		vcpus[vcpu_index].seen = true;
	}
	pthread_mutex_unlock(&thread_lock);
}

static void api_install(qemu_plugin_id_t id)
{
	plugin_id = id;
	mem_on = cfg.mem_always || cfg.count_all;
	score = qemu_plugin_scoreboard_new(sizeof(struct totals));
	insns_inline[0] = qemu_plugin_scoreboard_u64_in_struct(score, struct totals, insns[0]);
	insns_inline[1] = qemu_plugin_scoreboard_u64_in_struct(score, struct totals, insns[1]);
}

static void api_register(qemu_plugin_id_t id)
{
	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
}

static void api_free(void)
{
	qemu_plugin_scoreboard_free(score);
	score = NULL;
}

/*
 * Count the TB by an inline add where QEMU generates it right: with one
 * vCPU, or with a thread per vCPU (docs/qemu-cpu-index.md).
 */
static bool count_inline(struct qemu_plugin_tb *tb, size_t n, bool kernel)
{
	if (nvcpus > 1 && !__atomic_load_n(&parallel, __ATOMIC_RELAXED))
		return false;
	qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(tb, QEMU_PLUGIN_INLINE_ADD_U64,
							  insns_inline[kernel], n);
	return true;
}

static uint64_t insns_counted_inline(int vcpu_index, bool kernel)
{
	return vcpu_index < qemu_plugin_num_vcpus() ?
	       qemu_plugin_u64_get(insns_inline[kernel], vcpu_index) : 0;
}

/* Whether translations now get memory callbacks. */
static bool mem_now(void)
{
	return __atomic_load_n(&mem_on, __ATOMIC_RELAXED);
}

/*
 * In exclusive context, every vCPU stopped and the translated code gone:
 * translate from now on with memory callbacks if a window is open now.
 */
static void reset_done(qemu_plugin_id_t id)
{
	pthread_mutex_lock(&win_lock);
	__atomic_store_n(&mem_on, __atomic_load_n(&active_phase, __ATOMIC_RELAXED) >= 0,
			 __ATOMIC_RELAXED);
	reset_pending = false;
	pthread_mutex_unlock(&win_lock);
	register_callbacks(id);
}

/* Called under win_lock: whether to ask for a reset, now that the windows changed. */
static bool want_reset(void)
{
	if (cfg.mem_always || reset_pending ||
	    mem_on == (__atomic_load_n(&active_phase, __ATOMIC_RELAXED) >= 0))
		return false;
	reset_pending = true;	/* QEMU ignores a reset asked for during one */
	return true;
}

static void ask_reset(void)
{
	qemu_plugin_reset(plugin_id, reset_done);
}

#else /* plugin API 1 */

static void api_install(qemu_plugin_id_t id)
{
	(void)id;
}

static void api_register(qemu_plugin_id_t id)
{
	(void)id;
}

static void api_free(void)
{
}

static bool count_inline(struct qemu_plugin_tb *tb, size_t n, bool kernel)
{
	(void)tb;
	(void)n;
	(void)kernel;
	return false;
}

static uint64_t insns_counted_inline(int vcpu_index, bool kernel)
{
	(void)vcpu_index;
	(void)kernel;
	return 0;
}

static bool mem_now(void)
{
	return true;
}

static bool want_reset(void)
{
	return false;
}

static void ask_reset(void)
{
}

#endif /* KLOC_INLINE */

/*
 * Every vCPU's user and kernel instructions since it started, less excl of
 * the marking vCPU's (of its TB's kind): the instructions of its TB, counted
 * whole when it began, that it has not run.
 */
static void snapshot(uint64_t (*snap)[2], unsigned int vcpu_index, bool kernel,
		     uint64_t excl)
{
	for (int i = 0; i < nvcpus; i++) {
		for (int k = 0; k < 2; k++)
			snap[i][k] = __atomic_load_n(&vcpus[i].insns[k], __ATOMIC_RELAXED) +
				     insns_counted_inline(i, k);
	}
	if ((int)vcpu_index < nvcpus && snap[vcpu_index][kernel] >= excl)
		snap[vcpu_index][kernel] -= excl;
}

/*
 * Called under win_lock as a window of phase closes: it gets each vCPU's
 * instructions since it opened, and its contended accesses.
 */
static void add_window(int phase, uint64_t (*snap)[2])
{
	for (int i = 0; i < nvcpus; i++) {
		struct vcpu *v = &vcpus[i];

		model_close_window((unsigned int)i, &v->ph[phase]);
		if (snap[i][0] > v->start[0])
			v->ph[phase].insns_user += snap[i][0] - v->start[0];
		if (snap[i][1] > v->start[1])
			v->ph[phase].insns_kernel += snap[i][1] - v->start[1];
	}
}

/* Called under win_lock: a new window, every line invalid in every vCPU's cache. */
static void open_window(int phase, uint64_t (*snap)[2])
{
	model_open_window();
	windows[phase]++;
	for (int i = 0; i < nvcpus; i++)
		memcpy(vcpus[i].start, snap[i], sizeof(vcpus[i].start));
	__atomic_store_n(&active_phase, phase, __ATOMIC_RELAXED);
}

/*
 * The marker's udata: payload (12 bits, kloc-marker.h), instructions after it in its TB
 * (bits 16..31), kernel TB (bit 32). A window counts the instructions
 * strictly between its markers.
 */
static void marker_exec(unsigned int vcpu_index, void *udata)
{
	uintptr_t u = (uintptr_t)udata;
	unsigned int kind = KLOC_MARK_KIND(u & 0xfff), phase = KLOC_MARK_PHASE(u & 0xfff);
	uint64_t after = (u >> 16) & 0xffff;
	bool kernel = (u >> 32) & 1, reset;
	uint64_t snap[MAX_VCPUS][2];
	int open;

	if (bad_marker(kind, phase))
		return;
	vcpu_index = running_vcpu(vcpu_index);
	pthread_mutex_lock(&win_lock);
	open = __atomic_load_n(&active_phase, __ATOMIC_RELAXED);
	if (kind == KLOC_MARK_KIND_START && open == (int)phase) {
		nested_starts++;
	} else if (kind == KLOC_MARK_KIND_START) {
		if (open >= 0) {	/* a start inside another window ends that one */
			nested_starts++;
			snapshot(snap, vcpu_index, kernel, after + 1);
			add_window(open, snap);
		}
		snapshot(snap, vcpu_index, kernel, after);
		open_window((int)phase, snap);
	} else if (open == (int)phase) {
		/* the marker and what follows it in its TB are not the window's */
		snapshot(snap, vcpu_index, kernel, after + 1);
		add_window(open, snap);
		__atomic_store_n(&active_phase, -1, __ATOMIC_RELAXED);
	} else {
		unmatched_ends++;
	}
	reset = want_reset();
	pthread_mutex_unlock(&win_lock);
	if (reset)
		ask_reset();
}

/* Memory callbacks come only inside windows, but with mem=always and QEMU before 9.0. */
static void vcpu_mem(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
		     uint64_t vaddr, void *udata)
{
	struct access a = {
		.phase = __atomic_load_n(&active_phase, __ATOMIC_RELAXED),
		.pc = (uint64_t)(uintptr_t)udata,
	};
	struct qemu_plugin_hwaddr *hw;
	unsigned int size, head;

	if (a.phase < 0)
		return;
	a.vcpu = running_vcpu(vcpu_index);
	a.c = &vcpus[a.vcpu].ph[a.phase];
	a.store = qemu_plugin_mem_is_store(info);
	if (a.store)
		a.c->stores++;
	else
		a.c->loads++;
	hw = qemu_plugin_get_hwaddr(info, vaddr);
	if (!hw || qemu_plugin_hwaddr_is_io(hw)) {
		a.c->io++;
		return;
	}
	size = 1U << qemu_plugin_mem_size_shift(info);
	/* the bytes on vaddr's page; smaller pages than 4 KiB are not modelled */
	head = MIN_PAGE - (vaddr & (MIN_PAGE - 1));
	if (!model_access(&a, qemu_plugin_hwaddr_phys_addr(hw), vaddr, MIN(head, size), true) ||
	    head >= size)
		return;
	/* the tail is on the next page, wherever that is: look it up */
	hw = qemu_plugin_get_hwaddr(info, vaddr + head);
	if (hw && !qemu_plugin_hwaddr_is_io(hw))
		model_access(&a, qemu_plugin_hwaddr_phys_addr(hw), vaddr + head, size - head,
			     false);
}

static void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	bool kernel = qemu_plugin_tb_vaddr(tb) >> 63;
	bool mem = mem_now();

	(void)id;
	if (!count_inline(tb, n, kernel))
		qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS,
						     (void *)(uintptr_t)(n << 1 | kernel));
	if (KLOC_REGCHECK && mem && cfg.percpu_addr)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_check, QEMU_PLUGIN_CB_R_REGS,
						     (void *)(uintptr_t)(n << 1 | kernel));
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint32_t payload;

		if (!cfg.count_all && marker_payload(insn, &payload)) {
			uintptr_t u = payload | (uintptr_t)(n - 1 - i) << 16 |
				      (uintptr_t)kernel << 32;

			qemu_plugin_register_vcpu_insn_exec_cb(insn, marker_exec,
							       QEMU_PLUGIN_CB_NO_REGS,
							       (void *)u);
		}
		if (!mem)
			continue;
		qemu_plugin_register_vcpu_mem_cb(insn, vcpu_mem, QEMU_PLUGIN_CB_NO_REGS,
						 QEMU_PLUGIN_MEM_RW,
						 (void *)(uintptr_t)qemu_plugin_insn_vaddr(insn));
	}
}

/* Output */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void write_phase(FILE *f, int p)
{
	fprintf(f, "{\"phase\": %d, \"windows\": %" PRIu64 ", \"vcpus\": [", p, windows[p]);
	for (int i = 0; i < nvcpus; i++) {
		struct counts *c = &vcpus[i].ph[p];

		fprintf(f, "%s{\"vcpu\": %d, \"node\": %d, \"insns_user\": %" PRIu64
			", \"insns_kernel\": %" PRIu64 ", \"loads\": %" PRIu64
			", \"stores\": %" PRIu64 ", \"local\": %" PRIu64 ", \"remote\": %"
			PRIu64 ", \"io\": %" PRIu64 ", \"unmapped\": %" PRIu64
			", \"misses_local\": %" PRIu64 ", \"misses_remote\": %" PRIu64
			", \"hitm_local\": %" PRIu64 ", \"hitm_remote\": %" PRIu64
			", \"invalidations\": %" PRIu64 ", \"true_sharing\": %" PRIu64
			", \"false_sharing\": %" PRIu64 ", \"contended\": %" PRIu64
			", \"contended_false\": %" PRIu64 "}",
			i ? ", " : "", i, cfg.cpu_node[i], c->insns_user, c->insns_kernel,
			c->loads, c->stores, c->local, c->remote, c->io, c->unmapped,
			c->miss_local, c->miss_remote, c->hitm_local, c->hitm_remote,
			c->inval, c->true_sharing, c->false_sharing, c->contended,
			c->contended_false);
	}
	fputs("]", f);
	model_write_lines(f, p);
	fputs("}", f);
}

static int vcpu_threads(void)
{
	int n = 0;

	for (int i = 0; i < nvcpus; i++) {
		bool dup = false;

		if (!vcpus[i].seen)
			continue;
		for (int j = 0; j < i; j++)
			if (vcpus[j].seen && pthread_equal(vcpus[j].thread, vcpus[i].thread))
				dup = true;
		n += !dup;
	}
	return n;
}

/*
 * Where the vCPU index of every callback came from: QEMU's current_cpu, or
 * the index QEMU passed, where that is the running vCPU's (one vCPU, a
 * thread each, or QEMU before plugin API 4); else none: the per-vCPU split
 * is not measured.
 */
static const char *index_source(void)
{
	if (qemu_get_cpu_fn && !__atomic_load_n(&index_unresolved, RELAXED))
		return "current_cpu";
	if (nvcpus == 1 || vcpu_threads() == nvcpus || api_cur < 4)
		return "callback";
	return "none";
}

static void write_index(FILE *f)
{
	uint64_t callbacks = index_unresolved, wrong = 0;

	for (int i = 0; i < nvcpus; i++) {
		callbacks += vcpus[i].callbacks;
		wrong += vcpus[i].index_wrong;
	}
	fputs(", \"vcpu_index\": {\"source\": ", f);
	json_str(f, index_source());
	fprintf(f, ", \"callbacks\": %" PRIu64 ", \"callback_index_wrong\": %" PRIu64
		", \"unresolved\": %" PRIu64 ", \"check\": ", callbacks, wrong,
		index_unresolved);
	if (!cfg.percpu_addr || !KLOC_REGCHECK) {
		fputs("null}", f);
		return;
	}
	fputs("{\"registers\": [", f);
	for (int k = 0; k < 2 && base_reg_names[k]; k++) {
		fputs(k ? ", " : "", f);
		json_str(f, base_reg_names[k]);
	}
	fprintf(f, "], \"percpu\": \"0x%" PRIx64 "\", \"percpu_read\": %s, \"blocks\": %"
		PRIu64 ", \"agree\": %" PRIu64 ", \"disagree\": %" PRIu64 ", \"unmapped\": %"
		PRIu64 ", \"pending\": %" PRIu64 "}}", cfg.percpu_addr,
		percpu_read ? "true" : "false", check_blocks, check_agree, check_disagree,
		check_unmapped, check_pending);
}

static void write_json(FILE *f)
{
	int open = __atomic_load_n(&active_phase, __ATOMIC_RELAXED);
	const char *sep = "";

	fputs("{\"plugin\": \"kloc-count\", \"version\": ", f);
	json_str(f, KLOC_COUNT_VERSION);
	fputs(", \"qemu_header\": ", f);
	json_str(f, KLOC_QEMU_HEADER);
	fprintf(f, ", \"api\": {\"built\": %d, \"qemu_min\": %d, \"qemu_cur\": %d}",
		QEMU_PLUGIN_VERSION, api_min, api_cur);
	fputs(", \"target\": ", f);
	json_str(f, target);
	write_index(f);
	fprintf(f, ", \"vcpus\": %d, \"vcpu_threads\": %d, \"count\": \"%s\"", nvcpus,
		vcpu_threads(), cfg.count_all ? "all" : "windows");
	model_write_config(f);
	fprintf(f, ", \"markers\": {\"bad\": %" PRIu64 ", \"unmatched_ends\": %" PRIu64
		", \"nested_starts\": %" PRIu64 "}, \"open_phase\": ", bad_markers,
		unmatched_ends, nested_starts);
	if (open >= 0 && !cfg.count_all)
		fprintf(f, "%d", open);
	else
		fputs("null", f);
	fputs(", \"phases\": [", f);
	for (int p = 0; p < (int)KLOC_MARK_PHASE_COUNT; p++) {
		if (!windows[p])
			continue;
		fputs(sep, f);
		write_phase(f, p);
		sep = ", ";
	}
	fputs("]}\n", f);
}

/* At exit, after the counts are written: the vCPUs have stopped. */
static void free_all(void)
{
	model_free();
	g_free(vcpus);
	vcpus = NULL;
	g_free(cfg.out_path);
	cfg.out_path = NULL;
	check_bufs_free();
	api_free();
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
	int open = __atomic_load_n(&active_phase, __ATOMIC_RELAXED);
	uint64_t snap[MAX_VCPUS][2];

	(void)id;
	(void)udata;
	if (!strcmp(index_source(), "none") && !qemu_get_cpu_fn)
		plugin_err("%d vCPUs in one thread, and this QEMU exports no current_cpu or qemu_get_cpu: totals are exact, the split by vCPU is refused",
			   nvcpus);
	else if (!strcmp(index_source(), "none"))
		plugin_err("%d vCPUs in one thread, and QEMU's running vCPU not found in %" PRIu64
			   " callbacks: totals are exact, the split by vCPU is refused",
			   nvcpus, index_unresolved);
	pthread_mutex_lock(&win_lock);
	if (open >= 0) {	/* a window still open has what ran so far */
		snapshot(snap, 0, false, 0);
		add_window(open, snap);
	}
	if (cfg.out_path) {
		char *tmp = g_strdup_printf("%s.tmp%d", cfg.out_path, (int)getpid());
		FILE *f = fopen(tmp, "w");

		if (!f) {
			plugin_err("cannot write %s: %s", tmp, strerror(errno));
		} else {
			write_json(f);
			if (fclose(f) != 0)
				plugin_err("writing %s failed: %s", tmp, strerror(errno));
			else if (rename(tmp, cfg.out_path) != 0)
				plugin_err("cannot rename %s to %s: %s", tmp, cfg.out_path,
					   strerror(errno));
		}
		g_free(tmp);
	} else {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		if (f) {
			write_json(f);
			fclose(f);
			qemu_plugin_outs(buf);
			free(buf);
		}
	}
	free_all();
	pthread_mutex_unlock(&win_lock);
}

/* At install, and again after each reset (which drops them all). */
static void register_callbacks(qemu_plugin_id_t id)
{
	qemu_plugin_register_vcpu_tb_trans_cb(id, vcpu_tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	api_register(id);
}

/* Arguments */

/* Arguments: each key=value, looked up in args[] */

struct arg {
	const char *key;
	int (*parse)(const struct arg *a, const char *val);
	size_t field;		/* its offset in struct kloc_config */
	uint64_t min, max;	/* numbers: the range, with why in want */
	const char *want;	/* what the value must be, for the error */
};

#define FIELD(name) offsetof(struct kloc_config, name)

static void *field_of(const struct arg *a)
{
	return (char *)&cfg + a->field;
}

static bool parse_u64(const char *s, uint64_t *v, const char **end)
{
	char *e;

	errno = 0;
	*v = g_ascii_strtoull(s, &e, 0);
	if (errno || e == s)
		return false;
	*end = e;
	return true;
}

/* "LO-HI:N" or, with single_ok, "LO:N". */
static bool parse_range(const char *s, uint64_t *lo, uint64_t *hi, uint64_t *n,
			bool single_ok)
{
	const char *e;

	if (!parse_u64(s, lo, &e))
		return false;
	if (*e == '-') {
		if (!parse_u64(e + 1, hi, &e))
			return false;
	} else if (single_ok) {
		*hi = *lo;
	} else {
		return false;
	}
	if (*e != ':' || !parse_u64(e + 1, n, &e) || *e)
		return false;
	return *lo <= *hi;
}

static int parse_path(const struct arg *a, const char *val)
{
	char **p = field_of(a);

	g_free(*p);
	*p = g_strdup(val);
	return 0;
}

/* A number from min to max; a->want says what else it must be. */
static int parse_number(const struct arg *a, const char *val)
{
	const char *e;
	uint64_t n;

	if (!parse_u64(val, &n, &e) || *e || n < a->min || n > a->max) {
		plugin_err("%s=%s: want %s", a->key, val, a->want);
		return -1;
	}
	*(uint64_t *)field_of(a) = n;
	return 0;
}

/* A power of two from min to max, with K and M suffixes. */
static int parse_pow2(const struct arg *a, const char *val)
{
	const char *e;
	uint64_t n;

	if (!parse_u64(val, &n, &e)) {
		plugin_err("%s=%s: want a number", a->key, val);
		return -1;
	}
	if (*e == 'K' || *e == 'k')
		n <<= 10, e++;
	else if (*e == 'M' || *e == 'm')
		n <<= 20, e++;
	if (*e || !n || n & (n - 1) || n < a->min || n > a->max) {
		plugin_err("%s=%s: want %s", a->key, val, a->want);
		return -1;
	}
	*(uint64_t *)field_of(a) = n;
	return 0;
}

/* a->want: "no|yes", the two values, false then true. */
static int parse_choice(const struct arg *a, const char *val)
{
	const char *bar = strchr(a->want, '|');
	size_t no = (size_t)(bar - a->want);

	if (strlen(val) == no && !strncmp(val, a->want, no)) {
		*(bool *)field_of(a) = false;
	} else if (!strcmp(val, bar + 1)) {
		*(bool *)field_of(a) = true;
	} else {
		plugin_err("%s=%s: want %s=%.*s or %s=%s", a->key, val, a->key, (int)no,
			   a->want, a->key, bar + 1);
		return -1;
	}
	return 0;
}

/* node=N:LO-HI */
static int parse_node(const struct arg *a, const char *val)
{
	uint64_t lo, hi, n;
	const char *e;

	if (!parse_u64(val, &n, &e) || *e != ':' || n >= MAX_NODES ||
	    !parse_u64(e + 1, &lo, &e) || *e != '-' || !parse_u64(e + 1, &hi, &e) || *e ||
	    lo > hi || cfg.nnodes >= MAX_SEGS) {
		plugin_err("%s=%s: want %s", a->key, val, a->want);
		return -1;
	}
	cfg.node[cfg.nnodes++] = (struct node_arg){ .lo = lo, .hi = hi, .node = (int)n };
	return 0;
}

/* cpus=A-B:N or cpus=A:N */
static int parse_cpus(const struct arg *a, const char *val)
{
	uint64_t lo, hi, n;

	if (!parse_range(val, &lo, &hi, &n, true) || hi >= MAX_VCPUS || n >= MAX_NODES) {
		plugin_err("%s=%s: want %s", a->key, val, a->want);
		return -1;
	}
	for (uint64_t c = lo; c <= hi; c++)
		cfg.cpu_node[c] = (int)n;
	return 0;
}

/* ram=LO-HI:GPA */
static int parse_ram(const struct arg *a, const char *val)
{
	uint64_t lo, hi, gpa;

	if (!parse_range(val, &lo, &hi, &gpa, false) || cfg.nram >= MAX_SEGS) {
		plugin_err("%s=%s: want %s", a->key, val, a->want);
		return -1;
	}
	cfg.ram[cfg.nram++] = (struct ram_arg){ .lo = lo, .hi = hi, .gpa = gpa };
	return 0;
}

/* tools/qemu-plugin/README.md says what each does. */
static const struct arg args[] = {
	{ .key = "out", .parse = parse_path, .field = FIELD(out_path) },
	{ .key = "node", .parse = parse_node, .want = "node=N:LO-HI (N < 64, at most 16 ranges)" },
	{ .key = "cpus", .parse = parse_cpus, .want = "cpus=A-B:N or cpus=A:N (vCPUs below 16)" },
	{ .key = "ram", .parse = parse_ram, .want = "ram=LO-HI:GPA (at most 16)" },
	{ .key = "cache", .parse = parse_pow2, .field = FIELD(cache_bytes), .min = 1,
	  .max = 1ULL << 32, .want = "a power of two (cache=: K and M suffixes)" },
	{ .key = "assoc", .parse = parse_pow2, .field = FIELD(assoc), .min = 1, .max = 64,
	  .want = "a power of two, at most 64 ways" },
	{ .key = "line", .parse = parse_pow2, .field = FIELD(line_bytes), .min = 8,
	  .max = MAX_LINE, .want = "a power of two, 8 to 64 bytes (byte masks are 64 bits)" },
	{ .key = "coherence", .parse = parse_choice, .field = FIELD(coherence),
	  .want = "off|on" },
	{ .key = "count", .parse = parse_choice, .field = FIELD(count_all), .want = "windows|all" },
	{ .key = "mem", .parse = parse_choice, .field = FIELD(mem_always),
	  .want = "windows|always" },
	{ .key = "percpu", .parse = parse_number, .field = FIELD(percpu_addr), .min = 1,
	  .max = UINT64_MAX, .want = "the address of __per_cpu_offset" },
	{ .key = "top", .parse = parse_number, .field = FIELD(top_n), .max = UINT32_MAX,
	  .want = "a number" },
	{ .key = "pcs", .parse = parse_number, .field = FIELD(pcs_n), .max = UINT32_MAX,
	  .want = "a number" },
	{ .key = "lines_max", .parse = parse_number, .field = FIELD(lines_max),
	  .max = UINT32_MAX, .want = "a number" },
};

_Static_assert(MAX_NODES == 64 && MAX_SEGS == 16 && MAX_VCPUS == 16 && MAX_LINE == 64,
	       "args[] names these limits in its messages");

static int parse_args(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		size_t k;

		if (!eq) {
			plugin_err("argument \"%s\" is not key=value", argv[i]);
			return -1;
		}
		*eq = '\0';
		for (k = 0; k < G_N_ELEMENTS(args); k++)
			if (!strcmp(argv[i], args[k].key))
				break;
		if (k == G_N_ELEMENTS(args)) {
			GString *known = g_string_new(NULL);

			for (k = 0; k < G_N_ELEMENTS(args); k++)
				g_string_append_printf(known, "%s%s", k ? ", " : "", args[k].key);
			plugin_err("unknown argument \"%s\"; known: %s", argv[i], known->str);
			g_string_free(known, TRUE);
			return -1;
		}
		if (args[k].parse(&args[k], eq + 1))
			return -1;
	}
	return 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	api_min = info->version.min;
	api_cur = info->version.cur;
	if (api_cur != QEMU_PLUGIN_VERSION || api_min > QEMU_PLUGIN_VERSION) {
		plugin_err("built against QEMU plugin API %d (qemu-plugin.h of QEMU %s), but "
			   "this QEMU offers API %d..%d: rebuild the plugin against this "
			   "QEMU's own header (make deps fetches it: kloc qemu-header; then make -C "
			   "tools/qemu-plugin)", QEMU_PLUGIN_VERSION, KLOC_QEMU_HEADER,
			   api_min, api_cur);
		return -1;
	}
	if (!info->system_emulation) {
		plugin_err("needs system emulation (qemu-system-*), not user mode");
		return -1;
	}
	target = info->target_name;
	if (strcmp(target, "x86_64") && strcmp(target, "aarch64")) {
		plugin_err("target %s: markers are defined for x86_64 and aarch64 only", target);
		return -1;
	}
	nvcpus = info->system.max_vcpus;
	if (nvcpus > MAX_VCPUS) {
		plugin_err("%d vCPUs: at most %d", nvcpus, MAX_VCPUS);
		return -1;
	}
	cfg.nvcpus = nvcpus;
	for (int i = 0; i < MAX_VCPUS; i++)
		cfg.cpu_node[i] = -1;
	if (parse_args(argc, argv))
		return -1;
	cfg.pcs_n = MIN(cfg.pcs_n, PC_SLOTS);
	if (model_init(&cfg))
		return -1;
	find_current_cpu();
	for (int i = 0; i < nvcpus; i++) {
		if (cfg.cpu_node[i] < 0) {
			plugin_err("vCPU %d has no node: give cpus=A-B:N for every vCPU", i);
			return -1;
		}
	}
	vcpus = g_malloc0(sizeof(*vcpus) * (size_t)nvcpus);
	check_bufs_new();
	if (cfg.count_all) {	/* one window, phase 0, from here to exit */
		windows[0] = 1;
		active_phase = 0;
	}
	api_install(id);
	register_callbacks(id);
	return 0;
}

#ifdef KLOC_TEST
/* For tests/fake-qemu.c (kloc-test.h) */
void kloc_test_marker(unsigned int vcpu_index, unsigned int kind, unsigned int phase)
{
	marker_exec(vcpu_index, (void *)(uintptr_t)KLOC_MARK_PAYLOAD(kind, phase));
}
#endif
