// SPDX-License-Identifier: GPL-2.0
/*
 * kloc-count: a QEMU TCG plugin that counts, per vCPU, inside windows the
 * guest marks (kloc-marker.h): instructions (kernel and user apart, by the
 * top bit of the virtual address), loads and stores, accesses to memory on
 * the vCPU's own NUMA node and on other nodes, and what a model of private
 * caches makes of those accesses. At exit it writes one JSON file.
 *
 * The model: every vCPU has a cache (cache=, assoc=, line=: 1 MiB, 16-way,
 * 64-byte lines by default, like a server core's private L2; LRU), empty
 * when a window opens. A directory word per line of guest RAM says which
 * vCPUs hold the line and which one holds it modified (MESI without the E).
 * In the order QEMU executes the accesses:
 * - an access to a line not in the vCPU's cache (never brought in, evicted,
 *   or invalidated by another vCPU) is a miss, local or remote by the
 *   line's home node against the vCPU's node; it brings the line in, and
 *   the least recently used line of its set leaves: eviction ends the
 *   vCPU's hold on it, and ownership with it (a write-back);
 * - an access, load or store, to a line another vCPU holds modified is a
 *   HITM, local or remote by the two vCPUs' nodes (perf c2c's Lcl and Rmt
 *   HITM; perf c2c samples loads, and the ownership request of a store
 *   that finds the line modified elsewhere is the same snoop);
 * - a store to a line other vCPUs hold unmodified invalidates them: an
 *   invalidation;
 * - a read-modify-write (an atomic, or x86's add to memory) is one
 *   ownership request: QEMU reports it as a load then a store of the same
 *   instruction to the same address, under thread=single and thread=multi
 *   alike, and the store of such a pair adds no transfer when its load
 *   made one. So an increment handed between vCPUs is one transfer each.
 * A transfer (a HITM or an invalidation) is true sharing when one side
 * stored to a byte of the line the other accessed, and false sharing when
 * their bytes do not meet; each side's bytes are those it loaded and
 * stored since the line last entered its cache, the requester's with the
 * access at hand. The lines with the most transfers are kept (ranked by
 * remote HITM, then transfers, then false sharing) with, for the heaviest
 * pairs, the PC of the access on each side, like perf c2c.
 *
 * What the model leaves out: out-of-order execution, prefetch, store
 * buffers and weak ordering (accesses take effect one at a time, in QEMU's
 * order), shared caches (an LLC), page-table walks, instruction fetch,
 * and DMA (devices' accesses do not pass through a vCPU's callbacks).
 *
 * Arguments (each "key=value", repeatable where said):
 *   out=PATH            where the JSON goes (else QEMU's log, -d plugin)
 *   node=N:LO-HI        guest-physical range LO..HI (inclusive) is node N; repeat
 *   cpus=A-B:N          vCPUs A..B are on node N (or cpus=A:N); repeat
 *   ram=LO-HI:GPA       this QEMU's qemu_plugin_hwaddr_phys_addr() values
 *                       LO..HI are guest-physical GPA.. (QEMU 7.2 returns the
 *                       RAM block's ram_addr plus its region offset, not the
 *                       guest-physical address); repeat; default: identity
 *   cache=BYTES         each vCPU's cache (1M; K and M suffixes)
 *   assoc=N             its ways per set (16)
 *   line=BYTES          its line, 8 to 64 bytes, a power of two (64)
 *   coherence=on|off    off: each cache alone, misses only (a cross-check
 *                       against QEMU's contrib/plugins/cache.c)
 *   count=windows|all   all: one window, phase 0, from start to exit, with
 *                       no markers (a cross-check's whole run)
 *   top=N               contended lines kept in the output per phase (20)
 *   pcs=N               PC pairs shown per line (at most 8; default 8)
 *   lines_max=N         contended lines tracked in all (100000, ~1 KiB
 *                       each with 4 vCPUs); the transfers on lines past
 *                       them are counted, not attributed to a line
 *                       ("transfers_dropped")
 *   percpu=VADDR        the guest kernel's __per_cpu_offset[] (System.map,
 *                       no KASLR): the register cross-check of the running
 *                       vCPU (plugin API 4 on)
 *   mem=windows|always  memory callbacks only while a window is open
 *                       (windows, the default, QEMU 9.0 on), or on every
 *                       instruction all along (always, and before QEMU 9.0)
 *
 * Instructions: a translation block (TB) is counted whole when it begins,
 * into its vCPU's running user or kernel total: by an inline add to a
 * per-vCPU scoreboard (plugin API 2, QEMU 9.0, on) where QEMU generates that
 * right, else by a callback. A marker snapshots every vCPU's totals, the
 * marking vCPU's less what it has not run of its TB: at a start the
 * instructions after the marker, at an end the marker and what follows it.
 * A window is end minus start: the instructions strictly between its
 * markers. The other vCPUs are between TBs under thread=single, so their
 * totals are exact then; under MTTCG a TB another vCPU is running counts
 * whole on the side of the marker it began on. A TB left early by a fault
 * counts whole.
 *
 * Which vCPU ran it: QEMU 10.0 translates for thread=single (and so for
 * -icount) without CF_PARALLEL, and then bakes the index of the vCPU that
 * translates a TB into its callbacks as a constant (gen_cpu_index()),
 * though every vCPU runs the TB. So the index a TB or instruction callback
 * is given names the translator, not the vCPU running it. kloc-count does
 * not use it: every callback asks QEMU's current_cpu (read on the thread
 * running the callback, the vCPU QEMU's round-robin loop is running) and
 * maps it to an index through qemu_get_cpu(). These are QEMU's internals,
 * not its plugin API: looked up at load, and where they are missing the
 * per-vCPU split is refused ("vcpu_index": "source": "none"), never
 * guessed. A second, independent way checks the first inside windows:
 * the guest kernel's per-CPU base (x86_64 gs_base or k_gs_base, arm64
 * TPIDR_EL1), read through the register API at the start of each block,
 * is one of __per_cpu_offset[] (percpu=, read from guest memory), whose
 * position is the vCPU's; disagreements are counted. docs/counting.md
 * says more. Inline scoreboard adds multiply the baked constant in place
 * (gen_plugin_u64_ptr()) and corrupt the guest: they are used only with
 * one vCPU or with vCPUs in threads of their own (MTTCG, seen at vCPU
 * init); counted boots, with -icount and 4 vCPUs, count by callback.
 *
 * An access that crosses a page boundary is two: the bytes on each page are
 * looked up at that page's own physical address (the pages need not be
 * adjacent in RAM); both count as one load or store, on the first page's node.
 *
 * Memory (QEMU 9.0 on): outside windows TBs are translated without memory
 * callbacks. A window's start asks qemu_plugin_reset(), which QEMU does in
 * exclusive context once the marking vCPU leaves its TB (under thread=single
 * before any other vCPU runs; under MTTCG the others run on until they
 * stop): it drops the plugin's callbacks and all translated code, and
 * reset_done() registers the callbacks again, now translating with memory
 * callbacks; the window's end does the same back. QEMU ignores a reset asked
 * for while one is under way, so none is asked then: the one under way reads
 * the windows when it completes. The cost in exactness: the accesses of the
 * instructions after the start marker in its TB are not counted (one load
 * or store in kloc-locality's windows); the end is exact (until the reset,
 * the callbacks return at once). And QEMU kicks the vCPUs to reset, which
 * ends the marking vCPU's turn: the vCPUs interleave otherwise than without
 * resets, so counts after the first window can differ from mem=always's,
 * though each is the same in every boot (with -icount and -seed). QEMU 7.2
 * cannot reset with memory callbacks: its tb_flush() frees the callback
 * copies that a vCPU's plugin_mem_cbs can still point at, and QEMU aborts
 * ("qemu_plugin_vcpu_mem_cb: code should not be reached"); there, and with
 * mem=always, every instruction has its memory callback all along.
 *
 * Safety: per-vCPU counters and caches are written only by the thread
 * running that vCPU (other threads read a cache's tags and byte masks, with
 * atomic loads); the directory words are updated by compare-and-swap; the
 * table of contended lines and the window bookkeeping are under a mutex.
 * So MTTCG (thread=multi) cannot corrupt the tables; single-threaded TCG
 * (thread=single) has no concurrency at all.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>
#include <qemu-plugin.h>

#include "kloc-marker.h"

#ifndef KLOC_QEMU_HEADER
#define KLOC_QEMU_HEADER "unknown"
#endif

#define KLOC_COUNT_VERSION "3.0"
#define MAX_VCPUS 16		/* holders are 16-bit masks */
#define MAX_NODES 64
#define MAX_SEGS 16
#define MAX_LINE 64		/* byte masks are 64 bits */
#define MIN_PAGE 4096U		/* an access's two halves are looked up apart */
#define PC_SLOTS 8
#define RMW_LINES 4		/* lines one instruction's loads may touch */
#define RELAXED __ATOMIC_RELAXED
/*
 * A window's epoch: bits 21..63 of a directory word. 2^43 - 1 windows are
 * not reached (a window a microsecond for 101 days); past them every line
 * state is cleared and the epochs start again (open_window()).
 */
