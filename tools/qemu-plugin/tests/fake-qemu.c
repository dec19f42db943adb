// SPDX-License-Identifier: GPL-2.0
/*
 * fake-qemu: kloc-count.c linked against a fake of the QEMU plugin API, fed
 * a script of guest accesses, so that the plugin's model can be checked
 * against exact expected counts (tools/tests/test_plugin_model.py).
 *
 *   fake-qemu SCRIPT OUT.json
 *
 * The script, one command a line ('#' starts a comment):
 *   arch x86_64|aarch64     the target (x86_64); markers are encoded for it
 *   vcpus N                 (4)
 *   arg KEY=VALUE           a plugin argument; repeat (out= is OUT.json)
 *   map VADDR PADDR         the 4 KiB page at VADDR is at PADDR (else identity)
 *   io LO HI                physical LO..HI is MMIO
 *   threads                 each vCPU runs in a thread of its own (MTTCG):
 *                           its commands between two "sync" lines run
 *                           concurrently with the other vCPUs'
 *   sync                    (threads) wait for every vCPU
 *   start V P | end V P     vCPU V executes a start or end marker of phase P
 *   load V ADDR SIZE [PC]   vCPU V executes one instruction at PC (by default
 *   store V ADDR SIZE [PC]  0x400000 + 16 x the script's line number: each line
 *                           its own instruction) that loads or stores SIZE
 *                           bytes at virtual ADDR
 *   rmw V ADDR SIZE [PC]    one instruction that loads, then stores, ADDR:
 *                           an atomic as QEMU reports it (in both thread modes)
 *   repeat N ... done       the commands between, N times (no nesting)
 *   baked                   TB and instruction callbacks get the index of
 *                           the vCPU after the running one, as QEMU 10 under
 *                           thread=single gives the translator's (memory
 *                           callbacks keep the running one's, as QEMU's)
 *   nocurrent               qemu_get_cpu() finds no vCPU: the plugin cannot
 *                           learn the running one
 *   wrongbase V             vCPU V's per-CPU base register holds vCPU V+1's
 *   epoch N                 (a command) the plugin's window epoch is now N
 *   winbase N               (a command) window records' loads start at N
 *   race E S                (a command) as the next access sets up its window
 *                           record, its vCPU ends phase E and starts phase S
 *
 * Each vCPU is a fake CPUState: current_cpu (thread-local, exported as
 * QEMU's is) names the one running a block, qemu_get_cpu(i) returns vCPU
 * i's. Its per-CPU base (percpu= argument: __per_cpu_offset[]) is
 * PERCPU_BASE(i) in gs_base (x86_64) or TPIDR_EL1 (aarch64).
 *
 * Every command is a translation block of one instruction, translated when
 * it runs (so a reset's change of instrumentation shows at once), then run:
 * its TB callbacks and inline ops, its instruction callbacks, then its
 * memory callbacks. A reset the plugin asks for happens after the block,
 * with every vCPU stopped, as QEMU does it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

#include "../kloc-marker.h"
#include "../kloc-test.h"

#define MAX_CBS 4
#define MAX_VCPUS 16
#define MAX_CMDS 4096
#define MAX_ARGS 32
#define MAX_MAPS 64
#define PAGE 4096ULL
#define PERCPU_BASE(v) (0xffff888000000000ULL + 0x40000ULL * (uint64_t)(v))

struct cb {
	void *fn;
	void *udata;
#if QEMU_PLUGIN_VERSION >= 2
	int inline_op;		/* an inline add: entry, imm */
	qemu_plugin_u64 entry;
	uint64_t imm;
#endif
};

struct qemu_plugin_insn {
	uint64_t vaddr;
	uint8_t bytes[8];
	size_t size;
	struct cb exec[MAX_CBS];
	int nexec;
	struct cb mem[MAX_CBS];
	int nmem;
};

struct qemu_plugin_tb {
	uint64_t vaddr;
	struct qemu_plugin_insn insn;
	struct cb exec[MAX_CBS];
	int nexec;
};

struct qemu_plugin_hwaddr {
	uint64_t phys;
	bool io;
};

#if QEMU_PLUGIN_VERSION >= 2
struct qemu_plugin_scoreboard {
	size_t size;
	uint8_t *data;
};
#endif

