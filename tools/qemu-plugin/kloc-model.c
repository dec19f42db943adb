// SPDX-License-Identifier: GPL-2.0
/*
 * kloc-count's model: a private cache per vCPU and a directory per line of
 * guest RAM, fed every load and store inside a window, in the order QEMU
 * runs them; the transfers between caches, their true and false sharing,
 * the contended accesses of each window, and the most contended lines with
 * the PCs on each side. docs/counting.md ("The cache model") says what it
 * counts and what it leaves out.
 *
 * Threads: a vCPU's cache, read-modify-write state and window records are
 * written only by the thread running it (other threads read a cache's tags
 * and byte masks, and the records, with atomic loads); the directory words
 * change by compare-and-swap; the table of contended lines has a lock of
 * its own (hot_lock), and each vCPU's list of lines it touched in the
 * window another (touched_lock), taken by the vCPU and as the window closes.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <glib.h>

#include "kloc-count.h"

#define RMW_LINES 4		/* lines one instruction's loads may touch */
/*
 * A window's epoch: bits 21..63 of a directory word. 2^43 - 1 windows are
 * not reached (a window a microsecond for 101 days); past them every line
 * state is cleared and the epochs start again (model_open_window()).
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

/* A vCPU as the model sees it: its node, its cache, its last instruction's lines. */
struct core {
	int node;
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

static const struct kloc_config *cfg;
static int nvcpus;
static unsigned int assoc, line_shift;
static uint64_t nsets;
static struct core *cores;
static struct seg segs[MAX_SEGS];
static int nsegs;
static size_t table_bytes;
static uint64_t epoch = 1;	/* atomic; line states of another epoch are invalid */
static uint64_t win_base;	/* a window record's first count: 0, but in tests */

static pthread_mutex_t hot_lock = PTHREAD_MUTEX_INITIALIZER;
static GHashTable *hot;		/* key -> struct hot_line */
static uint64_t lines_held, transfers_dropped;

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

static struct way *cache_set(struct core *v, uint64_t line)
{
	return &v->ways[(line & (nsets - 1)) * assoc];
}

/* The way of v's cache with line, or NULL; any thread may look. */
static struct way *cache_find(struct core *v, uint64_t line)
{
	struct way *set = cache_set(v, line);