#define EPOCH_SHIFT 21
#define EPOCH_MAX ((1ULL << (64 - EPOCH_SHIFT)) - 1)

/* Test hooks: fake-qemu builds the plugin with KLOC_TEST (tests/fake-qemu.c). */
#ifdef KLOC_TEST
#include "kloc-test.h"
#define KLOC_TEST_HOOK() kloc_test_window_record()
#else
#define KLOC_TEST_HOOK() do { } while (0)
#endif

/* Scoreboards came with plugin API 2 (QEMU 9.0); resets tried on QEMU 10.0 (API 4). */
#if QEMU_PLUGIN_VERSION >= 2
#define KLOC_INLINE 1
#else
#define KLOC_INLINE 0
#endif

_Static_assert(sizeof(void *) == 8, "kloc-count needs a 64-bit host");

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

struct counts {
	uint64_t insns_user, insns_kernel, loads, stores;
	uint64_t local, remote, io, unmapped;
	uint64_t miss_local, miss_remote;	/* by the line's home node */
	uint64_t hitm_local, hitm_remote;	/* by the holder's node */
	uint64_t inval;
	uint64_t true_sharing, false_sharing;	/* the transfers, by their bytes */
	uint64_t contended, contended_false;	/* accesses, by the window's bytes */
};

/*
 * One line of a vCPU's cache. Only the vCPU's own thread writes it; other
 * vCPUs read tag, the byte masks and pc when they take the line from it.
 */
struct way {
	uint64_t tag;		/* line number + 1; 0: empty */
	uint64_t stamp;		/* last use, for LRU */
	uint64_t load_bytes;	/* bit i: byte i loaded since the line came in */
	uint64_t store_bytes;	/* and stored */
	uint64_t pc;		/* of the last access to it */
};

struct vcpu {
	struct counts ph[KLOC_MARK_PHASE_COUNT];
	int node;
	uint64_t insns[2];	/* user, kernel instructions of the TBs it ran, by callback */
	uint64_t start[2];	/* its user, kernel totals when the window opened */
	pthread_t thread;
	bool seen;
	struct way *ways;	/* sets * assoc */
	uint64_t cache_epoch;	/* atomic; the window its cache holds lines of */
	uint64_t clock;		/* LRU stamps */
	/* the lines the last instruction loaded, for its stores (one RMW) */
	uint64_t rmw_pc;
	bool rmw_open, rmw_stored;
	int rmw_n;
	uint64_t rmw_line[RMW_LINES];
	bool rmw_took[RMW_LINES];
	bool rmw_false[RMW_LINES];	/* its transfer counted as false sharing */
	uint64_t rmw_peer_pc[RMW_LINES];
	uint64_t last_key;	/* the contended line this vCPU touched last */
	struct hot_line *last_hot;
	pthread_mutex_t touched_lock;
	uint64_t touched_epoch;	/* the window touched lists the lines of */
	uint64_t *touched;	/* segment << 56 | line: its win_lines of this window */
	size_t ntouched, touched_max;
} __attribute__((aligned(64)));

/* One line as one vCPU used it in the window: for the contended accesses. */
struct win_line {
	uint64_t load_bytes, store_bytes;
	uint64_t loads, stores;
	uint64_t epoch;		/* the window's; another: all zero */
};

struct seg {			/* one RAM range, with its directory */
	uint64_t raw_lo, raw_hi, gpa;
	int node;
	uint64_t *lines;	/* per line: see dir_access() */
	struct win_line *win[MAX_VCPUS];	/* per vCPU, per line */
	size_t nlines;
};

struct pc_slot {		/* a pair: the requester's PC, the holder's */
	uint64_t pc, peer, count, err;	/* count: transfers; err: space-saving overcount */
	uint64_t hitm_local, hitm_remote, inval, false_sharing;
	uint32_t vcpus;
};

/* Per line and vCPU (as requester): the transfers, and the bytes it accessed. */
enum line_vcpu { LV_HITM_LOCAL, LV_HITM_REMOTE, LV_INVAL, LV_FALSE, LV_LOAD_BYTES,
		 LV_STORE_BYTES, PER_VCPU };

struct hot_line {
	uint64_t key;		/* (line number << 8) | phase: the table's key */
	uint64_t paddr;		/* of the line */
	uint64_t vaddr;		/* of the first transfer's access */
	int node;
	uint64_t hitm_local, hitm_remote, inval, false_sharing;
	struct pc_slot pcs[PC_SLOTS];
	uint64_t per_vcpu[];	/* [PER_VCPU * nvcpus] */
};

enum xfer { XF_NONE, XF_HITM, XF_INVAL };

static struct vcpu *vcpus;
static int nvcpus;
static const char *target;
static int api_min, api_cur;
static char *out_path;
static unsigned int top_n = 20, pcs_n = PC_SLOTS;
static uint64_t lines_max = 100000, lines_held, transfers_dropped;

/* The cache model's parameters */
static uint64_t cache_bytes = 1U << 20;
static unsigned int assoc = 16, line_shift = 6;
static uint64_t nsets;
static bool coherence = true;
static bool count_all;		/* count=all: one window from start to exit */

static struct { uint64_t lo, hi; int node; } noderange[MAX_SEGS];
static int nnoderanges;
static struct { uint64_t lo, hi, gpa; } ramarg[MAX_SEGS];
static int nramargs;
static struct seg segs[MAX_SEGS];
static int nsegs;
static int cpu_node[MAX_VCPUS];
static size_t table_bytes;

static int active_phase = -1;	/* atomic */
static uint64_t epoch = 1;	/* atomic; line states of another epoch are invalid */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static GHashTable *hot;		/* key -> struct hot_line */
static uint64_t windows[KLOC_MARK_PHASE_COUNT];
static uint64_t bad_markers, unmatched_ends, nested_starts;
static bool mem_always;		/* mem=always: memory callbacks outside windows too */
static uint64_t win_base;	/* a window record's first count: 0, but in tests */

#if KLOC_INLINE
struct totals {			/* a vCPU's scoreboard entry */
	uint64_t insns[2];	/* user, kernel instructions of the TBs counted inline */
};

static qemu_plugin_id_t plugin_id;
static struct qemu_plugin_scoreboard *score;
static qemu_plugin_u64 insns_inline[2];
static bool parallel;		/* atomic; vCPUs started in more than one thread */
static bool mem_on;		/* translations now get memory callbacks */
static bool reset_pending;	/* a qemu_plugin_reset() is under way */
#endif