enum op { OP_START, OP_END, OP_LOAD, OP_STORE, OP_RMW, OP_SYNC, OP_REPEAT, OP_DONE,
	  OP_EPOCH, OP_WINBASE, OP_RACE };

struct cmd {
	enum op op;
	int vcpu;
	uint64_t addr, size, pc;
};

static const char *arch = "x86_64";
static int nvcpus = 4;
static bool threaded;
static char *args[MAX_ARGS];
static int nargs;
static struct { uint64_t v, p; } maps[MAX_MAPS];
static int nmaps;
static struct { uint64_t lo, hi; } ios[MAX_MAPS];
static int nios;
static struct cmd cmds[MAX_CMDS];
static int ncmds;

static qemu_plugin_vcpu_tb_trans_cb_t trans_cb;
static qemu_plugin_udata_cb_t atexit_cb;
static void *atexit_udata;
static qemu_plugin_vcpu_simple_cb_t init_cb;
static qemu_plugin_simple_cb_t reset_cb;
static bool reset_asked;
static pthread_rwlock_t exclusive = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t reset_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread struct qemu_plugin_hwaddr hwaddr;
static bool baked, nocurrent;
static int wrong_base = -1;
struct fake_cpu {
	int index;
};

static struct fake_cpu cpu_objs[MAX_VCPUS];
__thread void *current_cpu;
static int race_end = -1, race_start;
static uint64_t percpu_table;	/* the percpu= argument: __per_cpu_offset[] */

void kloc_test_window_record(void)
{
	int end = race_end;

	if (end < 0)
		return;
	race_end = -1;
	kloc_test_marker(0, KLOC_MARK_KIND_END, (unsigned int)end);
	kloc_test_marker(0, KLOC_MARK_KIND_START, (unsigned int)race_start);
}

void *qemu_get_cpu(int index)
{
	return nocurrent || index < 0 || index >= nvcpus ? NULL : &cpu_objs[index];
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("fake-qemu: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

/* The fake API: what kloc-count.c calls */

#if QEMU_PLUGIN_VERSION >= 4
static const char *base_reg_name(void)
{
	return strcmp(arch, "aarch64") ? "gs_base" : "TPIDR_EL1";
}

GArray *qemu_plugin_get_registers(void)
{
	GArray *a = g_array_new(FALSE, TRUE, sizeof(qemu_plugin_reg_descriptor));
	qemu_plugin_reg_descriptor d = { .handle = (struct qemu_plugin_register *)1,
					 .name = "rip" };

	g_array_append_val(a, d);
	d.handle = (struct qemu_plugin_register *)2;
	d.name = base_reg_name();
	g_array_append_val(a, d);
	return a;
}

int qemu_plugin_read_register(struct qemu_plugin_register *handle, GByteArray *buf)
{
	const struct fake_cpu *cpu = current_cpu;
	int v = cpu ? cpu->index : 0;
	uint64_t val = PERCPU_BASE(v == wrong_base ? (v + 1) % nvcpus : v);

	if (handle != (struct qemu_plugin_register *)2)
		val = 0x400000;
	g_byte_array_append(buf, (const guint8 *)&val, sizeof(val));
	return sizeof(val);
}

bool qemu_plugin_read_memory_vaddr(uint64_t addr, GByteArray *data, size_t len)
{
	if (!percpu_table || addr != percpu_table)
		return false;
	for (size_t k = 0; k < len / 8; k++) {
		uint64_t base = PERCPU_BASE(k);

		g_byte_array_append(data, (const guint8 *)&base, sizeof(base));
	}
	return true;
}
#endif

size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb)
{
	(void)tb;
	return 1;
}

struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx)
{
	return idx == 0 ? (struct qemu_plugin_insn *)&tb->insn : NULL;
}

uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb)
{
	return tb->vaddr;
}

uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn)
{
	return insn->vaddr;
}

size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn)
{
	return insn->size;
}

#if QEMU_PLUGIN_VERSION >= 3
size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *insn, void *dest, size_t len)
{
	if (len > insn->size)
		len = insn->size;
	memcpy(dest, insn->bytes, len);
	return len;
}
#else
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn)
{
	return insn->bytes;
}
#endif