	for (unsigned int i = 0; i < assoc; i++)
		if (__atomic_load_n(&set[i].tag, RELAXED) == line + 1)
			return &set[i];
	return NULL;
}

/* Called by v's own thread: its cache as the window's epoch wants it. */
static void cache_epoch(struct core *v)
{
	uint64_t e = __atomic_load_n(&epoch, RELAXED);

	if (__atomic_load_n(&v->cache_epoch, RELAXED) == e)
		return;
	for (uint64_t i = 0; i < nsets * assoc; i++)
		__atomic_store_n(&v->ways[i].tag, 0, RELAXED);
	__atomic_store_n(&v->cache_epoch, e, RELAXED);
}

/* Bring line into v's cache: into w if it still has the tag, else the LRU way. */
static struct way *cache_fill(struct core *v, unsigned int vi, uint64_t line, struct way *w)
{
	if (!w) {
		struct way *set = cache_set(v, line);

		w = &set[0];
		for (unsigned int i = 0; i < assoc; i++) {
			if (!set[i].tag || (cfg->coherence && !dir_holds(set[i].tag - 1, vi))) {
				w = &set[i];	/* empty, or invalidated by another vCPU */
				break;
			}
			if (set[i].stamp < w->stamp)
				w = &set[i];
		}
		if (w->tag && cfg->coherence)
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

static enum rmw rmw_step(struct core *v, uint64_t line, bool store, uint64_t pc, bool took)
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
static void rmw_note(struct core *v, uint64_t line, bool false_sharing, uint64_t peer_pc)
{
	int i = v->rmw_n - 1;

	if (v->rmw_open && !v->rmw_stored && i >= 0 && v->rmw_line[i] == line) {
		v->rmw_false[i] = false_sharing;
		v->rmw_peer_pc[i] = peer_pc;
	}
}

/* The peer PC of the false-sharing transfer the RMW's load of line made. */
static uint64_t rmw_peer_pc(struct core *v, uint64_t line)
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
		w = cache_find(&cores[i], line);
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

static void line_event(struct core *v, int phase, uint64_t lg, uint64_t vaddr, int node,
		       unsigned int vi, const struct transfer *t)
{
	uint64_t key = hot_key(lg, phase);
	enum line_vcpu lv = t->kind == XF_INVAL ? LV_INVAL :
			    t->remote ? LV_HITM_REMOTE : LV_HITM_LOCAL;
	struct hot_line *h;
	struct pc_slot *slot;
	uint64_t *pv;

	pthread_mutex_lock(&hot_lock);
	h = v->last_hot && v->last_key == key ? v->last_hot :
	    g_hash_table_lookup(hot, &key);
	if (!h) {
		if (lines_held >= cfg->lines_max) {
			transfers_dropped++;
			pthread_mutex_unlock(&hot_lock);
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
	pthread_mutex_unlock(&hot_lock);
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
	pthread_mutex_lock(&hot_lock);
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
	pthread_mutex_unlock(&hot_lock);
}

/*
 * vCPU vi's access to line idx of segment s, in its window record. The
 * store of a read-modify-write turns its load into one store: one access.
 */
static void win_access(struct core *v, unsigned int vi, struct seg *s, size_t idx,
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
 * Called under the window lock as a window closes, for each vCPU x: its
 * contended accesses in the window, and their false part, into c, from the
 * window's records of every vCPU (docs/counting.md, "contended accesses").
 */
void model_close_window(unsigned int x, struct counts *c)
{
	uint64_t e = __atomic_load_n(&epoch, RELAXED);
	struct core *v = &cores[x];

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

			if (y == (int)x || __atomic_load_n(&o->epoch, RELAXED) != e)
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

/*
 * One access of vCPU vi to one line, at guest-physical lg, of bytes (a mask)
 * of it: the cache and the directory, then the transfer it makes, if any.
 */
static void line_access(const struct access *a, struct seg *s, uint64_t lg, uint64_t vaddr,
			uint64_t bytes)
{
	unsigned int vi = a->vcpu;
	struct core *v = &cores[vi];
	struct counts *c = a->c;
	bool store = a->store;
	uint64_t line = lg >> line_shift, pc = a->pc;
	uint64_t *word = &s->lines[(lg - s->gpa) >> line_shift];
	struct way *w;
	struct transfer t = { .kind = XF_NONE, .pc = pc };
	uint32_t from = 0;
	enum rmw rmw;
	bool hit;
	int peer;

	cache_epoch(v);
	w = cache_find(v, line);
	if (cfg->coherence)
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
		rmw_recount_true(c, a->phase, lg, vi, pc, rmw_peer_pc(v, line));
	if (t.kind == XF_NONE || rmw == RMW_TOOK || rmw == RMW_TOOK_FALSE)
		return;		/* no transfer, or the RMW's load made it */
	t.false_sharing = !true_sharing(line, from, t.lo | t.so, t.so, &peer, &t.peer_pc);
	if (!store)
		rmw_note(v, line, t.false_sharing, t.peer_pc);
	t.remote = t.kind == XF_HITM && peer >= 0 && cores[peer].node != v->node;
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
	line_event(v, a->phase, lg, vaddr, s->node, vi, &t);
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
static void access_lines(const struct access *a, struct seg *s, uint64_t gpa, uint64_t vaddr,
			 unsigned int size)
{
	uint64_t first = gpa >> line_shift, last = (gpa + size - 1) >> line_shift;

	for (uint64_t l = first; l <= last; l++) {
		uint64_t lg = l << line_shift;

		if (lg > s->gpa + (s->raw_hi - s->raw_lo))
			break;	/* the rest is in another range: not modelled */
		line_access(a, s, lg, vaddr + (lg > gpa ? lg - gpa : 0), line_bytes(gpa, size, lg));
	}
}

/*
 * The bytes [vaddr, vaddr + size) of one page, at raw (the physical
 * address QEMU gave): first for the access's first page, which counts it
 * as local, remote or unmapped. Whether raw is in the RAM map.
 */
bool model_access(const struct access *a, uint64_t raw, uint64_t vaddr, unsigned int size,
		  bool first)
{
	struct seg *s = seg_of(raw);

	if (!s) {
		a->c->unmapped += first;
		return false;
	}
	if (first && s->node == cores[a->vcpu].node)
		a->c->local++;
	else if (first)
		a->c->remote++;
	access_lines(a, s, gpa_of(s, raw), vaddr, size);
	return true;
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
		__atomic_store_n(&cores[v].cache_epoch, 0, RELAXED);
}

/* A window opens: every line invalid in every vCPU's cache. */
void model_open_window(void)
{
	uint64_t e = __atomic_load_n(&epoch, RELAXED);

	if (e >= EPOCH_MAX) {
		clear_epochs();
		e = 0;
	}
	__atomic_store_n(&epoch, e + 1, RELAXED);
}

/* Output */

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
	for (int i = 0; i < PC_SLOTS && shown < cfg->pcs_n; i++) {
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

/* The phase's contended lines: how many, and the top= first by rank. */
void model_write_lines(FILE *f, int p)
{
	GPtrArray *lines = g_ptr_array_new();
	GHashTableIter it;
	gpointer k, val;

	g_hash_table_iter_init(&it, hot);
	while (g_hash_table_iter_next(&it, &k, &val)) {
		struct hot_line *h = val;

		if ((h->key & 0xff) == (uint64_t)p)
			g_ptr_array_add(lines, h);
	}
	g_ptr_array_sort(lines, by_rank);
	fprintf(f, ", \"contended_lines\": %u, \"lines\": [", lines->len);
	for (unsigned int i = 0; i < lines->len && i < cfg->top_n; i++) {
		if (i)
			fputs(", ", f);
		write_line(f, g_ptr_array_index(lines, i));
	}
	fputs("]", f);
	g_ptr_array_free(lines, TRUE);
}

/* The model's geometry, its RAM map and its table of lines. */
void model_write_config(FILE *f)
{
	fprintf(f, ", \"line_bytes\": %u, \"cache\": {\"bytes\": %" PRIu64 ", \"assoc\": %u"
		", \"sets\": %" PRIu64 ", \"coherence\": %s}, \"line_table_bytes\": %zu"
		", \"segments\": [", 1U << line_shift, cfg->cache_bytes, assoc, nsets,
		cfg->coherence ? "true" : "false", table_bytes);
	for (int i = 0; i < nsegs; i++)
		fprintf(f, "%s{\"raw\": [\"0x%" PRIx64 "\", \"0x%" PRIx64 "\"], \"gpa\": \"0x%"
			PRIx64 "\", \"node\": %d}", i ? ", " : "", segs[i].raw_lo,
			segs[i].raw_hi, segs[i].gpa, segs[i].node);
	fprintf(f, "], \"lines_max\": %" PRIu64 ", \"transfers_dropped\": %" PRIu64,
		cfg->lines_max, transfers_dropped);
}

/* The RAM map */

static int node_of_gpa(uint64_t gpa)
{
	for (int i = 0; i < cfg->nnodes; i++)
		if (gpa >= cfg->node[i].lo && gpa <= cfg->node[i].hi)
			return cfg->node[i].node;
	return -1;
}

/* The RAM ranges, each in one node, with a line-state array each. */
static int make_segments(void)
{
	struct ram_arg ram[MAX_SEGS];
	int nram = cfg->nram;

	if (!cfg->nnodes) {
		plugin_err("no node= arguments: give the guest's RAM as node=N:LO-HI "
			   "(tools/kloc/counting/qemu_args.py derives them from the QEMU options)");
		return -1;
	}
	memcpy(ram, cfg->ram, sizeof(ram));
	if (!nram) {	/* this QEMU reports guest-physical addresses */
		for (int i = 0; i < cfg->nnodes; i++) {
			ram[i].lo = cfg->node[i].lo;
			ram[i].hi = cfg->node[i].hi;
			ram[i].gpa = cfg->node[i].lo;
		}
		nram = cfg->nnodes;
	}
	for (int i = 0; i < nram; i++) {
		struct seg *s = &segs[nsegs++];
		uint64_t len = ram[i].hi - ram[i].lo + 1;
		int node = node_of_gpa(ram[i].gpa);

		if (node < 0 || node_of_gpa(ram[i].gpa + len - 1) != node) {
			plugin_err("ram=0x%" PRIx64 "-0x%" PRIx64 ":0x%" PRIx64
				   " is not inside one node= range", ram[i].lo, ram[i].hi,
				   ram[i].gpa);
			return -1;
		}
		s->raw_lo = ram[i].lo;
		s->raw_hi = ram[i].hi;
		s->gpa = ram[i].gpa;
		s->node = node;
		if ((ram[i].gpa | len) & ((1U << line_shift) - 1)) {
			plugin_err("ram range at 0x%" PRIx64 " of 0x%" PRIx64
				   " bytes is not in whole lines", ram[i].gpa, len);
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

/* At install: the caches, the RAM map, the table; c stays the plugin's. */
int model_init(const struct kloc_config *c)
{
	cfg = c;
	nvcpus = c->nvcpus;
	assoc = (unsigned int)c->assoc;
	line_shift = (unsigned int)__builtin_ctzll(c->line_bytes);
	nsets = c->cache_bytes / (c->assoc << line_shift);
	if (!nsets) {
		plugin_err("cache=%" PRIu64 " holds fewer than assoc=%u lines of %u bytes",
			   c->cache_bytes, assoc, 1U << line_shift);
		return -1;
	}
	if (make_segments())
		return -1;
	cores = g_malloc0(sizeof(*cores) * (size_t)nvcpus);
	for (int i = 0; i < nvcpus; i++) {
		cores[i].node = c->cpu_node[i];
		pthread_mutex_init(&cores[i].touched_lock, NULL);
		cores[i].ways = g_malloc0(sizeof(struct way) * nsets * assoc);
	}
	hot = g_hash_table_new(g_int64_hash, g_int64_equal);
	return 0;
}

/* At exit, once the vCPUs have stopped. */
void model_free(void)
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
		g_free(cores[i].ways);
		g_free(cores[i].touched);
	}
	g_free(cores);
	cores = NULL;
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
#endif