static void plugin_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void plugin_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("kloc-count: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/*
 * The running vCPU, from QEMU's current_cpu (see the top of the file).
 * cpu_states[i] is qemu_get_cpu(i): learnt at vCPU init, and again when a
 * callback finds a CPU it does not know. current_cpu is thread-local:
 * resolved on each thread that runs callbacks, for that thread's copy.
 */
static void *(*qemu_get_cpu_fn)(int index);
static void *cpu_states[MAX_VCPUS];	/* atomic */
static __thread void **current_cpu_slot;
static uint64_t index_unresolved;	/* atomic: callbacks whose vCPU was not found */
/*
 * Per vCPU, written only by the thread running it: the callbacks that asked
 * while it ran, and those of them QEMU gave another vCPU's index.
 */
static struct index_count {
	uint64_t callbacks, wrong;
} __attribute__((aligned(64))) index_counts[MAX_VCPUS];

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
			index_counts[passed].callbacks++;
			return passed;
		}
		for (int pass = 0; cpu && pass < 2; pass++) {
			for (int i = 0; i < nvcpus; i++) {
				if (__atomic_load_n(&cpu_states[i], RELAXED) != cpu)
					continue;
				index_counts[i].callbacks++;
				index_counts[i].wrong += (unsigned int)i != passed;
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
	if (nvcpus > 1)
		plugin_err("this QEMU exports no %s: with vCPUs sharing a thread the per-vCPU figures are refused, not guessed",
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

static uint64_t percpu_addr;	/* percpu=; 0: no cross-check */
static bool percpu_read;	/* atomic; percpu_base holds the guest's */
static const char *base_reg_names[2];
static uint64_t check_blocks, check_agree, check_disagree, check_unmapped,
		check_pending;	/* atomic */

#if KLOC_REGCHECK
static uint64_t percpu_base[MAX_VCPUS];
static int base_regs_state;	/* atomic; 0: not looked for, 1: found, -1: none */
static struct qemu_plugin_register *base_regs[2];
static __thread GByteArray *reg_buf;
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;

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

static bool read_u64_reg(struct qemu_plugin_register *reg, uint64_t *val)
{
	if (!reg_buf)
		reg_buf = g_byte_array_sized_new(64);
	g_byte_array_set_size(reg_buf, 0);
	if (qemu_plugin_read_register(reg, reg_buf) != 8 || reg_buf->len != 8)
		return false;
	memcpy(val, reg_buf->data, 8);	/* the guest's byte order: little-endian */
	return true;
}

/* __per_cpu_offset[], once the running vCPU's page tables map it. */
static bool read_percpu(void)
{
	GByteArray *b;
	bool ok;

	if (__atomic_load_n(&percpu_read, __ATOMIC_ACQUIRE))
		return true;
	b = g_byte_array_sized_new(8 * (guint)nvcpus);
	ok = qemu_plugin_read_memory_vaddr(percpu_addr, b, 8 * (size_t)nvcpus) &&
	     b->len == 8 * (guint)nvcpus;
	if (ok) {
		pthread_mutex_lock(&check_lock);
		memcpy(percpu_base, b->data, 8 * (size_t)nvcpus);
		__atomic_store_n(&percpu_read, true, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&check_lock);
	}
	g_byte_array_free(b, TRUE);
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

		if (!read_u64_reg(base_regs[k], &base))
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
	pthread_mutex_lock(&lock);
	bad_markers++;
	pthread_mutex_unlock(&lock);
	return true;
}

/* udata: the TB's instructions << 1 | kernel. */
static void tb_exec(unsigned int vcpu_index, void *udata)
{
	struct vcpu *v = &vcpus[running_vcpu(vcpu_index)];
	uintptr_t u = (uintptr_t)udata;
	uint64_t *total = &v->insns[u & 1];

#if !KLOC_INLINE
	if (!v->seen) {
		v->thread = pthread_self();
		v->seen = true;
	}
#endif
	/* only this vCPU's thread writes it; markers read it */
	__atomic_store_n(total, *total + (u >> 1), __ATOMIC_RELAXED);
}

#if KLOC_INLINE

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
	pthread_t self = pthread_self();

	(void)id;
	if (qemu_get_cpu_fn && (int)vcpu_index < nvcpus)
		__atomic_store_n(&cpu_states[vcpu_index], qemu_get_cpu_fn((int)vcpu_index),
				 RELAXED);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nvcpus; i++) {
		if (vcpus[i].seen && !pthread_equal(vcpus[i].thread, self))
			__atomic_store_n(&parallel, true, __ATOMIC_RELAXED);
	}
	if ((int)vcpu_index < nvcpus) {
		vcpus[vcpu_index].thread = self;
		vcpus[vcpu_index].seen = true;
	}
	pthread_mutex_unlock(&lock);
}

/*
 * Count the TB by an inline add where QEMU generates it right: with one
 * vCPU, or with a thread per vCPU (see the top of the file).
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

#else

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

static void add_contention(int phase);

/*
 * Called under the lock as a window of phase closes: it gets each vCPU's
 * instructions since it opened, and its contended accesses.
 */
static void add_window(int phase, uint64_t (*snap)[2])
{
	add_contention(phase);
	for (int i = 0; i < nvcpus; i++) {
		struct vcpu *v = &vcpus[i];

		if (snap[i][0] > v->start[0])
			v->ph[phase].insns_user += snap[i][0] - v->start[0];
		if (snap[i][1] > v->start[1])
			v->ph[phase].insns_kernel += snap[i][1] - v->start[1];
	}
}

/*
 * Past EPOCH_MAX windows: every directory word and window record zeroed
 * (states of epoch 0, which no window has), and every cache marked as of
 * epoch 0, so that it empties itself at its next access. Under MTTCG an
 * access in flight may land in the old state: one access, once in 2^43
 * windows.
 */
static void clear_epochs(void)
{
	for (int i = 0; i < nsegs; i++) {
		madvise(segs[i].lines, segs[i].nlines * sizeof(uint64_t), MADV_DONTNEED);
		for (int v = 0; v < nvcpus; v++)
			madvise(segs[i].win[v], segs[i].nlines * sizeof(struct win_line),
				MADV_DONTNEED);
	}
	for (int v = 0; v < nvcpus; v++)
		__atomic_store_n(&vcpus[v].cache_epoch, 0, RELAXED);
}

/* Called under the lock: a new window, every line invalid in every vCPU. */
static void open_window(int phase, uint64_t (*snap)[2])
{
	uint64_t e = __atomic_load_n(&epoch, __ATOMIC_RELAXED);

	if (e >= EPOCH_MAX) {
		clear_epochs();
		e = 0;
	}
	__atomic_store_n(&epoch, e + 1, __ATOMIC_RELAXED);
	windows[phase]++;
	for (int i = 0; i < nvcpus; i++)
		memcpy(vcpus[i].start, snap[i], sizeof(vcpus[i].start));
	__atomic_store_n(&active_phase, phase, __ATOMIC_RELAXED);
}

#if KLOC_INLINE

static void register_callbacks(qemu_plugin_id_t id);

/*
 * In exclusive context, every vCPU stopped and the translated code gone:
 * translate from now on with memory callbacks if a window is open now.
 */
static void reset_done(qemu_plugin_id_t id)
{
	pthread_mutex_lock(&lock);
	mem_on = __atomic_load_n(&active_phase, __ATOMIC_RELAXED) >= 0;
	reset_pending = false;
	pthread_mutex_unlock(&lock);
	register_callbacks(id);
}

/* Called under the lock: whether to ask for a reset, now that the windows changed. */
static bool want_reset(void)
{
	if (mem_always || reset_pending ||
	    mem_on == (__atomic_load_n(&active_phase, __ATOMIC_RELAXED) >= 0))
		return false;
	reset_pending = true;	/* QEMU ignores a reset asked for during one */
	return true;
}

#else

static bool want_reset(void)
{
	return false;
}

#endif /* KLOC_INLINE */

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
	pthread_mutex_lock(&lock);
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
	pthread_mutex_unlock(&lock);
#if KLOC_INLINE
	if (reset)
		qemu_plugin_reset(plugin_id, reset_done);
#else
	(void)reset;
#endif
}

static struct seg *seg_of(uint64_t raw)
{
	for (int i = 0; i < nsegs; i++)
		if (raw >= segs[i].raw_lo && raw <= segs[i].raw_hi)
			return &segs[i];
	return NULL;
}

/* The directory word of the line at guest-physical lg, or NULL outside RAM. */
static uint64_t *dir_word(uint64_t lg, struct seg **sp)
{
	for (int i = 0; i < nsegs; i++) {
		struct seg *s = &segs[i];

		if (lg >= s->gpa && lg - s->gpa <= s->raw_hi - s->raw_lo) {
			if (sp)
				*sp = s;
			return &s->lines[(lg - s->gpa) >> line_shift];
		}
	}
	return NULL;
}

/*
 * A directory word: bits 0..15 the vCPUs holding the line, 16..20 the vCPU
 * holding it modified, plus one (0: none), 21..63 the window's epoch
 * (another epoch: nobody holds it).
 */
static uint64_t dir_pack(uint32_t holders, unsigned int owner, uint64_t e)
{
	return holders | (uint64_t)owner << 16 | e << EPOCH_SHIFT;
}

static void dir_unpack(uint64_t w, uint64_t e, uint32_t *holders, unsigned int *owner)
{
	bool now = w >> EPOCH_SHIFT == e;

	*holders = now ? w & 0xffff : 0;
	*owner = now ? (w >> 16) & 0x1f : 0;
}

/*
 * vCPU vi's access to the line at lg, in the directory: whether vi held the
 * line, and the transfer the access makes (from: the modified line's holder
 * for a HITM, the other holders for an invalidation).
 */
static bool dir_access(uint64_t *word, unsigned int vi, bool store, enum xfer *x,
		       uint32_t *from)
{
	uint64_t e = __atomic_load_n(&epoch, RELAXED);
	uint64_t old = __atomic_load_n(word, RELAXED), new;
	uint32_t me = 1U << vi, holders;
	unsigned int owner;
	bool held;

	do {
		dir_unpack(old, e, &holders, &owner);
		held = holders & me;
		*x = XF_NONE;
		*from = 0;
		if (owner && owner != vi + 1) {
			*x = XF_HITM;
			*from = 1U << (owner - 1);
		} else if (store && (holders & ~me)) {
			*x = XF_INVAL;
			*from = holders & ~me;
		}
		if (store) {
			holders = me;
			owner = vi + 1;
		} else {
			holders |= me | *from;
			if (*x == XF_HITM)
				owner = 0;	/* the holder keeps it, unmodified */
		}
		new = dir_pack(holders, owner, e);
		if (new == old)
			break;
	} while (!__atomic_compare_exchange_n(word, &old, new, true, RELAXED, RELAXED));
	return held;
}