static void add_cb(struct cb *list, int *n, void *fn, void *udata)
{
	if (*n >= MAX_CBS)
		die("more than %d callbacks on one block or instruction", MAX_CBS);
	list[*n] = (struct cb){ .fn = fn, .udata = udata };
	(*n)++;
}

void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
					  qemu_plugin_vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags flags, void *userdata)
{
	(void)flags;
	add_cb(tb->exec, &tb->nexec, (void *)cb, userdata);
}

void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
					    qemu_plugin_vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags, void *userdata)
{
	(void)flags;
	add_cb(insn->exec, &insn->nexec, (void *)cb, userdata);
}

void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn,
				      qemu_plugin_vcpu_mem_cb_t cb,
				      enum qemu_plugin_cb_flags flags,
				      enum qemu_plugin_mem_rw rw, void *userdata)
{
	(void)flags;
	if (rw != QEMU_PLUGIN_MEM_RW)
		die("the plugin asked for memory callbacks on %d, not on loads and stores", rw);
	add_cb(insn->mem, &insn->nmem, (void *)cb, userdata);
}

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
					   qemu_plugin_vcpu_tb_trans_cb_t cb)
{
	(void)id;
	trans_cb = cb;
}

void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
				    void *userdata)
{
	(void)id;
	atexit_cb = cb;
	atexit_udata = userdata;
}

void qemu_plugin_register_vcpu_init_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_simple_cb_t cb)
{
	(void)id;
	init_cb = cb;
}

void qemu_plugin_outs(const char *string)
{
	fputs(string, stdout);
}

/* meminfo: bits 0..3 the size shift, bit 4 a store (the fake's own encoding) */
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info)
{
	return info & 0x10;
}

unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info)
{
	return info & 0xf;
}

struct qemu_plugin_hwaddr *qemu_plugin_get_hwaddr(qemu_plugin_meminfo_t info, uint64_t vaddr)
{
	uint64_t page = vaddr & ~(PAGE - 1), phys = vaddr;

	(void)info;
	for (int i = 0; i < nmaps; i++)
		if (maps[i].v == page)
			phys = maps[i].p + (vaddr & (PAGE - 1));
	hwaddr.phys = phys;
	hwaddr.io = false;
	for (int i = 0; i < nios; i++)
		if (phys >= ios[i].lo && phys <= ios[i].hi)
			hwaddr.io = true;
	return &hwaddr;
}

bool qemu_plugin_hwaddr_is_io(const struct qemu_plugin_hwaddr *haddr)
{
	return haddr->io;
}

uint64_t qemu_plugin_hwaddr_phys_addr(const struct qemu_plugin_hwaddr *haddr)
{
	return haddr->phys;
}

void qemu_plugin_reset(qemu_plugin_id_t id, qemu_plugin_simple_cb_t cb)
{
	(void)id;
	pthread_mutex_lock(&reset_lock);
	if (!reset_asked) {	/* QEMU ignores one asked for during another */
		reset_asked = true;
		reset_cb = cb;
	}
	pthread_mutex_unlock(&reset_lock);
}

#if QEMU_PLUGIN_VERSION >= 2
int qemu_plugin_num_vcpus(void)
{
	return nvcpus;
}

struct qemu_plugin_scoreboard *qemu_plugin_scoreboard_new(size_t element_size)
{
	struct qemu_plugin_scoreboard *s = calloc(1, sizeof(*s));

	if (!s)
		die("out of memory");
	s->size = element_size;
	s->data = calloc((size_t)nvcpus, element_size);
	if (!s->data)
		die("out of memory");
	return s;
}

void qemu_plugin_scoreboard_free(struct qemu_plugin_scoreboard *score)
{
	free(score->data);
	free(score);
}

static uint64_t *u64_at(qemu_plugin_u64 entry, unsigned int vcpu_index)
{
	return (uint64_t *)(entry.score->data + vcpu_index * entry.score->size + entry.offset);
}

uint64_t qemu_plugin_u64_get(qemu_plugin_u64 entry, unsigned int vcpu_index)
{
	return __atomic_load_n(u64_at(entry, vcpu_index), __ATOMIC_RELAXED);
}