/* Whether the directory says vCPU vi holds line (a line number). */
static bool dir_holds(uint64_t line, unsigned int vi)
{
	uint64_t *word = dir_word(line << line_shift, NULL);
	uint32_t holders;
	unsigned int owner;

	if (!word)
		return false;
	dir_unpack(__atomic_load_n(word, RELAXED), __atomic_load_n(&epoch, RELAXED),
		   &holders, &owner);
	return holders & 1U << vi;
}

/* vCPU vi's cache lets the line at lg go: it no longer holds it, nor owns it. */
static void dir_evict(uint64_t lg, unsigned int vi)
{
	uint64_t *word = dir_word(lg, NULL);
	uint64_t e = __atomic_load_n(&epoch, RELAXED), old, new;
	uint32_t holders;
	unsigned int owner;

	if (!word)
		return;
	old = __atomic_load_n(word, RELAXED);
	do {
		dir_unpack(old, e, &holders, &owner);
		if (!(holders & 1U << vi) && owner != vi + 1)
			return;
		holders &= ~(1U << vi);
		if (owner == vi + 1)
			owner = 0;
		new = dir_pack(holders, owner, e);
	} while (!__atomic_compare_exchange_n(word, &old, new, true, RELAXED, RELAXED));
}

static struct way *cache_set(struct vcpu *v, uint64_t line)
{
	return &v->ways[(line & (nsets - 1)) * assoc];
}

/* The way of v's cache with line, or NULL; any thread may look. */
static struct way *cache_find(struct vcpu *v, uint64_t line)
{
	struct way *set = cache_set(v, line);

	for (unsigned int i = 0; i < assoc; i++)
		if (__atomic_load_n(&set[i].tag, RELAXED) == line + 1)
			return &set[i];
	return NULL;
}

/* Called by v's own thread: its cache as the window's epoch wants it. */
static void cache_epoch(struct vcpu *v)
{
	uint64_t e = __atomic_load_n(&epoch, RELAXED);

	if (__atomic_load_n(&v->cache_epoch, RELAXED) == e)
		return;
	for (uint64_t i = 0; i < nsets * assoc; i++)
		__atomic_store_n(&v->ways[i].tag, 0, RELAXED);
	__atomic_store_n(&v->cache_epoch, e, RELAXED);
}

/* Bring line into v's cache: into w if it still has the tag, else the LRU way. */
static struct way *cache_fill(struct vcpu *v, unsigned int vi, uint64_t line, struct way *w)
{
	if (!w) {
		struct way *set = cache_set(v, line);

		w = &set[0];
		for (unsigned int i = 0; i < assoc; i++) {
			if (!set[i].tag || (coherence && !dir_holds(set[i].tag - 1, vi))) {
				w = &set[i];	/* empty, or invalidated by another vCPU */
				break;
			}
			if (set[i].stamp < w->stamp)
				w = &set[i];
		}
		if (w->tag && coherence)
			dir_evict((w->tag - 1) << line_shift, vi);
		__atomic_store_n(&w->tag, line + 1, RELAXED);
	}
	__atomic_store_n(&w->load_bytes, 0, RELAXED);
	__atomic_store_n(&w->store_bytes, 0, RELAXED);
	return w;
}

/*
 * The read-modify-write rule: the lines an instruction loaded, and whether
 * each load made a transfer; its stores to those lines are the second half.
 * Returns, for a store, RMW_NONE, or the second half of a load that made a
 * transfer (RMW_TOOK; RMW_TOOK_FALSE: one counted as false sharing) or not
 * (RMW_SECOND).
 */
enum rmw { RMW_NONE, RMW_SECOND, RMW_TOOK, RMW_TOOK_FALSE };

static enum rmw rmw_step(struct vcpu *v, uint64_t line, bool store, uint64_t pc, bool took)
{
	if (!store) {
		if (!v->rmw_open || v->rmw_stored || v->rmw_pc != pc) {
			v->rmw_open = true;
			v->rmw_stored = false;
			v->rmw_pc = pc;
			v->rmw_n = 0;
		}
		if (v->rmw_n < RMW_LINES) {
			v->rmw_line[v->rmw_n] = line;
			v->rmw_false[v->rmw_n] = false;
			v->rmw_took[v->rmw_n++] = took;
		}
		return RMW_NONE;
	}
	if (!v->rmw_open || v->rmw_pc != pc) {
		v->rmw_open = false;
		return RMW_NONE;
	}
	v->rmw_stored = true;
	for (int i = 0; i < v->rmw_n; i++)
		if (v->rmw_line[i] == line)
			return !v->rmw_took[i] ? RMW_SECOND :
			       v->rmw_false[i] ? RMW_TOOK_FALSE : RMW_TOOK;
	return RMW_NONE;
}

/* The load of line, this instruction's latest, made a transfer: note how it counted. */
static void rmw_note(struct vcpu *v, uint64_t line, bool false_sharing, uint64_t peer_pc)
{
	int i = v->rmw_n - 1;

	if (v->rmw_open && !v->rmw_stored && i >= 0 && v->rmw_line[i] == line) {
		v->rmw_false[i] = false_sharing;
		v->rmw_peer_pc[i] = peer_pc;
	}
}

/* The peer PC of the false-sharing transfer the RMW's load of line made. */
static uint64_t rmw_peer_pc(struct vcpu *v, uint64_t line)
{
	for (int i = 0; i < v->rmw_n; i++)
		if (v->rmw_line[i] == line)
			return v->rmw_peer_pc[i];
	return 0;
}

/*
 * Whether a transfer between the requester (its bytes: accessed ar, stored
 * sr) and the holders in from is true sharing: one side stored to a byte
 * the other accessed. *peer: a holder's vCPU, *peer_pc: its last PC there.
 */
static bool true_sharing(uint64_t line, uint32_t from, uint64_t ar, uint64_t sr,
			 int *peer, uint64_t *peer_pc)
{
	bool shared = false;

	*peer = -1;
	*peer_pc = 0;
	for (int i = 0; i < nvcpus; i++) {
		struct way *w;
		uint64_t lo, so;
		bool meet;

		if (!(from & 1U << i))
			continue;
		w = cache_find(&vcpus[i], line);
		if (!w)
			continue;	/* under MTTCG it may have gone meanwhile */
		lo = __atomic_load_n(&w->load_bytes, RELAXED);
		so = __atomic_load_n(&w->store_bytes, RELAXED);
		meet = (so & ar) || (sr & (lo | so));
		if (*peer < 0 || (meet && !shared)) {
			*peer = i;
			*peer_pc = __atomic_load_n(&w->pc, RELAXED);
		}
		shared |= meet;
	}
	return shared;
}

/* Space-saving: the heaviest PC pairs of a line survive; err bounds the overcount. */
static struct pc_slot *pc_slot(struct hot_line *h, uint64_t pc, uint64_t peer,
			       unsigned int vcpu_index)
{
	struct pc_slot *min = &h->pcs[0];

	for (int i = 0; i < PC_SLOTS; i++) {
		struct pc_slot *s = &h->pcs[i];

		if (s->count && s->pc == pc && s->peer == peer) {
			s->count++;
			s->vcpus |= 1U << vcpu_index;
			return s;
		}
		if (!s->count) {
			s->pc = pc;
			s->peer = peer;
			s->count = 1;
			s->vcpus = 1U << vcpu_index;
			return s;
		}
		if (s->count < min->count)
			min = s;
	}
	min->pc = pc;
	min->peer = peer;
	min->err = min->count;
	min->count++;
	min->hitm_local = 0;
	min->hitm_remote = 0;
	min->inval = 0;
	min->false_sharing = 0;
	min->vcpus = 1U << vcpu_index;
	return min;
}

struct transfer {
	enum xfer kind;
	bool remote;		/* a HITM from a vCPU on another node */
	bool false_sharing;
	uint64_t pc, peer_pc;
	uint64_t lo, so;	/* the requester's bytes loaded and stored */
};

/* A contended line's key in hot: its line number and the window's phase. */
static uint64_t hot_key(uint64_t lg, int phase)
{
	return (lg >> line_shift) << 8 | (uint64_t)phase;
}