void qemu_plugin_register_vcpu_tb_exec_inline_per_vcpu(struct qemu_plugin_tb *tb,
						       enum qemu_plugin_op op,
						       qemu_plugin_u64 entry, uint64_t imm)
{
	if (op != QEMU_PLUGIN_INLINE_ADD_U64)
		die("inline op %d is not faked", op);
	add_cb(tb->exec, &tb->nexec, NULL, NULL);
	tb->exec[tb->nexec - 1].inline_op = 1;
	tb->exec[tb->nexec - 1].entry = entry;
	tb->exec[tb->nexec - 1].imm = imm;
}
#endif

/* The machine */

static void encode_marker(struct qemu_plugin_insn *insn, unsigned int kind, unsigned int phase)
{
	if (!strcmp(arch, "x86_64")) {
		uint32_t d = KLOC_MARK_IMM_X86(kind, phase);

		insn->size = 7;
		insn->bytes[0] = 0x0f;
		insn->bytes[1] = 0x1f;
		insn->bytes[2] = 0x80;
		memcpy(&insn->bytes[3], &d, 4);
	} else {
		uint32_t w = 0xd2e0001fU | (uint32_t)KLOC_MARK_IMM_A64(kind, phase) << 5;

		insn->size = 4;
		memcpy(insn->bytes, &w, 4);
	}
}

static void mem_cbs(unsigned int v, const struct qemu_plugin_insn *insn, uint64_t addr,
		    unsigned int shift, bool store)
{
	for (int i = 0; i < insn->nmem; i++) {
		qemu_plugin_vcpu_mem_cb_t cb = (qemu_plugin_vcpu_mem_cb_t)insn->mem[i].fn;

		cb(v, shift | (store ? 0x10 : 0), addr, insn->mem[i].udata);
	}
}

static void after_block(void)
{
	qemu_plugin_simple_cb_t cb = NULL;

	pthread_mutex_lock(&reset_lock);
	if (reset_asked)
		cb = reset_cb;
	pthread_mutex_unlock(&reset_lock);
	if (!cb)
		return;
	/* exclusive: every vCPU out of its block; the callbacks are dropped */
	pthread_rwlock_unlock(&exclusive);
	pthread_rwlock_wrlock(&exclusive);
	pthread_mutex_lock(&reset_lock);
	if (reset_asked) {
		trans_cb = NULL;
		atexit_cb = NULL;
		init_cb = NULL;
		reset_asked = false;
		cb(0);
	}
	pthread_mutex_unlock(&reset_lock);
	pthread_rwlock_unlock(&exclusive);
	pthread_rwlock_rdlock(&exclusive);
}

static void run_block(const struct cmd *c)
{
	struct qemu_plugin_tb tb;
	unsigned int v = (unsigned int)c->vcpu, shift;
	/* what TB and instruction callbacks are told: QEMU 10's baked index */
	unsigned int told = baked ? (v + 1) % (unsigned int)nvcpus : v;

	switch (c->op) {
	case OP_EPOCH:
		kloc_test_set_epoch(c->addr);
		return;
	case OP_WINBASE:
		kloc_test_set_win_base(c->addr);
		return;
	case OP_RACE:
		race_end = (int)c->addr;
		race_start = (int)c->size;
		return;
	default:
		break;
	}
	current_cpu = &cpu_objs[v];
	memset(&tb, 0, sizeof(tb));
	tb.vaddr = c->pc;
	tb.insn.vaddr = c->pc;
	if (c->op == OP_START || c->op == OP_END) {
		encode_marker(&tb.insn, c->op == OP_START ? KLOC_MARK_KIND_START :
				KLOC_MARK_KIND_END, (unsigned int)c->addr);
	} else {
		tb.insn.size = 4;	/* a plain instruction: bytes of no marker */
		memset(tb.insn.bytes, 0x90, sizeof(tb.insn.bytes));
	}
	pthread_rwlock_rdlock(&exclusive);
	if (trans_cb)
		trans_cb(0, &tb);
	for (int i = 0; i < tb.nexec; i++) {
#if QEMU_PLUGIN_VERSION >= 2
		if (tb.exec[i].inline_op) {
			uint64_t *p = u64_at(tb.exec[i].entry, v);

			__atomic_store_n(p, *p + tb.exec[i].imm, __ATOMIC_RELAXED);
			continue;
		}
#endif
		((qemu_plugin_vcpu_udata_cb_t)tb.exec[i].fn)(told, tb.exec[i].udata);
	}
	for (int i = 0; i < tb.insn.nexec; i++)
		((qemu_plugin_vcpu_udata_cb_t)tb.insn.exec[i].fn)(told, tb.insn.exec[i].udata);
	shift = (unsigned int)__builtin_ctzll(c->size ? c->size : 1);
	if (c->op == OP_LOAD || c->op == OP_RMW)
		mem_cbs(v, &tb.insn, c->addr, shift, false);
	if (c->op == OP_STORE || c->op == OP_RMW)
		mem_cbs(v, &tb.insn, c->addr, shift, true);
	after_block();
	pthread_rwlock_unlock(&exclusive);
}