static void line_event(struct vcpu *v, int phase, uint64_t lg, uint64_t vaddr, int node,
		       unsigned int vi, const struct transfer *t)
{
	uint64_t key = hot_key(lg, phase);
	enum line_vcpu lv = t->kind == XF_INVAL ? LV_INVAL :
			    t->remote ? LV_HITM_REMOTE : LV_HITM_LOCAL;
	struct hot_line *h;
	struct pc_slot *slot;
	uint64_t *pv;

	pthread_mutex_lock(&lock);
	h = v->last_hot && v->last_key == key ? v->last_hot :
	    g_hash_table_lookup(hot, &key);
	if (!h) {
		if (lines_held >= lines_max) {
			transfers_dropped++;
			pthread_mutex_unlock(&lock);
			return;
		}
		h = g_malloc0(sizeof(*h) + PER_VCPU * sizeof(uint64_t) * (size_t)nvcpus);
		h->key = key;
		h->paddr = lg;
		h->vaddr = vaddr;
		h->node = node;
		g_hash_table_insert(hot, &h->key, h);
		lines_held++;
	}
	v->last_key = key;
	v->last_hot = h;
	pv = &h->per_vcpu[PER_VCPU * vi];
	pv[lv]++;
	pv[LV_FALSE] += t->false_sharing;
	pv[LV_LOAD_BYTES] |= t->lo;
	pv[LV_STORE_BYTES] |= t->so;
	slot = pc_slot(h, t->pc, t->peer_pc, vi);
	switch (lv) {
	case LV_HITM_LOCAL:
		h->hitm_local++;
		slot->hitm_local++;
		break;
	case LV_HITM_REMOTE:
		h->hitm_remote++;
		slot->hitm_remote++;
		break;
	default:
		h->inval++;
		slot->inval++;
		break;
	}
	h->false_sharing += t->false_sharing;
	slot->false_sharing += t->false_sharing;
	pthread_mutex_unlock(&lock);
}

/*
 * The store of a read-modify-write whose load took the line as false
 * sharing meets a holder's bytes: its one request was true sharing.
 */
static void rmw_recount_true(struct counts *c, int phase, uint64_t lg, unsigned int vi,
			     uint64_t pc, uint64_t peer_pc)
{
	uint64_t key = hot_key(lg, phase);
	struct hot_line *h;

	c->false_sharing--;
	c->true_sharing++;
	pthread_mutex_lock(&lock);
	h = g_hash_table_lookup(hot, &key);
	if (h && h->false_sharing && h->per_vcpu[PER_VCPU * vi + LV_FALSE]) {
		h->false_sharing--;
		h->per_vcpu[PER_VCPU * vi + LV_FALSE]--;
		for (int i = 0; i < PC_SLOTS; i++) {
			struct pc_slot *sl = &h->pcs[i];

			if (sl->count && sl->pc == pc && sl->peer == peer_pc && sl->false_sharing) {
				sl->false_sharing--;
				break;
			}
		}
	}
	pthread_mutex_unlock(&lock);
}

/*
 * vCPU vi's access to line idx of segment s, in its window record. The
 * store of a read-modify-write turns its load into one store: one access.
 */
static void win_access(struct vcpu *v, unsigned int vi, struct seg *s, size_t idx,
		       uint64_t bytes, bool store, bool rmw)
{
	struct win_line *w = &s->win[vi][idx];
	uint64_t e = __atomic_load_n(&epoch, RELAXED);

	if (__atomic_load_n(&w->epoch, RELAXED) != e) {
		__atomic_store_n(&w->load_bytes, 0, RELAXED);
		__atomic_store_n(&w->store_bytes, 0, RELAXED);
		__atomic_store_n(&w->loads, win_base, RELAXED);
		__atomic_store_n(&w->stores, 0, RELAXED);
		__atomic_store_n(&w->epoch, e, RELAXED);
		KLOC_TEST_HOOK();
		/*
		 * Listed under the lock, and only if the window is still e's (under
		 * MTTCG one may have opened meanwhile: the record is then stale,
		 * and the next access lists it in the new window, once).
		 */
		pthread_mutex_lock(&v->touched_lock);
		if (v->touched_epoch != e) {
			v->touched_epoch = e;
			v->ntouched = 0;
		}
		if (__atomic_load_n(&epoch, RELAXED) == e) {
			if (v->ntouched == v->touched_max) {
				v->touched_max = v->touched_max ? 2 * v->touched_max : 4096;
				v->touched = g_realloc(v->touched,
						       v->touched_max * sizeof(uint64_t));
			}
			v->touched[v->ntouched++] = (uint64_t)(s - segs) << 56 | idx;
		}
		pthread_mutex_unlock(&v->touched_lock);
	}
	if (store) {
		__atomic_store_n(&w->store_bytes, w->store_bytes | bytes, RELAXED);
		__atomic_store_n(&w->stores, w->stores + 1, RELAXED);
		if (rmw && w->loads)
			__atomic_store_n(&w->loads, w->loads - 1, RELAXED);
	} else {
		__atomic_store_n(&w->load_bytes, w->load_bytes | bytes, RELAXED);
		__atomic_store_n(&w->loads, w->loads + 1, RELAXED);
	}
}

/*
 * Called under the lock as a window of phase closes: each vCPU's contended
 * accesses in it, from the window's records, whatever order the accesses
 * came in. A load is contended when another vCPU stored to the line in the
 * window, a store when another accessed it: an access that would take the
 * line from another cache if the vCPUs ran interleaved access by access, so
 * an upper bound of the transfers (itself not reached: a read-mostly line's
 * loads all count, while interleaved they would move it once a store). A
 * vCPU's contended loads (stores) are false sharing when one of the vCPUs
 * storing to (accessing) the line has bytes there that meet the vCPU's
 * nowhere either of them stored, over the window: a reader of every slot of
 * a packed array leaves the writers' false sharing among themselves false.
 * Bytes are the window's: a vCPU that moves between slots within one window
 * makes its accesses true, though some transfers were false.
 */
static void add_contention(int phase)
{
	uint64_t e = __atomic_load_n(&epoch, RELAXED);

	for (int x = 0; x < nvcpus; x++) {
		struct vcpu *v = &vcpus[x];
		struct counts *c = &v->ph[phase];

		pthread_mutex_lock(&v->touched_lock);
		if (v->touched_epoch != e)
			v->ntouched = 0;	/* it touched nothing in this window */
		for (size_t t = 0; t < v->ntouched; t++) {
			struct seg *s = &segs[v->touched[t] >> 56];
			size_t idx = v->touched[t] & ((1ULL << 56) - 1);
			struct win_line *me = &s->win[x][idx];
			uint64_t ml, ms, loads, stores;
			bool others_store = false, others_access = false;
			bool false_store = false, false_access = false;

			if (__atomic_load_n(&me->epoch, RELAXED) != e)
				continue;	/* an access of the last window, late (MTTCG) */
			ml = __atomic_load_n(&me->load_bytes, RELAXED);
			ms = __atomic_load_n(&me->store_bytes, RELAXED);
			loads = __atomic_load_n(&me->loads, RELAXED);
			stores = __atomic_load_n(&me->stores, RELAXED);
			for (int y = 0; y < nvcpus; y++) {
				struct win_line *o = &s->win[y][idx];
				uint64_t ol, ost;
				bool apart;

				if (y == x || __atomic_load_n(&o->epoch, RELAXED) != e)
					continue;
				ol = __atomic_load_n(&o->load_bytes, RELAXED);
				ost = __atomic_load_n(&o->store_bytes, RELAXED);
				/* their bytes meet nowhere one of the two stored */
				apart = !((ml | ms) & ost) && !(ms & ol);
				others_store |= ost != 0;
				others_access |= (ol | ost) != 0;
				false_store |= ost && apart;
				false_access |= (ol | ost) && apart;
			}
			if (others_store)
				c->contended += loads;
			if (others_access)
				c->contended += stores;
			if (false_store)
				c->contended_false += loads;
			if (false_access)
				c->contended_false += stores;
		}
		v->ntouched = 0;
		pthread_mutex_unlock(&v->touched_lock);
	}
}

/*
 * One access of vCPU vi to one line, at guest-physical lg, of bytes (a mask)
 * of it: the cache and the directory, then the transfer it makes, if any.
 */
static void line_access(struct vcpu *v, struct seg *s, uint64_t lg, uint64_t vaddr,
			int phase, unsigned int vi, uint64_t bytes, bool store, uint64_t pc,
			struct counts *c)
{
	uint64_t line = lg >> line_shift;
	uint64_t *word = &s->lines[(lg - s->gpa) >> line_shift];
	struct way *w;
	struct transfer t = { .kind = XF_NONE, .pc = pc };
	uint32_t from = 0;
	enum rmw rmw;
	bool hit;
	int peer;

	cache_epoch(v);
	w = cache_find(v, line);
	if (coherence)
		hit = dir_access(word, vi, store, &t.kind, &from) && w;
	else
		hit = w;
	if (hit) {
		t.lo = __atomic_load_n(&w->load_bytes, RELAXED);
		t.so = __atomic_load_n(&w->store_bytes, RELAXED);
	} else {
		if (s->node == v->node)
			c->miss_local++;
		else
			c->miss_remote++;
		w = cache_fill(v, vi, line, w);
	}
	w->stamp = ++v->clock;
	if (store) {
		t.so |= bytes;
		__atomic_store_n(&w->store_bytes, t.so, RELAXED);
	} else {
		t.lo |= bytes;
		__atomic_store_n(&w->load_bytes, t.lo, RELAXED);
	}
	__atomic_store_n(&w->pc, pc, RELAXED);
	rmw = rmw_step(v, line, store, pc, t.kind != XF_NONE);
	win_access(v, vi, s, (lg - s->gpa) >> line_shift, bytes, store, rmw != RMW_NONE);
	/* the RMW's load made the transfer: its store's bytes may make it true */
	if (rmw == RMW_TOOK_FALSE && t.kind != XF_NONE &&
	    true_sharing(line, from, t.lo | t.so, t.so, &peer, &t.peer_pc))
		rmw_recount_true(c, phase, lg, vi, pc, rmw_peer_pc(v, line));
	if (t.kind == XF_NONE || rmw == RMW_TOOK || rmw == RMW_TOOK_FALSE)
		return;		/* no transfer, or the RMW's load made it */
	t.false_sharing = !true_sharing(line, from, t.lo | t.so, t.so, &peer, &t.peer_pc);
	if (!store)
		rmw_note(v, line, t.false_sharing, t.peer_pc);
	t.remote = t.kind == XF_HITM && peer >= 0 && vcpus[peer].node != v->node;
	if (t.kind == XF_INVAL)
		c->inval++;
	else if (t.remote)
		c->hitm_remote++;
	else
		c->hitm_local++;
	if (t.false_sharing)
		c->false_sharing++;
	else
		c->true_sharing++;
	line_event(v, phase, lg, vaddr, s->node, vi, &t);
}

/* The bytes of the line at lg that an access of size bytes at gpa covers. */
static uint64_t line_bytes(uint64_t gpa, unsigned int size, uint64_t lg)
{
	uint64_t lo = gpa > lg ? gpa - lg : 0;
	uint64_t hi = gpa + size - lg;	/* one past, may exceed the line */
	uint64_t line = 1U << line_shift;

	if (hi > line)
		hi = line;
	return (hi - lo == 64 ? ~0ULL : ((1ULL << (hi - lo)) - 1)) << lo;
}

/* The guest-physical address of raw in its RAM range s. */
static uint64_t gpa_of(struct seg *s, uint64_t raw)
{
	return s->gpa + (raw - s->raw_lo);
}

/*
 * The lines that bytes [gpa, gpa + size) of one page touch; vaddr is gpa's
 * virtual address. A range the RAM map does not cover ends the walk.
 */
static void access_lines(struct vcpu *v, struct seg *s, uint64_t gpa, uint64_t vaddr,
			 unsigned int size, bool store, int p, unsigned int vcpu_index,
			 uint64_t pc, struct counts *c)
{
	uint64_t first = gpa >> line_shift, last = (gpa + size - 1) >> line_shift;

	for (uint64_t l = first; l <= last; l++) {
		uint64_t lg = l << line_shift;

		if (lg > s->gpa + (s->raw_hi - s->raw_lo))
			break;	/* the rest is in another range: not modelled */
		line_access(v, s, lg, vaddr + (lg > gpa ? lg - gpa : 0), p, vcpu_index,
			    line_bytes(gpa, size, lg), store, pc, c);
	}
}

static void vcpu_mem(unsigned int vcpu_index, qemu_plugin_meminfo_t info,
		     uint64_t vaddr, void *udata)
{
	int p = __atomic_load_n(&active_phase, __ATOMIC_RELAXED);
	struct vcpu *v;
	struct counts *c;
	struct qemu_plugin_hwaddr *hw;
	bool store;
	uint64_t raw, pc = (uint64_t)(uintptr_t)udata;
	unsigned int size, head;
	struct seg *s;

	if (p < 0)
		return;
	vcpu_index = running_vcpu(vcpu_index);
	v = &vcpus[vcpu_index];
	c = &v->ph[p];
	store = qemu_plugin_mem_is_store(info);
	if (store)
		c->stores++;
	else
		c->loads++;
	hw = qemu_plugin_get_hwaddr(info, vaddr);
	if (!hw || qemu_plugin_hwaddr_is_io(hw)) {
		c->io++;
		return;
	}
	raw = qemu_plugin_hwaddr_phys_addr(hw);
	s = seg_of(raw);
	if (!s) {
		c->unmapped++;
		return;
	}
	if (s->node == v->node)
		c->local++;
	else
		c->remote++;
	size = 1U << qemu_plugin_mem_size_shift(info);
	/* the bytes on vaddr's page; smaller pages than 4 KiB are not modelled */
	head = MIN_PAGE - (vaddr & (MIN_PAGE - 1));
	if (head >= size) {
		access_lines(v, s, gpa_of(s, raw), vaddr, size, store, p, vcpu_index, pc, c);
		return;
	}
	access_lines(v, s, gpa_of(s, raw), vaddr, head, store, p, vcpu_index, pc, c);
	/* the tail is on the next page, wherever that is: look it up */
	hw = qemu_plugin_get_hwaddr(info, vaddr + head);
	if (!hw || qemu_plugin_hwaddr_is_io(hw))
		return;
	raw = qemu_plugin_hwaddr_phys_addr(hw);
	s = seg_of(raw);
	if (s)
		access_lines(v, s, gpa_of(s, raw), vaddr + head, size - head, store, p,
			     vcpu_index, pc, c);
}

static void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	bool kernel = qemu_plugin_tb_vaddr(tb) >> 63;
#if KLOC_INLINE
	bool mem = __atomic_load_n(&mem_on, __ATOMIC_RELAXED);
#else
	bool mem = true;
#endif

	(void)id;
	if (!count_inline(tb, n, kernel))
		qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS,
						     (void *)(uintptr_t)(n << 1 | kernel));
#if KLOC_REGCHECK
	if (mem && percpu_addr)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_check, QEMU_PLUGIN_CB_R_REGS,
						     (void *)(uintptr_t)(n << 1 | kernel));