/* Runs commands [from, to) for vCPU only (or every vCPU: -1), repeats expanded. */
static void run_range(int from, int to, int only)
{
	for (int i = from; i < to; i++) {
		const struct cmd *c = &cmds[i];

		if (c->op == OP_REPEAT) {
			int end = i + 1;

			while (cmds[end].op != OP_DONE)
				end++;
			for (uint64_t k = 0; k < c->addr; k++)
				run_range(i + 1, end, only);
			i = end;
		} else if (c->op != OP_SYNC && c->op != OP_DONE &&
			   (only < 0 || c->vcpu == only)) {
			run_block(c);
		}
	}
}

struct section {
	int from, to, vcpu;
	bool init;		/* the vCPU starts: its init callback first */
};

static void *vcpu_thread(void *arg)
{
	struct section *s = arg;
	qemu_plugin_vcpu_simple_cb_t cb;

	pthread_mutex_lock(&reset_lock);
	cb = s->init ? init_cb : NULL;
	pthread_mutex_unlock(&reset_lock);
	if (cb)
		cb(0, (unsigned int)s->vcpu);
	run_range(s->from, s->to, s->vcpu);
	return NULL;
}

/* threads: each section between syncs, every vCPU in a thread of its own */
static void run_threaded(void)
{
	int from = 0;

	while (from <= ncmds) {
		int to = from;
		pthread_t t[MAX_VCPUS];
		struct section s[MAX_VCPUS];

		while (to < ncmds && cmds[to].op != OP_SYNC)
			to++;
		for (int v = 0; v < nvcpus; v++) {
			s[v] = (struct section){ .from = from, .to = to, .vcpu = v,
						 .init = from == 0 };
			if (pthread_create(&t[v], NULL, vcpu_thread, &s[v]))
				die("pthread_create failed");
		}
		for (int v = 0; v < nvcpus; v++)
			pthread_join(t[v], NULL);
		from = to + 1;
	}
}

/* The script */

static uint64_t number(const char *s, int line)
{
	char *e;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &e, 0);
	if (errno || e == s || *e)
		die("line %d: \"%s\" is not an integer", line, s);
	return v;
}

static void parse(FILE *f)
{
	char buf[512];
	int line = 0, depth = 0;

	while (fgets(buf, sizeof(buf), f)) {
		char *w[6] = { 0 }, *hash = strchr(buf, '#'), *save = NULL;
		int n = 0;
		struct cmd *c;

		line++;
		if (hash)
			*hash = '\0';
		for (char *t = strtok_r(buf, " \t\n", &save); t && n < 6;
		     t = strtok_r(NULL, " \t\n", &save))
			w[n++] = t;
		if (!n)
			continue;
		if (!strcmp(w[0], "arch") && n == 2) {
			arch = strdup(w[1]);
			continue;
		}
		if (!strcmp(w[0], "vcpus") && n == 2) {
			nvcpus = (int)number(w[1], line);
			if (nvcpus < 1 || nvcpus > MAX_VCPUS)
				die("line %d: 1 to %d vCPUs", line, MAX_VCPUS);
			continue;
		}
		if (!strcmp(w[0], "arg") && n == 2 && nargs < MAX_ARGS - 1) {
			args[nargs++] = strdup(w[1]);
			if (!strncmp(w[1], "percpu=", 7))
				percpu_table = strtoull(w[1] + 7, NULL, 0);
			continue;
		}
		if (!strcmp(w[0], "map") && n == 3 && nmaps < MAX_MAPS) {
			maps[nmaps].v = number(w[1], line);
			maps[nmaps++].p = number(w[2], line);
			continue;
		}
		if (!strcmp(w[0], "io") && n == 3 && nios < MAX_MAPS) {
			ios[nios].lo = number(w[1], line);
			ios[nios++].hi = number(w[2], line);
			continue;
		}
		if (!strcmp(w[0], "threads") && n == 1) {
			threaded = true;
			continue;
		}
		if (!strcmp(w[0], "baked") && n == 1) {
			baked = true;
			continue;
		}
		if (!strcmp(w[0], "nocurrent") && n == 1) {
			nocurrent = true;
			continue;
		}
		if (!strcmp(w[0], "wrongbase") && n == 2) {
			wrong_base = (int)number(w[1], line);
			continue;
		}
		if (ncmds >= MAX_CMDS)
			die("line %d: more than %d commands", line, MAX_CMDS);
		c = &cmds[ncmds++];
		memset(c, 0, sizeof(*c));
		c->pc = 0x400000 + 16 * (uint64_t)line;
		if (!strcmp(w[0], "sync") && n == 1) {
			c->op = OP_SYNC;
		} else if (!strcmp(w[0], "repeat") && n == 2 && !depth++) {
			c->op = OP_REPEAT;
			c->addr = number(w[1], line);
		} else if (!strcmp(w[0], "done") && n == 1 && depth--) {
			c->op = OP_DONE;
		} else if ((!strcmp(w[0], "epoch") || !strcmp(w[0], "winbase")) && n == 2) {
			c->op = w[0][0] == 'e' ? OP_EPOCH : OP_WINBASE;
			c->addr = number(w[1], line);
		} else if (!strcmp(w[0], "race") && n == 3) {
			c->op = OP_RACE;
			c->addr = number(w[1], line);
			c->size = number(w[2], line);
		} else if ((!strcmp(w[0], "start") || !strcmp(w[0], "end")) && n == 3) {
			c->op = w[0][0] == 's' ? OP_START : OP_END;
			c->vcpu = (int)number(w[1], line);
			c->addr = number(w[2], line);
		} else if ((!strcmp(w[0], "load") || !strcmp(w[0], "store") ||
			    !strcmp(w[0], "rmw")) && (n == 4 || n == 5)) {
			c->op = w[0][0] == 'l' ? OP_LOAD : w[0][0] == 's' ? OP_STORE : OP_RMW;
			c->vcpu = (int)number(w[1], line);
			c->addr = number(w[2], line);
			c->size = number(w[3], line);
			if (n == 5)
				c->pc = number(w[4], line);
			if (!c->size || c->size > 16 || c->size & (c->size - 1))
				die("line %d: a size of 1, 2, 4, 8 or 16 bytes", line);
		} else {
			die("line %d: cannot read \"%s\" (see the top of fake-qemu.c)", line, w[0]);
		}
		if (c->vcpu < 0 || c->vcpu >= nvcpus)
			die("line %d: no vCPU %d", line, c->vcpu);
	}
	if (depth)
		die("a repeat without its done");
}

int main(int argc, char **argv)
{
	qemu_info_t info;
	FILE *f;
	char *out;

	if (argc != 3)
		die("usage: fake-qemu SCRIPT OUT.json");
	f = fopen(argv[1], "r");
	if (!f)
		die("%s: %s", argv[1], strerror(errno));
	parse(f);
	fclose(f);
	if (asprintf(&out, "out=%s", argv[2]) < 0)
		die("out of memory");
	args[nargs++] = out;
	memset(&info, 0, sizeof(info));
	info.target_name = arch;
	info.version.min = QEMU_PLUGIN_VERSION;
	info.version.cur = QEMU_PLUGIN_VERSION;
	info.system_emulation = true;
	info.system.smp_vcpus = nvcpus;
	info.system.max_vcpus = nvcpus;
	for (int v = 0; v < MAX_VCPUS; v++)
		cpu_objs[v].index = v;
	if (qemu_plugin_install(0, &info, nargs, args))
		die("the plugin refused to install");
	if (threaded) {
		run_threaded();
	} else {
		for (int v = 0; v < nvcpus; v++)
			if (init_cb)
				init_cb(0, (unsigned int)v);
		run_range(0, ncmds, -1);
	}
	if (atexit_cb)
		atexit_cb(0, atexit_udata);
	return 0;
}