#endif
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		uint32_t payload;

		if (!count_all && marker_payload(insn, &payload)) {
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

static uint64_t transfers_of(const struct hot_line *h)
{
	return h->hitm_local + h->hitm_remote + h->inval;
}

/* Remote HITM first, then transfers, then false sharing. */
static gint by_rank(gconstpointer a, gconstpointer b)
{
	const struct hot_line *x = *(struct hot_line * const *)a;
	const struct hot_line *y = *(struct hot_line * const *)b;

	if (x->hitm_remote != y->hitm_remote)
		return x->hitm_remote > y->hitm_remote ? -1 : 1;
	if (transfers_of(x) != transfers_of(y))
		return transfers_of(x) > transfers_of(y) ? -1 : 1;
	if (x->false_sharing != y->false_sharing)
		return x->false_sharing > y->false_sharing ? -1 : 1;
	return x->paddr < y->paddr ? -1 : x->paddr > y->paddr;
}

static gint by_count(gconstpointer a, gconstpointer b)
{
	const struct pc_slot *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if (x->pc != y->pc)
		return x->pc < y->pc ? -1 : 1;
	return x->peer < y->peer ? -1 : x->peer > y->peer;
}

static void write_line(FILE *f, struct hot_line *h)
{
	struct pc_slot pcs[PC_SLOTS];
	unsigned int shown = 0;
	const char *sep = "";

	fprintf(f, "{\"paddr\": \"0x%" PRIx64 "\", \"vaddr\": \"0x%" PRIx64
		"\", \"node\": %d, \"hitm_local\": %" PRIu64 ", \"hitm_remote\": %" PRIu64
		", \"invalidations\": %" PRIu64 ", \"false_sharing\": %" PRIu64
		", \"vcpus\": [", h->paddr, h->vaddr, h->node, h->hitm_local, h->hitm_remote,
		h->inval, h->false_sharing);
	for (int i = 0; i < nvcpus; i++) {
		uint64_t *pv = &h->per_vcpu[PER_VCPU * i];

		if (!pv[LV_HITM_LOCAL] && !pv[LV_HITM_REMOTE] && !pv[LV_INVAL])
			continue;
		fprintf(f, "%s{\"vcpu\": %d, \"hitm_local\": %" PRIu64 ", \"hitm_remote\": %"
			PRIu64 ", \"invalidations\": %" PRIu64 ", \"false_sharing\": %" PRIu64
			", \"load_bytes\": \"0x%016" PRIx64 "\", \"store_bytes\": \"0x%016" PRIx64
			"\"}", sep, i, pv[LV_HITM_LOCAL], pv[LV_HITM_REMOTE], pv[LV_INVAL],
			pv[LV_FALSE], pv[LV_LOAD_BYTES], pv[LV_STORE_BYTES]);
		sep = ", ";
	}
	fputs("], \"pcs\": [", f);
	memcpy(pcs, h->pcs, sizeof(pcs));
	qsort(pcs, PC_SLOTS, sizeof(pcs[0]), by_count);
	sep = "";
	for (int i = 0; i < PC_SLOTS && shown < pcs_n; i++) {
		if (!pcs[i].count)
			break;
		fprintf(f, "%s{\"pc\": \"0x%" PRIx64 "\", \"peer_pc\": \"0x%" PRIx64
			"\", \"transfers\": %" PRIu64 ", \"overcount_max\": %" PRIu64
			", \"hitm_local\": %" PRIu64 ", \"hitm_remote\": %" PRIu64
			", \"invalidations\": %" PRIu64 ", \"false_sharing\": %" PRIu64
			", \"vcpus\": [", sep, pcs[i].pc, pcs[i].peer, pcs[i].count, pcs[i].err,
			pcs[i].hitm_local, pcs[i].hitm_remote, pcs[i].inval,
			pcs[i].false_sharing);
		for (int j = 0, first = 1; j < nvcpus; j++) {
			if (pcs[i].vcpus & 1U << j) {
				fprintf(f, first ? "%d" : ", %d", j);
				first = 0;
			}
		}
		fputs("]}", f);
		sep = ", ";
		shown++;
	}
	fputs("]}", f);
}

static void write_phase(FILE *f, int p)
{
	GPtrArray *lines = g_ptr_array_new();
	GHashTableIter it;
	gpointer k, val;
	uint64_t phase_lines = 0;

	g_hash_table_iter_init(&it, hot);
	while (g_hash_table_iter_next(&it, &k, &val)) {
		struct hot_line *h = val;

		if ((h->key & 0xff) == (uint64_t)p) {
			g_ptr_array_add(lines, h);
			phase_lines++;
		}
	}
	g_ptr_array_sort(lines, by_rank);
	fprintf(f, "{\"phase\": %d, \"windows\": %" PRIu64 ", \"contended_lines\": %"
		PRIu64 ", \"vcpus\": [", p, windows[p], phase_lines);
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
			i ? ", " : "", i, vcpus[i].node, c->insns_user, c->insns_kernel,
			c->loads, c->stores, c->local, c->remote, c->io, c->unmapped,
			c->miss_local, c->miss_remote, c->hitm_local, c->hitm_remote,
			c->inval, c->true_sharing, c->false_sharing, c->contended,
			c->contended_false);
	}
	fputs("], \"lines\": [", f);
	for (unsigned int i = 0; i < lines->len && i < top_n; i++) {
		if (i)
			fputs(", ", f);
		write_line(f, g_ptr_array_index(lines, i));
	}
	fputs("]}", f);
	g_ptr_array_free(lines, TRUE);
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
		callbacks += index_counts[i].callbacks;
		wrong += index_counts[i].wrong;
	}
	fputs(", \"vcpu_index\": {\"source\": ", f);
	json_str(f, index_source());
	fprintf(f, ", \"callbacks\": %" PRIu64 ", \"callback_index_wrong\": %" PRIu64
		", \"unresolved\": %" PRIu64 ", \"check\": ", callbacks, wrong,
		index_unresolved);
	if (!percpu_addr || !KLOC_REGCHECK) {
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
		PRIu64 ", \"pending\": %" PRIu64 "}}", percpu_addr,
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
	fprintf(f, ", \"vcpus\": %d, \"vcpu_threads\": %d, \"line_bytes\": %u"
		", \"cache\": {\"bytes\": %" PRIu64 ", \"assoc\": %u, \"sets\": %" PRIu64
		", \"coherence\": %s}, \"count\": \"%s\", \"line_table_bytes\": %zu"
		", \"segments\": [", nvcpus, vcpu_threads(), 1U << line_shift, cache_bytes,
		assoc, nsets, coherence ? "true" : "false", count_all ? "all" : "windows",
		table_bytes);
	for (int i = 0; i < nsegs; i++)
		fprintf(f, "%s{\"raw\": [\"0x%" PRIx64 "\", \"0x%" PRIx64 "\"], \"gpa\": \"0x%"
			PRIx64 "\", \"node\": %d}", i ? ", " : "", segs[i].raw_lo,
			segs[i].raw_hi, segs[i].gpa, segs[i].node);
	fprintf(f, "], \"markers\": {\"bad\": %" PRIu64 ", \"unmatched_ends\": %" PRIu64
		", \"nested_starts\": %" PRIu64 "}, \"open_phase\": ", bad_markers,
		unmatched_ends, nested_starts);
	if (open >= 0 && !count_all)
		fprintf(f, "%d", open);
	else
		fputs("null", f);
	fprintf(f, ", \"lines_max\": %" PRIu64 ", \"transfers_dropped\": %" PRIu64
		", \"phases\": [", lines_max, transfers_dropped);
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
	GHashTableIter it;
	gpointer key, value;

	g_hash_table_iter_init(&it, hot);
	while (g_hash_table_iter_next(&it, &key, &value))
		g_free(value);
	g_hash_table_destroy(hot);
	hot = NULL;
	for (int i = 0; i < nsegs; i++) {
		munmap(segs[i].lines, segs[i].nlines * sizeof(uint64_t));
		segs[i].lines = NULL;
		for (int v = 0; v < nvcpus; v++)
			munmap(segs[i].win[v], segs[i].nlines * sizeof(struct win_line));
	}
	for (int i = 0; i < nvcpus; i++) {
		g_free(vcpus[i].ways);
		g_free(vcpus[i].touched);
	}
	g_free(vcpus);
	vcpus = NULL;
	g_free(out_path);
	out_path = NULL;
#if KLOC_INLINE
	qemu_plugin_scoreboard_free(score);
	score = NULL;
#endif
}

static void at_exit(qemu_plugin_id_t id, void *udata)
{
	int open = __atomic_load_n(&active_phase, __ATOMIC_RELAXED);
	uint64_t snap[MAX_VCPUS][2];

	(void)id;
	(void)udata;
	if (!strcmp(index_source(), "none"))
		plugin_err("%d vCPUs in one thread, and QEMU's running vCPU not found in %" PRIu64
			   " callbacks: totals are exact, the split by vCPU is refused",
			   nvcpus, index_unresolved);
	pthread_mutex_lock(&lock);
	if (open >= 0) {	/* a window still open has what ran so far */
		snapshot(snap, 0, false, 0);
		add_window(open, snap);
	}
	if (out_path) {
		char *tmp = g_strdup_printf("%s.tmp%d", out_path, (int)getpid());
		FILE *f = fopen(tmp, "w");

		if (!f) {
			plugin_err("cannot write %s: %s", tmp, strerror(errno));
		} else {
			write_json(f);
			if (fclose(f) != 0)
				plugin_err("writing %s failed: %s", tmp, strerror(errno));
			else if (rename(tmp, out_path) != 0)
				plugin_err("cannot rename %s to %s: %s", tmp, out_path,
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
	pthread_mutex_unlock(&lock);
}

/* At install, and again after each reset (which drops them all). */
static void register_callbacks(qemu_plugin_id_t id)
{
	qemu_plugin_register_vcpu_tb_trans_cb(id, vcpu_tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
#if KLOC_INLINE
	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
#endif
}

/* Arguments */

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

/* cache=BYTES (K, M), assoc=N, line=BYTES */
static int parse_cache_arg(const char *key, const char *val)
{
	const char *e;
	uint64_t n;

	if (!parse_u64(val, &n, &e)) {
		plugin_err("%s=%s: want a number", key, val);
		return -1;
	}
	if (*e == 'K' || *e == 'k')
		n <<= 10, e++;
	else if (*e == 'M' || *e == 'm')
		n <<= 20, e++;
	if (*e || !n || n & (n - 1) || n > 1ULL << 32) {
		plugin_err("%s=%s: want a power of two (cache=: K and M suffixes)", key, val);
		return -1;
	}
	if (!strcmp(key, "cache")) {
		cache_bytes = n;
	} else if (!strcmp(key, "assoc")) {
		if (n > 64) {
			plugin_err("assoc=%s: at most 64 ways", val);
			return -1;
		}
		assoc = (unsigned int)n;
	} else {
		if (n < 8 || n > MAX_LINE) {
			plugin_err("line=%s: 8 to %d bytes (byte masks are 64 bits)", val,
				   MAX_LINE);
			return -1;
		}
		line_shift = (unsigned int)__builtin_ctzll(n);
	}
	return 0;
}

static int parse_args(int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		const char *val, *e;
		uint64_t lo, hi, n;

		if (!eq) {
			plugin_err("argument \"%s\" is not key=value", argv[i]);
			return -1;
		}
		*eq = '\0';
		val = eq + 1;
		if (!strcmp(argv[i], "out")) {
			out_path = g_strdup(val);
		} else if (!strcmp(argv[i], "node")) {
			/* node=N:LO-HI */
			if (!parse_u64(val, &n, &e) || *e != ':' || n >= MAX_NODES ||
			    !parse_u64(e + 1, &lo, &e) || *e != '-' ||
			    !parse_u64(e + 1, &hi, &e) || *e || lo > hi ||
			    nnoderanges >= MAX_SEGS) {
				plugin_err("node=%s: want node=N:LO-HI (N < %d, at most %d ranges)",
					   val, MAX_NODES, MAX_SEGS);
				return -1;
			}
			noderange[nnoderanges].lo = lo;
			noderange[nnoderanges].hi = hi;
			noderange[nnoderanges++].node = (int)n;
		} else if (!strcmp(argv[i], "cpus")) {
			if (!parse_range(val, &lo, &hi, &n, true) || hi >= MAX_VCPUS ||
			    n >= MAX_NODES) {
				plugin_err("cpus=%s: want cpus=A-B:N or cpus=A:N (vCPUs below %d)",
					   val, MAX_VCPUS);
				return -1;
			}
			for (uint64_t c = lo; c <= hi; c++)
				cpu_node[c] = (int)n;
		} else if (!strcmp(argv[i], "ram")) {
			if (!parse_range(val, &lo, &hi, &n, false) || nramargs >= MAX_SEGS) {
				plugin_err("ram=%s: want ram=LO-HI:GPA (at most %d)",
					   val, MAX_SEGS);
				return -1;
			}
			ramarg[nramargs].lo = lo;
			ramarg[nramargs].hi = hi;
			ramarg[nramargs++].gpa = n;
		} else if (!strcmp(argv[i], "cache") || !strcmp(argv[i], "assoc") ||
			   !strcmp(argv[i], "line")) {
			if (parse_cache_arg(argv[i], val))
				return -1;
		} else if (!strcmp(argv[i], "coherence") || !strcmp(argv[i], "count")) {
			bool first = !strcmp(argv[i], "coherence");
			const char *yes = first ? "on" : "all", *no = first ? "off" : "windows";

			if (strcmp(val, yes) && strcmp(val, no)) {
				plugin_err("%s=%s: want %s=%s or %s=%s", argv[i], val, argv[i], yes,
					   argv[i], no);
				return -1;
			}
			if (first)
				coherence = !strcmp(val, yes);
			else
				count_all = !strcmp(val, yes);
		} else if (!strcmp(argv[i], "percpu")) {
			if (!parse_u64(val, &percpu_addr, &e) || *e || !percpu_addr) {
				plugin_err("percpu=%s: want the address of __per_cpu_offset", val);
				return -1;
			}
		} else if (!strcmp(argv[i], "mem")) {
			if (strcmp(val, "windows") && strcmp(val, "always")) {
				plugin_err("mem=%s: want mem=windows or mem=always", val);
				return -1;
			}
			mem_always = !strcmp(val, "always");
		} else if (!strcmp(argv[i], "top") || !strcmp(argv[i], "pcs") ||
			   !strcmp(argv[i], "lines_max")) {
			if (!parse_u64(val, &n, &e) || *e || n > UINT32_MAX) {
				plugin_err("%s=%s: want a number", argv[i], val);
				return -1;
			}
			if (!strcmp(argv[i], "top"))
				top_n = (unsigned int)n;
			else if (!strcmp(argv[i], "pcs"))
				pcs_n = n < PC_SLOTS ? (unsigned int)n : PC_SLOTS;
			else
				lines_max = n;
		} else {
			plugin_err("unknown argument \"%s\"; known: out, node, cpus, ram, cache, assoc, line, coherence, count, percpu, mem, top, pcs, lines_max",
				   argv[i]);
			return -1;
		}
	}
	return 0;
}

static int node_of_gpa(uint64_t gpa)
{
	for (int i = 0; i < nnoderanges; i++)
		if (gpa >= noderange[i].lo && gpa <= noderange[i].hi)
			return noderange[i].node;
	return -1;
}

/* The RAM ranges, each in one node, with a line-state array each. */
static int make_segments(void)
{
	if (!nnoderanges) {
		plugin_err("no node= arguments: give the guest's RAM as node=N:LO-HI "
			   "(tools/kloc/counting/qemu_args.py derives them from the QEMU options)");
		return -1;
	}
	if (!nramargs) {	/* this QEMU reports guest-physical addresses */
		for (int i = 0; i < nnoderanges; i++) {
			ramarg[i].lo = noderange[i].lo;
			ramarg[i].hi = noderange[i].hi;
			ramarg[i].gpa = noderange[i].lo;
		}
		nramargs = nnoderanges;
	}
	for (int i = 0; i < nramargs; i++) {
		struct seg *s = &segs[nsegs++];
		uint64_t len = ramarg[i].hi - ramarg[i].lo + 1;
		int node = node_of_gpa(ramarg[i].gpa);

		if (node < 0 || node_of_gpa(ramarg[i].gpa + len - 1) != node) {
			plugin_err("ram=0x%" PRIx64 "-0x%" PRIx64 ":0x%" PRIx64
				   " is not inside one node= range", ramarg[i].lo, ramarg[i].hi,
				   ramarg[i].gpa);
			return -1;
		}
		s->raw_lo = ramarg[i].lo;
		s->raw_hi = ramarg[i].hi;
		s->gpa = ramarg[i].gpa;
		s->node = node;
		if ((ramarg[i].gpa | len) & ((1U << line_shift) - 1)) {
			plugin_err("ram range at 0x%" PRIx64 " of 0x%" PRIx64
				   " bytes is not in whole lines", ramarg[i].gpa, len);
			return -1;
		}
		s->nlines = (size_t)(len >> line_shift);
		/* Only the pages of states for lines the guest touches become resident. */
		s->lines = mmap(NULL, s->nlines * sizeof(uint64_t), PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (s->lines == MAP_FAILED) {
			plugin_err("cannot map %zu bytes of line states: %s",
				   s->nlines * sizeof(uint64_t), strerror(errno));
			return -1;
		}
		table_bytes += s->nlines * sizeof(uint64_t);
		for (int v = 0; v < nvcpus; v++) {
			s->win[v] = mmap(NULL, s->nlines * sizeof(struct win_line),
					 PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			if (s->win[v] == MAP_FAILED) {
				plugin_err("cannot map %zu bytes of window records: %s",
					   s->nlines * sizeof(struct win_line), strerror(errno));
				return -1;
			}
			table_bytes += s->nlines * sizeof(struct win_line);
		}
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
			   "QEMU's own header (tools/qemu-plugin/get-header.sh, then make -C "
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
	for (int i = 0; i < MAX_VCPUS; i++)
		cpu_node[i] = -1;
	if (parse_args(argc, argv) || make_segments())
		return -1;
	find_current_cpu();
	for (int i = 0; i < nvcpus; i++) {
		if (cpu_node[i] < 0) {
			plugin_err("vCPU %d has no node: give cpus=A-B:N for every vCPU", i);
			return -1;
		}
	}
	nsets = cache_bytes / ((uint64_t)assoc << line_shift);
	if (!nsets) {
		plugin_err("cache=%" PRIu64 " holds fewer than assoc=%u lines of %u bytes",
			   cache_bytes, assoc, 1U << line_shift);
		return -1;
	}
	vcpus = g_malloc0(sizeof(*vcpus) * (size_t)nvcpus);
	for (int i = 0; i < nvcpus; i++) {
		vcpus[i].node = cpu_node[i];
		pthread_mutex_init(&vcpus[i].touched_lock, NULL);
		vcpus[i].ways = g_malloc0(sizeof(struct way) * nsets * assoc);
	}
	hot = g_hash_table_new(g_int64_hash, g_int64_equal);
	if (count_all) {	/* one window, phase 0, from here to exit */
		windows[0] = 1;
		active_phase = 0;
	}
#if KLOC_INLINE
	plugin_id = id;
	mem_on = mem_always || count_all;
	score = qemu_plugin_scoreboard_new(sizeof(struct totals));
	insns_inline[0] = qemu_plugin_scoreboard_u64_in_struct(score, struct totals, insns[0]);
	insns_inline[1] = qemu_plugin_scoreboard_u64_in_struct(score, struct totals, insns[1]);
#endif
	register_callbacks(id);
	return 0;
}

#ifdef KLOC_TEST
/* For tests/fake-qemu.c (kloc-test.h) */

void kloc_test_set_epoch(uint64_t e)
{
	__atomic_store_n(&epoch, e, RELAXED);
}

void kloc_test_set_win_base(uint64_t n)
{
	win_base = n;
}

void kloc_test_marker(unsigned int vcpu_index, unsigned int kind, unsigned int phase)
{
	marker_exec(vcpu_index, (void *)(uintptr_t)KLOC_MARK_PAYLOAD(kind, phase));
}
#endif
