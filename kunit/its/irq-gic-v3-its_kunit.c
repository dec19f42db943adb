// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the GICv3 ITS driver: NUMA placement of every page the
 * driver allocates for an ITS, and clean failure when an allocation fails.
 *
 * This file is #included at the end of irq-gic-v3-its.c, so that it can
 * drive the driver's static functions. Most cases probe an emulated ITS: a
 * register frame in ordinary memory, whose GITS_TYPER and GITS_BASERn the
 * test chooses, a GITS_BASERn write path that keeps the read-only fields
 * and drops the page sizes and indirection the layout does not support, and
 * a kthread that retires every command at once. The real ITS that the
 * kernel probed at boot is checked too.
 *
 * The driver reaches the tests through irq-gic-v3-its_kunit_seam.h, which
 * it includes after its own includes: the page and slab allocations and
 * frees, ioremap() and GITS_BASERn writes of the driver are renamed there
 * to redirection points, and the driver's own lines stay as they are. The
 * tests stand in for those points while a case probes an ITS or creates a
 * device (the seam's "window"), to count what is live and to make the Nth
 * allocation fail; frees are followed at all times.
 *
 * Where ITTs come from itt_alloc_pool() (Linux 6.13 on), an ITT smaller
 * than a page is carved from pages the pool keeps for good: those pages
 * leave the test's accounting once the pool holds them.
 */

#include <kunit/test.h>
#include <kunit/test-bug.h>
#include <kunit/resource.h>
#include <linux/align.h>
#include <linux/ioport.h>
#include <linux/kthread.h>
#include <linux/nodemask.h>

/*
 * What the tests need to know of the driver they are built into (each
 * kernel's copy of the package says): ITS_KUNIT_NODE_INIT where
 * its_node_init() maps the ITS and allocates its its_node, apart from
 * its_probe_one() (Linux 6.7 on), ITS_KUNIT_ITT_POOL where small ITTs come
 * from itt_pool (6.13 on).
 */
#include "irq-gic-v3-its_kunit_compat.h"
#include "irq-gic-v3-its_kunit_seam.h"

#define ITS_KUNIT_MAX_LIVE	256
#define ITS_KUNIT_MAX_FREED	64
#define ITS_KUNIT_MAX_INJECT	64
#define ITS_KUNIT_MAX_ITS	16
#define ITS_KUNIT_FRAME_SZ	SZ_64K

/* GITS_BASERn.Type; arm-gic-v3.h has only its shift */
#define ITS_KUNIT_BASER_TYPE_MASK	GENMASK_ULL(58, 56)
/* GITS_BASERn fields that software cannot change */
#define ITS_KUNIT_BASER_RO	(ITS_KUNIT_BASER_TYPE_MASK | GITS_BASER_ENTRY_SIZE_MASK)
/* A valid level-1 entry: the physical address of its level-2 page */
#define ITS_KUNIT_LVL1_ADDR_MASK	GENMASK_ULL(51, 12)

/* GITS_PIDR2.ArchRev of a GICv3 ITS */
#define ITS_KUNIT_PIDR2_GICV3		0x30

/* What the emulated ITS reports in GITS_TYPER, and its other tables */
#define ITS_KUNIT_ID_BITS		16
#define ITS_KUNIT_ITT_ENTRY_SZ		8
#define ITS_KUNIT_COLLECTION_ESZ	16
#define ITS_KUNIT_VPE_ESZ		32

/* Vectors of a device: its ITT is smaller than a page, or two pages */
#define ITS_KUNIT_NVECS		32
#define ITS_KUNIT_NVECS_BIG	(2 * PAGE_SIZE / ITS_KUNIT_ITT_ENTRY_SZ)

/* ITT granules of the pool that a case can hold back */
#define ITS_KUNIT_MAX_DRAINED	1024

/*
 * Page sizes an emulated ITS supports, one bit per GITS_BASER page-size
 * code (GIC_PAGE_SIZE_4K, _16K, _64K).
 */
#define ITS_KUNIT_PSZ(code)	BIT(code)
#define ITS_KUNIT_PSZ_4K	ITS_KUNIT_PSZ(GIC_PAGE_SIZE_4K)
#define ITS_KUNIT_PSZ_16K	ITS_KUNIT_PSZ(GIC_PAGE_SIZE_16K)
#define ITS_KUNIT_PSZ_64K	ITS_KUNIT_PSZ(GIC_PAGE_SIZE_64K)
#define ITS_KUNIT_PSZ_ALL	(ITS_KUNIT_PSZ_4K | ITS_KUNIT_PSZ_16K | ITS_KUNIT_PSZ_64K)

/* An allocation the seam handed out, and not yet given back. */
struct its_kunit_live {
	const void *addr;
	size_t size;		/* slab object size asked for; 0 for pages */
	unsigned int order;	/* page order */
	void *caller;
};

/* Where the test stands in the seam: what is live, and what must fail. */
struct its_kunit_its;

struct its_kunit_seam {
	struct its_kunit_its *emulated[ITS_KUNIT_MAX_ITS];
	bool active;		/* allocations are watched: a window is open */
	int calls;		/* allocations asked for */
	int fail_at;		/* 1-based call to fail; 0: none */
	int allocs;		/* allocations that succeeded */
	int frees;		/* given back, or kept by the ITT pool */
	int bad_frees;		/* given back twice, or as the wrong kind */
	int overflow;		/* allocations past ITS_KUNIT_MAX_LIVE */
	struct its_kunit_live live[ITS_KUNIT_MAX_LIVE];
	const void *freed[ITS_KUNIT_MAX_FREED];	/* recently given back */
	unsigned int next_freed;
};

struct its_kunit_its {
	const struct its_kunit_layout *layout;
	int node;
	struct resource res;
	struct its_node *its;
	void *frame;
	struct fwnode_handle *fwnode;
	struct task_struct *retire;
	bool probed;
};

/*
 * Layouts of the emulated ITS, chosen through GITS_TYPER and GITS_BASERn,
 * and what the driver must make of them.
 */
struct its_kunit_layout {
	const char *name;
	u32 devbits;		/* device ID bits */
	u64 basers[3];		/* type | entry size, per GITS_BASERn */
	u32 psz_ok;		/* ITS_KUNIT_PSZ_* the ITS supports */
	bool indirect_ok;	/* whether it supports two-level tables */
	/* expected device table */
	u32 want_psz;
	bool want_indirect;
	u32 want_order;
};

#define ITS_KUNIT_BASER(type, esz)					\
	(((u64)(type) << GITS_BASER_TYPE_SHIFT) |			\
	 ((u64)((esz) - 1) << GITS_BASER_ENTRY_SIZE_SHIFT))

#define ITS_KUNIT_TABLES(dev_esz)					\
	{								\
		ITS_KUNIT_BASER(GITS_BASER_TYPE_DEVICE, dev_esz),	\
		ITS_KUNIT_BASER(GITS_BASER_TYPE_COLLECTION,		\
				ITS_KUNIT_COLLECTION_ESZ),		\
		ITS_KUNIT_BASER(GITS_BASER_TYPE_VCPU, ITS_KUNIT_VPE_ESZ), \
	}

enum its_kunit_layout_id {
	ITS_KUNIT_64K_FLAT,
	ITS_KUNIT_64K_INDIRECT,
	ITS_KUNIT_16K_FLAT,
	ITS_KUNIT_4K_INDIRECT,
	ITS_KUNIT_4K_FLAT_CLAMPED,
	ITS_KUNIT_NR_LAYOUTS
};

static const struct its_kunit_layout its_kunit_layouts[ITS_KUNIT_NR_LAYOUTS] = {
	[ITS_KUNIT_64K_FLAT] = {
		.name = "64K flat",
		.devbits = 8,
		.basers = ITS_KUNIT_TABLES(8),
		.psz_ok = ITS_KUNIT_PSZ_ALL,
		.indirect_ok = true,
		.want_psz = SZ_64K,
		.want_indirect = false,
		.want_order = 16 - PAGE_SHIFT,
	},
	[ITS_KUNIT_64K_INDIRECT] = {
		.name = "64K indirect",
		.devbits = 20,
		.basers = ITS_KUNIT_TABLES(8),
		.psz_ok = ITS_KUNIT_PSZ_ALL,
		.indirect_ok = true,
		.want_psz = SZ_64K,
		.want_indirect = true,
		.want_order = 16 - PAGE_SHIFT,
	},
	[ITS_KUNIT_16K_FLAT] = {
		.name = "16K flat",
		.devbits = 10,
		.basers = ITS_KUNIT_TABLES(16),
		.psz_ok = ITS_KUNIT_PSZ_16K,
		.indirect_ok = true,
		.want_psz = SZ_16K,
		.want_indirect = false,
		.want_order = 14 - PAGE_SHIFT,
	},
	[ITS_KUNIT_4K_INDIRECT] = {
		.name = "4K indirect",
		.devbits = 16,
		.basers = ITS_KUNIT_TABLES(8),
		.psz_ok = ITS_KUNIT_PSZ_4K,
		.indirect_ok = true,
		.want_psz = SZ_4K,
		.want_indirect = true,
		.want_order = 0,
	},
	[ITS_KUNIT_4K_FLAT_CLAMPED] = {
		/* 8 MiB of flat table, clamped to GITS_BASER_PAGES_MAX 4K pages */
		.name = "4K flat over PAGES_MAX",
		.devbits = 20,
		.basers = ITS_KUNIT_TABLES(8),
		.psz_ok = ITS_KUNIT_PSZ_4K,
		.indirect_ok = false,
		.want_psz = SZ_4K,
		.want_indirect = false,
		.want_order = 20 - PAGE_SHIFT,
	},
};

static void its_kunit_layout_desc(const struct its_kunit_layout *l, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%s", l->name);
}

KUNIT_ARRAY_PARAM(its_kunit_layout, its_kunit_layouts, its_kunit_layout_desc);

/* A placement case: one layout of emulated ITS, on one node. */
struct its_kunit_placement {
	const struct its_kunit_layout *layout;	/* NULL: past the last */
	int node;				/* NUMA_NO_NODE or an online node */
};

/* Every layout on NUMA_NO_NODE and on each online node, filled as KUnit asks. */
static struct its_kunit_placement
its_kunit_placements[ITS_KUNIT_NR_LAYOUTS * (MAX_NUMNODES + 1) + 1];

static void its_kunit_fill_placements(void)
{
	struct its_kunit_placement *p = its_kunit_placements;
	const struct its_kunit_layout *l;
	int node;

	for (l = its_kunit_layouts; l < its_kunit_layouts + ITS_KUNIT_NR_LAYOUTS; l++) {
		p->layout = l;
		p->node = NUMA_NO_NODE;
		p++;
		for_each_online_node(node) {
			p->layout = l;
			p->node = node;
			p++;
		}
	}
	p->layout = NULL;
}

/* generate_params() takes the test first where KUnit has ..._PARAM_WITH_INIT */
#ifdef KUNIT_CASE_PARAM_WITH_INIT
static const void *its_kunit_placement_gen_params(struct kunit *test,
						  const void *prev, char *desc)
#else
static const void *its_kunit_placement_gen_params(const void *prev, char *desc)
#endif
{
	const struct its_kunit_placement *p = prev;

	if (!p) {
		its_kunit_fill_placements();
		p = its_kunit_placements;
	} else {
		p++;
	}
	if (!p->layout)
		return NULL;
	if (p->node == NUMA_NO_NODE)
		snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%s on NUMA_NO_NODE", p->layout->name);
	else
		snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%s on node %d", p->layout->name, p->node);
	return p;
}

/*
 * Managed clean-up, run in reverse order at the end of the case. A KUnit
 * resource rather than kunit_add_action_or_reset(), which Linux 6.1 lacks.
 */
struct its_kunit_deferred {
	void (*fn)(void *data);
	void *data;
};

static int its_kunit_deferred_init(struct kunit_resource *res, void *context)
{
	res->data = context;
	return 0;
}

static void its_kunit_deferred_free(struct kunit_resource *res)
{
	struct its_kunit_deferred *d = res->data;

	d->fn(d->data);
	its_kunit_real_kfree(d);
}

static int its_kunit_defer(struct kunit *test, void (*fn)(void *), void *data)
{
	struct its_kunit_deferred *d = its_kunit_real_kmalloc(sizeof(*d), GFP_KERNEL);

	if (!d) {
		fn(data);
		return -ENOMEM;
	}
	d->fn = fn;
	d->data = data;
	if (!kunit_alloc_resource(test, its_kunit_deferred_init,
				  its_kunit_deferred_free, GFP_KERNEL, d)) {
		fn(data);
		its_kunit_real_kfree(d);
		return -ENOMEM;
	}
	return 0;
}

/* The seam's stand-ins. They run only in the test's own thread. */
static struct its_kunit_seam *its_kunit_seam_of_current(void)
{
	struct kunit *test = current->kunit_test;

	return test ? test->priv : NULL;
}

/* The seam the driver's call should go through: NULL outside a window. */
static struct its_kunit_seam *its_kunit_watching(void)
{
	struct its_kunit_seam *seam = its_kunit_seam_of_current();

	return seam && seam->active ? seam : NULL;
}

/* Whether the next allocation is the one to fail; counts the call. */
static bool its_kunit_fail_now(struct its_kunit_seam *seam)
{
	return ++seam->calls == seam->fail_at;
}

static struct its_kunit_live *its_kunit_find_live(struct its_kunit_seam *seam, const void *addr)
{
	int i;

	for (i = 0; i < ITS_KUNIT_MAX_LIVE; i++) {
		if (seam->live[i].addr && seam->live[i].addr == addr)
			return &seam->live[i];
	}
	return NULL;
}

static void its_kunit_track(struct its_kunit_seam *seam, const void *addr, size_t size,
			    unsigned int order, void *caller)
{
	int i;

	/* the address is live again: it is no longer a freed one */
	for (i = 0; i < ITS_KUNIT_MAX_FREED; i++) {
		if (seam->freed[i] == addr)
			seam->freed[i] = NULL;
	}
	for (i = 0; i < ITS_KUNIT_MAX_LIVE; i++) {
		if (!seam->live[i].addr) {
			seam->live[i].addr = addr;
			seam->live[i].size = size;
			seam->live[i].order = order;
			seam->live[i].caller = caller;
			seam->allocs++;
			return;
		}
	}
	seam->overflow++;
	kunit_fail_current_test("more than %d live ITS allocations: %p from %pS is not tracked",
				ITS_KUNIT_MAX_LIVE, addr, caller);
}

/*
 * What a free of @addr should do. A tracked allocation is forgotten and
 * given back; an address the seam gave back already is a double free,
 * which fails the case and is not passed on; anything else the driver
 * allocated before the case, and is the kernel's to free.
 */
enum its_kunit_free {
	ITS_KUNIT_FREE_TRACKED,
	ITS_KUNIT_FREE_FOREIGN,
	ITS_KUNIT_FREE_TWICE,
};

static enum its_kunit_free its_kunit_untrack(struct its_kunit_seam *seam, const void *addr,
					     bool slab, unsigned int *order)
{
	struct its_kunit_live *l = its_kunit_find_live(seam, addr);
	int i;

	if (l) {
		if (slab != !!l->size || (!slab && *order != l->order)) {
			seam->bad_frees++;
			kunit_fail_current_test("%p from %pS (%s, order %u) freed as %s, order %u",
						addr, l->caller, l->size ? "slab" : "pages",
						l->order, slab ? "slab" : "pages", *order);
		}
		*order = l->order;	/* give back what was taken */
		l->addr = NULL;
		seam->frees++;
		seam->freed[seam->next_freed++ % ITS_KUNIT_MAX_FREED] = addr;
		return ITS_KUNIT_FREE_TRACKED;
	}
	for (i = 0; i < ITS_KUNIT_MAX_FREED; i++) {
		if (seam->freed[i] == addr) {
			seam->bad_frees++;
			return ITS_KUNIT_FREE_TWICE;
		}
	}
	return ITS_KUNIT_FREE_FOREIGN;
}

static struct page *its_kunit_alloc_pages_node(int node, gfp_t gfp, unsigned int order)
{
	struct its_kunit_seam *seam = its_kunit_watching();
	struct page *page;

	if (seam && its_kunit_fail_now(seam))
		return NULL;
	page = its_kunit_real_alloc_pages_node(node, gfp, order);
	if (seam && page)
		its_kunit_track(seam, page_address(page), 0, order,
				__builtin_return_address(0));
	return page;
}

static struct page *its_kunit_alloc_pages(gfp_t gfp, unsigned int order)
{
	struct its_kunit_seam *seam = its_kunit_watching();
	struct page *page;

	if (seam && its_kunit_fail_now(seam))
		return NULL;
	page = its_kunit_real_alloc_pages(gfp, order);
	if (seam && page)
		its_kunit_track(seam, page_address(page), 0, order,
				__builtin_return_address(0));
	return page;
}

static void its_kunit_free_pages(unsigned long addr, unsigned int order)
{
	struct its_kunit_seam *seam = its_kunit_seam_of_current();

	if (!addr)
		return;
	if (seam && its_kunit_untrack(seam, (void *)addr, false, &order) == ITS_KUNIT_FREE_TWICE) {
		kunit_fail_current_test("free_pages(%#lx, order %u) twice", addr, order);
		return;
	}
	its_kunit_real_free_pages(addr, order);
}

/* The slab allocations: one stand-in, whichever of kmalloc() and co. */
static void *its_kunit_slab(struct its_kunit_seam *seam, void *p, size_t size, void *caller)
{
	if (p)
		its_kunit_track(seam, p, max_t(size_t, size, 1), 0, caller);
	return p;
}

static void *its_kunit_kmalloc(size_t size, gfp_t gfp)
{
	struct its_kunit_seam *seam = its_kunit_watching();

	if (!seam)
		return its_kunit_real_kmalloc(size, gfp);
	if (its_kunit_fail_now(seam))
		return NULL;
	return its_kunit_slab(seam, its_kunit_real_kmalloc(size, gfp), size,
			      __builtin_return_address(0));
}

static void *its_kunit_kzalloc(size_t size, gfp_t gfp)
{
	struct its_kunit_seam *seam = its_kunit_watching();

	if (!seam)
		return its_kunit_real_kzalloc(size, gfp);
	if (its_kunit_fail_now(seam))
		return NULL;
	return its_kunit_slab(seam, its_kunit_real_kzalloc(size, gfp), size,
			      __builtin_return_address(0));
}

static void *its_kunit_kzalloc_node(size_t size, gfp_t gfp, int node)
{
	struct its_kunit_seam *seam = its_kunit_watching();

	if (!seam)
		return its_kunit_real_kzalloc_node(size, gfp, node);
	if (its_kunit_fail_now(seam))
		return NULL;
	return its_kunit_slab(seam, its_kunit_real_kzalloc_node(size, gfp, node), size,
			      __builtin_return_address(0));
}

static void *its_kunit_kcalloc(size_t n, size_t size, gfp_t gfp)
{
	struct its_kunit_seam *seam = its_kunit_watching();

	if (!seam)
		return its_kunit_real_kcalloc(n, size, gfp);
	if (its_kunit_fail_now(seam))
		return NULL;
	return its_kunit_slab(seam, its_kunit_real_kcalloc(n, size, gfp), n * size,
			      __builtin_return_address(0));
}

static void *its_kunit_kmalloc_array(size_t n, size_t size, gfp_t gfp)
{
	struct its_kunit_seam *seam = its_kunit_watching();

	if (!seam)
		return its_kunit_real_kmalloc_array(n, size, gfp);
	if (its_kunit_fail_now(seam))
		return NULL;
	return its_kunit_slab(seam, its_kunit_real_kmalloc_array(n, size, gfp), n * size,
			      __builtin_return_address(0));
}

/* The address is looked up before anything reads the object: no ksize(). */
static void its_kunit_kfree(const void *p)
{
	struct its_kunit_seam *seam = its_kunit_seam_of_current();
	unsigned int order = 0;

	if (ZERO_OR_NULL_PTR(p))
		return;
	if (seam && its_kunit_untrack(seam, p, true, &order) == ITS_KUNIT_FREE_TWICE) {
		kunit_fail_current_test("kfree(%p) twice", p);
		return;
	}
	its_kunit_real_kfree(p);
}

/* The emulated ITS whose register frame holds @addr, or NULL. */
static struct its_kunit_its *its_kunit_frame_of(const void __iomem *addr)
{
	struct its_kunit_seam *seam = its_kunit_seam_of_current();
	int i;

	for (i = 0; seam && i < ITS_KUNIT_MAX_ITS; i++) {
		struct its_kunit_its *e = seam->emulated[i];
		const void *frame = e ? e->frame : NULL;
		const void *va = (const void __force *)addr;

		if (frame && va >= frame && va < frame + ITS_KUNIT_FRAME_SZ)
			return e;
	}
	return NULL;
}

/* Mapping an emulated ITS's registers gives its frame in memory. */
static void __iomem *its_kunit_ioremap(phys_addr_t phys, size_t size)
{
	struct its_kunit_seam *seam = its_kunit_seam_of_current();
	int i;

	for (i = 0; seam && i < ITS_KUNIT_MAX_ITS; i++) {
		struct its_kunit_its *e = seam->emulated[i];

		if (e && phys == e->res.start && size <= ITS_KUNIT_FRAME_SZ)
			return (void __iomem __force *)e->frame;
	}
	return its_kunit_real_ioremap(phys, size);
}

static void its_kunit_iounmap(void __iomem *addr)
{
	if (!its_kunit_frame_of(addr))
		its_kunit_real_iounmap(addr);
}

/* The ITS_KUNIT_PSZ_* bit of a GITS_BASERn value's page size */
static u32 its_kunit_psz_flag(u64 val)
{
	u64 code = FIELD_GET(GITS_BASER_PAGE_SIZE_MASK, val);

	/* the reserved code 3 means 64K, as in the driver */
	return ITS_KUNIT_PSZ(min_t(u64, code, GIC_PAGE_SIZE_64K));
}

/*
 * What the emulated ITS keeps of a GITS_BASERn write: the type and entry
 * size are read-only, an unsupported page size reads back as the largest
 * supported one, and indirection reads back as zero when unsupported.
 * GITS_BASERn past the layout's tables implement nothing.
 */
static u64 its_kunit_baser_written(const struct its_kunit_layout *l, unsigned int idx, u64 val)
{
	if (idx >= ARRAY_SIZE(l->basers))
		return 0;
	val = (val & ~ITS_KUNIT_BASER_RO) | (l->basers[idx] & ITS_KUNIT_BASER_RO);
	if (!(its_kunit_psz_flag(val) & l->psz_ok)) {
		u64 psz = l->psz_ok & ITS_KUNIT_PSZ_64K ? GIC_PAGE_SIZE_64K :
			  l->psz_ok & ITS_KUNIT_PSZ_16K ? GIC_PAGE_SIZE_16K :
			  GIC_PAGE_SIZE_4K;

		val &= ~GITS_BASER_PAGE_SIZE_MASK;
		val |= FIELD_PREP(GITS_BASER_PAGE_SIZE_MASK, psz);
	}
	if (!l->indirect_ok)
		val &= ~GITS_BASER_INDIRECT;
	return val;
}

static void its_kunit_gits_write_baser(u64 val, void __iomem *addr)
{
	struct its_kunit_its *e = its_kunit_frame_of(addr);

	if (e) {
		void __iomem *base = (void __iomem __force *)e->frame + GITS_BASER;

		val = its_kunit_baser_written(e->layout, (addr - base) / sizeof(u64), val);
	}
	its_kunit_real_gits_write_baser(val, addr);
}

/* The test's stand-ins take the seam's redirection points until the case ends. */
static void its_kunit_unstub(void *unused)
{
	memset(&its_kunit_seam_redirect, 0, sizeof(its_kunit_seam_redirect));
}

static void its_kunit_stub(struct kunit *test)
{
	its_kunit_seam_redirect = (struct its_kunit_seam_table) {
		.alloc_pages_node_fn = its_kunit_alloc_pages_node,
		.alloc_pages_fn = its_kunit_alloc_pages,
		.free_pages_fn = its_kunit_free_pages,
		.kmalloc_fn = its_kunit_kmalloc,
		.kzalloc_fn = its_kunit_kzalloc,
		.kzalloc_node_fn = its_kunit_kzalloc_node,
		.kcalloc_fn = its_kunit_kcalloc,
		.kmalloc_array_fn = its_kunit_kmalloc_array,
		.kfree_fn = its_kunit_kfree,
		.ioremap_fn = its_kunit_ioremap,
		.iounmap_fn = its_kunit_iounmap,
		.gits_write_baser_fn = its_kunit_gits_write_baser,
	};
	KUNIT_ASSERT_EQ(test, its_kunit_defer(test, its_kunit_unstub, NULL), 0);
}

#ifdef ITS_KUNIT_ITT_POOL
/* Whether itt_alloc_pool() made the memory at @addr part of its pool. */
static bool its_kunit_pooled(const void *addr, size_t size)
{
	return itt_pool && gen_pool_has_addr(itt_pool, (unsigned long)addr, size);
}
#else
static bool its_kunit_pooled(const void *addr, size_t size)
{
	return false;
}
#endif

/* Pages the ITT pool now holds are the pool's: they leave the accounting. */
static void its_kunit_forget_pooled(struct its_kunit_seam *seam)
{
	int i;

	for (i = 0; i < ITS_KUNIT_MAX_LIVE; i++) {
		if (seam->live[i].addr && !seam->live[i].size &&
		    its_kunit_pooled(seam->live[i].addr, PAGE_SIZE << seam->live[i].order)) {
			seam->live[i].addr = NULL;
			seam->frees++;
		}
	}
}

/*
 * Give back what a failed case left, so that one leak stays one. This runs
 * after every other clean-up of the case, the unprobing of emulated ITSs
 * included: managed actions run in reverse order.
 */
static void its_kunit_reap(void *data)
{
	struct its_kunit_seam *seam = data;
	int i;

	its_kunit_forget_pooled(seam);
	for (i = 0; i < ITS_KUNIT_MAX_LIVE; i++) {
		if (!seam->live[i].addr)
			continue;
		if (seam->live[i].size)
			its_kunit_real_kfree(seam->live[i].addr);
		else
			its_kunit_real_free_pages((unsigned long)seam->live[i].addr,
						  seam->live[i].order);
		seam->live[i].addr = NULL;
	}
}

/*
 * The seam header must come before the driver's code, or none of the
 * driver's calls reach the stand-ins above and every check would pass
 * without looking.
 */
#ifdef ITS_KUNIT_SEAM_LATE
static const bool its_kunit_seam_late = true;
#else
static const bool its_kunit_seam_late;
#endif

static int its_kunit_init(struct kunit *test)
{
	struct its_kunit_seam *seam;

	seam = kunit_kzalloc(test, sizeof(*seam), GFP_KERNEL);
	if (!seam)
		return -ENOMEM;
	test->priv = seam;
	if (its_kunit_defer(test, its_kunit_reap, seam))
		return -ENOMEM;
	its_kunit_stub(test);
	return 0;
}

static int its_kunit_outstanding(struct kunit *test)
{
	struct its_kunit_seam *seam = test->priv;
	int i;

	its_kunit_forget_pooled(seam);
	for (i = 0; i < ITS_KUNIT_MAX_LIVE; i++) {
		if (seam->live[i].addr && seam->live[i].size)
			kunit_info(test, "live: %zu-byte object %p from %pS\n",
				   seam->live[i].size, seam->live[i].addr,
				   seam->live[i].caller);
		else if (seam->live[i].addr)
			kunit_info(test, "live: order-%u page %p from %pS\n",
				   seam->live[i].order, seam->live[i].addr,
				   seam->live[i].caller);
	}
	return seam->allocs - seam->frees;
}

/*
 * Whether [va, va + 1) lies in memory a redirection point handed out (or
 * in the ITT pool, which keeps pages the seam handed out before). A
 * placement check of memory the seam never saw would not be one.
 */
static void its_kunit_expect_seen(struct kunit *test, const char *what, const void *va)
{
	struct its_kunit_seam *seam = test->priv;
	int i;

	for (i = 0; i < ITS_KUNIT_MAX_LIVE; i++) {
		const void *start = seam->live[i].addr;
		size_t size = seam->live[i].size ?: PAGE_SIZE << seam->live[i].order;

		if (start && va >= start && va < start + size)
			return;
	}
	if (va && its_kunit_pooled(va, 1))
		return;
	KUNIT_FAIL(test,
		   "%s at %p did not come through a redirection point of irq-gic-v3-its_kunit_seam.h (alloc_pages_node(), alloc_pages(), kzalloc_node(), ...): its placement cannot be checked",
		   what, va);
}

/* The emulated ITS retires every command as soon as it is posted. */
static int its_kunit_retire_fn(void *data)
{
	void __iomem *base = (void __iomem __force *)data;

	while (!kthread_should_stop()) {
		writeq_relaxed(readq_relaxed(base + GITS_CWRITER), base + GITS_CREADR);
		usleep_range(20, 50);
	}
	return 0;
}

static void its_kunit_stop_retire(void *data)
{
	kthread_stop(data);
}

static void its_kunit_free_fwnode(void *data)
{
	irq_domain_free_fwnode(data);
}

static struct irq_domain *its_kunit_domain(struct its_kunit_its *e)
{
	return irq_find_matching_fwnode(e->fwnode, DOMAIN_BUS_ANY);
}

/* The its_node that the driver registered for @e, or NULL. */
static struct its_node *its_kunit_registered(struct its_kunit_its *e)
{
	void __iomem *base = (void __iomem __force *)e->frame;
	struct its_node *pos, *found = NULL;

	raw_spin_lock(&its_lock);
	list_for_each_entry(pos, &its_nodes, entry) {
		if (pos->base == base)
			found = pos;
	}
	raw_spin_unlock(&its_lock);
	return found;
}

#ifdef ITS_KUNIT_ITT_POOL
static void its_kunit_free_cmdq(struct its_node *its)
{
	its_free_pages(its->cmd_base, get_order(ITS_CMD_QUEUE_SZ));
}
#else
static void its_kunit_free_cmdq(struct its_node *its)
{
	free_pages((unsigned long)its->cmd_base, get_order(ITS_CMD_QUEUE_SZ));
}
#endif

/* Undo a successful probe of an emulated ITS, as far as the driver can. */
static void its_kunit_unprobe(void *data)
{
	struct its_kunit_its *e = data;
	struct its_node *its = e->its;
	struct irq_domain *domain;

	if (!e->probed)
		return;
	e->probed = false;
	raw_spin_lock(&its_lock);
	list_del_init(&its->entry);
	raw_spin_unlock(&its_lock);
	domain = its_kunit_domain(e);
	if (domain) {
		void *info = domain->host_data;

		irq_domain_remove(domain);
		kfree(info);
	}
	kfree(its->collections);
	its->collections = NULL;
	its_free_tables(its);
	its_kunit_free_cmdq(its);
	its->cmd_base = NULL;
#ifdef ITS_KUNIT_NODE_INIT
	its_node_destroy(its);
#else
	kfree(its);
#endif
	e->its = NULL;
}

/* Reset @e's register frame to a quiescent, disabled ITS of its layout. */
static void its_kunit_reset(struct its_kunit_its *e)
{
	const struct its_kunit_layout *l = e->layout;
	void __iomem *base = (void __iomem __force *)e->frame;
	int i;

	memset(e->frame, 0, ITS_KUNIT_FRAME_SZ);
	writel_relaxed(ITS_KUNIT_PIDR2_GICV3, base + GITS_PIDR2);
	writel_relaxed(GITS_CTLR_QUIESCENT, base + GITS_CTLR);
	writeq_relaxed(FIELD_PREP(GITS_TYPER_DEVBITS, l->devbits - 1) |
		       FIELD_PREP(GITS_TYPER_IDBITS, ITS_KUNIT_ID_BITS - 1) |
		       FIELD_PREP(GITS_TYPER_ITT_ENTRY_SIZE, ITS_KUNIT_ITT_ENTRY_SZ - 1) |
		       GITS_TYPER_PLPIS, base + GITS_TYPER);
	for (i = 0; i < ARRAY_SIZE(l->basers); i++)
		writeq_relaxed(l->basers[i], base + GITS_BASER + i * 8);
}

/* An emulated ITS with the given layout, ready to probe; freed at test end. */
static struct its_kunit_its *its_kunit_new(struct kunit *test,
					   const struct its_kunit_layout *l,
					   int node)
{
	struct its_kunit_seam *seam = test->priv;
	struct its_kunit_its *e;
	int i;

	KUNIT_ASSERT_FALSE_MSG(test, its_kunit_seam_late,
			       "irq-gic-v3-its.c includes tests/irq-gic-v3-its_kunit_seam.h after its own code, or not at all: no allocation of the driver reaches the tests");
	e = kunit_kzalloc(test, sizeof(*e), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, e);
	for (i = 0; i < ITS_KUNIT_MAX_ITS && seam->emulated[i]; i++)
		;
	KUNIT_ASSERT_LT_MSG(test, i, ITS_KUNIT_MAX_ITS, "more than %d emulated ITSs",
			    ITS_KUNIT_MAX_ITS);
	e->layout = l;
	e->node = node;
	e->frame = kunit_kzalloc(test, ITS_KUNIT_FRAME_SZ, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, e->frame);
	e->res.start = virt_to_phys(e->frame);
	e->res.end = e->res.start + ITS_KUNIT_FRAME_SZ - 1;
	e->res.flags = IORESOURCE_MEM;
	e->res.name = "kunit-its";
	its_kunit_reset(e);
	seam->emulated[i] = e;

	e->fwnode = irq_domain_alloc_named_fwnode("kunit-its");
	KUNIT_ASSERT_NOT_NULL(test, e->fwnode);
	KUNIT_ASSERT_EQ(test, its_kunit_defer(test, its_kunit_free_fwnode, e->fwnode), 0);

	e->retire = kthread_run(its_kunit_retire_fn, e->frame, "kunit-its-retire");
	KUNIT_ASSERT_FALSE(test, IS_ERR(e->retire));
	KUNIT_ASSERT_EQ(test, its_kunit_defer(test, its_kunit_stop_retire, e->retire), 0);
	return e;
}

/*
 * Probe @e as the driver probes an ITS it finds in firmware, from mapping
 * its registers on: its_node_init() and its_probe_one() from Linux 6.7,
 * its_probe_one() alone before. The probe path is __init code, so the
 * cases that drive it are __init too, and their suites run from the init
 * section.
 */
static int __init its_kunit_probe_new(struct kunit *test, struct its_kunit_its *e)
{
	struct its_kunit_seam *seam = test->priv;
	int err;

	seam->active = true;
#ifdef ITS_KUNIT_NODE_INIT
	{
		struct its_node *its = its_node_init(&e->res, e->fwnode, e->node);

		err = its ? its_probe_one(its) : -ENOMEM;
		if (err && its)
			its_node_destroy(its);
	}
#else
	err = its_probe_one(&e->res, e->fwnode, e->node);
#endif
	seam->active = false;
	if (!err) {
		e->its = its_kunit_registered(e);
		KUNIT_ASSERT_NOT_NULL_MSG(test, e->its, "probed, but not on its_nodes");
		e->probed = true;
		KUNIT_ASSERT_EQ(test, its_kunit_defer(test, its_kunit_unprobe, e), 0);
	}
	return err;
}

/* Create a device on @its with the seam watching. */
static struct its_device *its_kunit_create_device(struct kunit *test, struct its_node *its,
						  u32 dev_id, int nvecs)
{
	struct its_kunit_seam *seam = test->priv;
	struct its_device *dev;

	seam->active = true;
	dev = its_create_device(its, dev_id, nvecs, false);
	seam->active = false;
	return dev;
}

/*
 * Check that every page that [va, va + size) touches sits on @node, the
 * node of @owner ("the ITS", "CPU 2"). NUMA_NO_NODE asks only that the
 * memory be on some online node.
 */
static void its_kunit_expect_owned_on_node(struct kunit *test, const char *what,
					   const void *va, size_t size, int node,
					   const char *owner)
{
	const void *first = PTR_ALIGN_DOWN(va, PAGE_SIZE);
	size_t i, pages;

	KUNIT_ASSERT_NOT_NULL_MSG(test, va, "%s was not allocated", what);
	pages = (va + max_t(size_t, size, 1) - 1 - first) / PAGE_SIZE + 1;
	for (i = 0; i < pages; i++) {
		struct page *page = virt_to_page(first + i * PAGE_SIZE);
		int nid = page_to_nid(page);

		if (node == NUMA_NO_NODE)
			KUNIT_EXPECT_TRUE_MSG(test, node_online(nid),
					      "%s page %zu of %zu is on offline node %d",
					      what, i + 1, pages, nid);
		else
			KUNIT_EXPECT_EQ_MSG(test, nid, node,
					    "%s page %zu of %zu (pfn %#lx) is on node %d, %s on node %d",
					    what, i + 1, pages, page_to_pfn(page), nid, owner,
					    node);
	}
}

static void its_kunit_expect_on_node(struct kunit *test, const char *what,
				     const void *va, size_t size, int node)
{
	its_kunit_expect_owned_on_node(test, what, va, size, node, "the ITS");
}

/* The bytes of @dev's ITT that the ITS uses. */
static size_t its_kunit_itt_size(struct its_node *its, struct its_device *dev)
{
	return dev->nr_ites * (FIELD_GET(GITS_TYPER_ITT_ENTRY_SIZE, its->typer) + 1);
}

static void its_kunit_expect_tables_on_node(struct kunit *test, struct its_node *its,
					    int node)
{
	char what[64];
	int i;

	its_kunit_expect_on_node(test, "command queue", its->cmd_base,
				 ITS_CMD_QUEUE_SZ, node);
	for (i = 0; i < GITS_BASER_NR_REGS; i++) {
		struct its_baser *baser = &its->tables[i];

		if (!baser->base)
			continue;
		snprintf(what, sizeof(what), "GITS_BASER%d %s table (%s)", i,
			 its_base_type_string[GITS_BASER_TYPE(baser->val)],
			 baser->val & GITS_BASER_INDIRECT ? "indirect" : "flat");
		its_kunit_expect_on_node(test, what, baser->base,
					 PAGE_ORDER_TO_SIZE(baser->order), node);
	}
}

/* The command queue and every table came through the seam. */
static void its_kunit_expect_tables_seen(struct kunit *test, struct its_node *its)
{
	int i;

	its_kunit_expect_seen(test, "command queue", its->cmd_base);
	for (i = 0; i < GITS_BASER_NR_REGS; i++) {
		struct its_baser *baser = &its->tables[i];
		const char *type = its_base_type_string[GITS_BASER_TYPE(baser->val)];

		if (baser->base)
			its_kunit_expect_seen(test, type, baser->base);
	}
}

/* The level-2 page that holds @id's entry in an indirect table. */
static void *its_kunit_lvl2(struct its_baser *baser, u32 id)
{
	u32 esz = GITS_BASER_ENTRY_SIZE(baser->val);
	__le64 *table = baser->base;
	u64 entry = le64_to_cpu(table[id >> ilog2(baser->psz / esz)]);

	if (!(entry & GITS_BASER_VALID))
		return NULL;
	return phys_to_virt(entry & ITS_KUNIT_LVL1_ADDR_MASK);
}

static struct its_baser *its_kunit_device_table(struct kunit *test, struct its_node *its)
{
	struct its_baser *baser = its_get_baser(its, GITS_BASER_TYPE_DEVICE);

	KUNIT_ASSERT_NOT_NULL_MSG(test, baser, "the ITS has no device table");
	return baser;
}

static void its_kunit_unpin(void *unused)
{
	set_cpus_allowed_ptr(current, cpu_possible_mask);
}

/*
 * Run the rest of the case on a CPU away from @node, when there is one, so
 * that an allocation that forgets the ITS's node lands on the wrong one.
 */
static void its_kunit_pin_away_from(struct kunit *test, int node)
{
	int cpu;

	if (node == NUMA_NO_NODE)
		return;
	for_each_online_cpu(cpu) {
		if (cpu_to_node(cpu) == node)
			continue;
		KUNIT_ASSERT_EQ(test, set_cpus_allowed_ptr(current, cpumask_of(cpu)), 0);
		KUNIT_ASSERT_EQ(test, its_kunit_defer(test, its_kunit_unpin, NULL), 0);
		kunit_info(test, "allocating from CPU %d, on node %d\n", cpu, cpu_to_node(cpu));
		return;
	}
}

/*
 * A device ID near the top of the layout's ID space: in an indirect table
 * its level-2 page is far from the first one; a flat table holds only the
 * IDs its pages have room for.
 */
static u32 its_kunit_high_dev_id(const struct its_kunit_layout *l, struct its_baser *dt)
{
	u32 dev_id = BIT(l->devbits) - 3;

	if (l->want_indirect)
		return dev_id;
	return min_t(u32, dev_id,
		     PAGE_ORDER_TO_SIZE(dt->order) / GITS_BASER_ENTRY_SIZE(dt->val) - 1);
}

static void its_kunit_free_device(void *dev)
{
	its_free_device(dev);
}

/*
 * Probe an emulated ITS of one layout on one node (or NUMA_NO_NODE), from
 * a CPU on another node. The command queue and every table must sit on the
 * ITS's node, and so must the level-2 device table page and the ITT of a
 * device created afterwards. That ITT is two pages: one smaller than a page
 * may come from a pool that the boot and earlier cases filled (6.13 on),
 * which would make the case's outcome depend on them, and on the CPU the
 * NUMA_NO_NODE case ran on. Small ITTs are its_kunit_itts_on_their_its_node's.
 */
static void __init its_kunit_probe_places_all_on_node(struct kunit *test)
{
	const struct its_kunit_placement *p = test->param_value;
	const struct its_kunit_layout *l = p->layout;
	struct its_baser *dt;
	struct its_device *dev;
	struct its_kunit_its *e;
	u32 dev_id;

	its_kunit_pin_away_from(test, p->node);
	e = its_kunit_new(test, l, p->node);
	KUNIT_ASSERT_EQ_MSG(test, its_kunit_probe_new(test, e), 0,
			    "%s ITS on node %d failed to probe", l->name, p->node);
	dt = its_kunit_device_table(test, e->its);
	KUNIT_EXPECT_EQ_MSG(test, dt->psz, l->want_psz, "%s: device table page size", l->name);
	KUNIT_EXPECT_EQ_MSG(test, !!(dt->val & GITS_BASER_INDIRECT), l->want_indirect,
			    "%s: device table indirection", l->name);
	KUNIT_EXPECT_EQ_MSG(test, dt->order, l->want_order, "%s: device table order", l->name);
	its_kunit_expect_tables_on_node(test, e->its, p->node);
	its_kunit_expect_tables_seen(test, e->its);

	dev_id = its_kunit_high_dev_id(l, dt);
	dev = its_kunit_create_device(test, e->its, dev_id, ITS_KUNIT_NVECS_BIG);
	KUNIT_ASSERT_NOT_NULL_MSG(test, dev, "creating device %#x on the %s ITS", dev_id, l->name);
	KUNIT_ASSERT_EQ(test, its_kunit_defer(test, its_kunit_free_device, dev), 0);
	if (l->want_indirect) {
		its_kunit_expect_seen(test, "level-2 device table", its_kunit_lvl2(dt, dev_id));
		its_kunit_expect_on_node(test, "level-2 device table",
					 its_kunit_lvl2(dt, dev_id), dt->psz, p->node);
	}
	its_kunit_expect_seen(test, "device ITT", dev->itt);
	its_kunit_expect_on_node(test, "device ITT", dev->itt,
				 its_kunit_itt_size(e->its, dev), p->node);
}

/*
 * An ITS on each online node (up to ITS_KUNIT_MAX_ITS), and devices
 * created on them in turn, from a CPU away from the last one's node, with
 * ITTs smaller than a page and larger, twice over. Every device's ITT
 * must sit on its own ITS's node, whichever ITS allocated one before it.
 */
static void __init its_kunit_itts_on_their_its_node(struct kunit *test)
{
	static const u32 nvecs[] = { ITS_KUNIT_NVECS, ITS_KUNIT_NVECS_BIG };
	const struct its_kunit_layout *l = &its_kunit_layouts[ITS_KUNIT_64K_INDIRECT];
	struct its_kunit_its *e[ITS_KUNIT_MAX_ITS];
	struct its_device *dev;
	int node, n = 0, i, r;
	char what[80];

	if (num_online_nodes() < 2)
		kunit_skip(test, "needs two online NUMA nodes");
	for_each_online_node(node) {
		if (n == ITS_KUNIT_MAX_ITS)
			break;
		e[n] = its_kunit_new(test, l, node);
		KUNIT_ASSERT_EQ_MSG(test, its_kunit_probe_new(test, e[n]), 0,
				    "ITS on node %d failed to probe", node);
		n++;
	}
	its_kunit_pin_away_from(test, e[n - 1]->its->numa_node);
	for (r = 0; r < 2 * ARRAY_SIZE(nvecs); r++) {
		for (i = 0; i < n; i++) {
			struct its_node *its = e[i]->its;
			u32 vecs = nvecs[r % ARRAY_SIZE(nvecs)];

			dev = its_kunit_create_device(test, its, r + 1, vecs);
			KUNIT_ASSERT_NOT_NULL_MSG(test, dev,
						  "creating device %d on the node %d ITS",
						  r + 1, its->numa_node);
			KUNIT_ASSERT_EQ(test, its_kunit_defer(test, its_kunit_free_device, dev), 0);
			snprintf(what, sizeof(what), "ITT of device %d (%u vectors, %zu bytes)",
				 r + 1, vecs, its_kunit_itt_size(its, dev));
			its_kunit_expect_on_node(test, what, dev->itt,
						 its_kunit_itt_size(its, dev), its->numa_node);
		}
	}
}

/*
 * Fail the 1st allocation of the probe (command queue, tables, collections,
 * domain), then the 2nd, and so on until the probe no longer makes that
 * many. Each failing probe must return an error, give back everything it
 * took, and leave nothing registered.
 */
static void __init its_kunit_probe_fails_cleanly(struct kunit *test)
{
	const struct its_kunit_layout *l = test->param_value;
	struct its_kunit_seam *seam = test->priv;
	struct its_kunit_its *e;
	int n, err;

	e = its_kunit_new(test, l, first_online_node);
	for (n = 1; n <= ITS_KUNIT_MAX_INJECT; n++) {
		its_kunit_reset(e);
		seam->calls = 0;
		seam->fail_at = n;
		err = its_kunit_probe_new(test, e);
		seam->fail_at = 0;
		if (seam->calls < n) {
			KUNIT_EXPECT_EQ_MSG(test, err, 0,
					    "probe failed (%d) with no allocation failed", err);
			break;
		}
		KUNIT_EXPECT_NE_MSG(test, err, 0,
				    "probe of the %s ITS returned 0 although allocation %d failed",
				    l->name, n);
		KUNIT_EXPECT_EQ_MSG(test, its_kunit_outstanding(test), 0,
				    "leaked after allocation %d failed (%d allocated, %d freed)",
				    n, seam->allocs, seam->frees);
		KUNIT_EXPECT_NULL_MSG(test, its_kunit_registered(e),
				      "ITS left on its_nodes after allocation %d failed", n);
		KUNIT_EXPECT_NULL_MSG(test, its_kunit_domain(e),
				      "irq domain left after allocation %d failed", n);
		if (!err)
			break;	/* the seam refuses to free what it never gave */
	}
	KUNIT_EXPECT_LE(test, n, ITS_KUNIT_MAX_INJECT);
	KUNIT_EXPECT_EQ(test, seam->bad_frees, 0);
	KUNIT_EXPECT_EQ(test, seam->overflow, 0);
	kunit_info(test, "%s ITS: walked %d injection points\n", l->name, n - 1);
}

/* The ITT sizes a device can be created with. */
struct its_kunit_itt {
	const char *name;
	u32 nvecs;
};

static const struct its_kunit_itt its_kunit_itts[] = {
	{ .name = "ITT smaller than a page", .nvecs = ITS_KUNIT_NVECS },
	{ .name = "ITT of two pages", .nvecs = ITS_KUNIT_NVECS_BIG },
};

static void its_kunit_itt_desc(const struct its_kunit_itt *t, char *desc)
{
	snprintf(desc, KUNIT_PARAM_DESC_SIZE, "%s", t->name);
}

KUNIT_ARRAY_PARAM(its_kunit_itt, its_kunit_itts, its_kunit_itt_desc);

#ifdef ITS_KUNIT_ITT_POOL
struct its_kunit_drained {
	unsigned long addr[ITS_KUNIT_MAX_DRAINED];
	int nr;
};

static void its_kunit_refill_pool(void *data)
{
	struct its_kunit_drained *d = data;

	while (d->nr)
		gen_pool_free(itt_pool, d->addr[--d->nr], ITS_ITT_ALIGN);
}

/*
 * Hold back every free granule of the ITT pool until the case ends, so
 * that the next small ITT takes a new page, which the seam can fail.
 */
static void its_kunit_drain_pool(struct kunit *test)
{
	struct its_kunit_drained *d;
	unsigned long addr;

	d = kunit_kzalloc(test, sizeof(*d), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, d);
	KUNIT_ASSERT_EQ(test, its_kunit_defer(test, its_kunit_refill_pool, d), 0);
	while ((addr = gen_pool_alloc(itt_pool, ITS_ITT_ALIGN))) {
		if (d->nr == ITS_KUNIT_MAX_DRAINED) {
			gen_pool_free(itt_pool, addr, ITS_ITT_ALIGN);
			KUNIT_FAIL(test, "the ITT pool has more than %d free granules",
				   ITS_KUNIT_MAX_DRAINED);
			return;
		}
		d->addr[d->nr++] = addr;
	}
	kunit_info(test, "held back %d ITT pool granules\n", d->nr);
}
#else
static void its_kunit_drain_pool(struct kunit *test)
{
}
#endif

/*
 * Creating a device allocates a level-2 device table page when its ID is
 * the first in a new level-2 range, then the device's ITT (a page for the
 * ITT pool, where there is one and it has no room). Fail each in turn:
 * creating the device must fail, list nothing, and keep nothing but a
 * level-2 page it installed in the table, which the table keeps anyway.
 */
static void __init its_kunit_create_device_fails_cleanly(struct kunit *test)
{
	const struct its_kunit_itt *t = test->param_value;
	struct its_kunit_seam *seam = test->priv;
	struct its_device *dev = NULL;
	struct its_kunit_its *e;
	struct its_baser *dt;
	int n, before, kept;
	u32 dev_id;

	e = its_kunit_new(test, &its_kunit_layouts[ITS_KUNIT_64K_INDIRECT], first_online_node);
	KUNIT_ASSERT_EQ(test, its_kunit_probe_new(test, e), 0);
	dt = its_kunit_device_table(test, e->its);
	its_kunit_drain_pool(test);
	for (n = 1; n <= ITS_KUNIT_MAX_INJECT && !dev; n++) {
		/* the first ID of level-2 range n: a fresh page each time */
		dev_id = n << ilog2(dt->psz / GITS_BASER_ENTRY_SIZE(dt->val));
		its_kunit_forget_pooled(seam);
		before = seam->allocs - seam->frees;
		seam->calls = 0;
		seam->fail_at = n;
		dev = its_kunit_create_device(test, e->its, dev_id, t->nvecs);
		seam->fail_at = 0;
		if (dev) {
			KUNIT_EXPECT_LT(test, seam->calls, n);
			break;
		}
		its_kunit_forget_pooled(seam);
		kept = its_kunit_lvl2(dt, dev_id) ? 1 : 0;
		KUNIT_EXPECT_EQ_MSG(test, seam->allocs - seam->frees, before + kept,
				    "creating device %#x leaked after allocation %d failed",
				    dev_id, n);
		KUNIT_EXPECT_TRUE_MSG(test, list_empty(&e->its->its_device_list),
				      "device %#x listed after allocation %d failed", dev_id, n);
	}
	KUNIT_ASSERT_NOT_NULL(test, dev);
	KUNIT_ASSERT_EQ(test, its_kunit_defer(test, its_kunit_free_device, dev), 0);
	KUNIT_EXPECT_EQ(test, seam->bad_frees, 0);
	KUNIT_EXPECT_EQ(test, seam->overflow, 0);
	kunit_info(test, "creating a device, %s: walked %d injection points\n", t->name, n - 1);
}

/* The ITS that the kernel probed at boot, on the node its firmware gives. */
static void its_kunit_boot_its_on_node(struct kunit *test)
{
	struct its_node *boot[ITS_KUNIT_MAX_ITS], *its;
	int checked = 0, n = 0, i;

	/*
	 * The driver never frees an ITS it probed at boot: the nodes stay
	 * valid once the list is let go.
	 */
	raw_spin_lock(&its_lock);
	list_for_each_entry(its, &its_nodes, entry) {
		if (n < ITS_KUNIT_MAX_ITS)
			boot[n] = its;
		n++;
	}
	raw_spin_unlock(&its_lock);
	if (!n)
		kunit_skip(test, "no ITS was probed at boot");
	KUNIT_EXPECT_LE_MSG(test, n, ITS_KUNIT_MAX_ITS, "only the first %d ITSs are checked",
			    ITS_KUNIT_MAX_ITS);
	for (i = 0; i < min(n, ITS_KUNIT_MAX_ITS); i++) {
		its = boot[i];
		/*
		 * Parsed: the package's runner checks the machine it booted
		 * against the topology from this line. Keep its
		 * "kloc: key=value" format.
		 */
		kunit_info(test, "kloc: its_phys_base=%pa its_numa_node=%d online_nodes=%d\n",
			   &its->phys_base, its->numa_node, num_online_nodes());
		if (its->numa_node == NUMA_NO_NODE || num_online_nodes() < 2)
			continue;
		its_kunit_expect_tables_on_node(test, its, its->numa_node);
		checked++;
	}
	if (!checked)
		kunit_skip(test, "no ITS with a NUMA node on a multi-node system");
}

/*
 * The tables the driver gives the redistributors, checked here: each
 * possible CPU's LPI pending table, which its redistributor reads and
 * writes on every LPI it sets, clears or looks for. The driver allocates
 * them all at boot, from the boot CPU (allocate_lpi_tables(), __init): no
 * allocation can be failed or watched through the seam, so the case checks
 * what the boot left.
 *
 * Not checked, and why:
 * - The LPI property table (gic_rdists->prop_table_va) is one table that
 *   every redistributor reads (GICR_PROPBASER must be the same on all of
 *   them): whichever node it is on, the redistributors of the other nodes
 *   read it remotely. No node is the right one, so no case could fail.
 * - The GICv4 tables: a vPE's pending table (vpt_page, its_vpe_init()),
 *   a VM's vPE property table (vprop_page) and, on GICv4.1, vpe_l1_base.
 *   The driver allocates them only when KVM creates a VM on a GICv4 (4.1
 *   for vpe_l1_base), and the package's guests have a GICv3 without
 *   virtualization.
 */

/*
 * Each possible CPU's LPI pending table on that CPU's node. A CPU whose
 * table firmware preallocated has none here (pend_page is NULL: the
 * driver freed its own when the CPU came up); it is not checked.
 */
static void its_kunit_lpi_pending_tables_on_their_cpu_node(struct kunit *test)
{
	int cpu, checked = 0;
	char what[64], owner[16];
	bool none;

	raw_spin_lock(&its_lock);
	none = list_empty(&its_nodes);
	raw_spin_unlock(&its_lock);
	/* its_init() allocates no pending table when it finds no ITS */
	if (none || !gic_rdists || !gic_rdists->rdist)
		kunit_skip(test, "no ITS was probed at boot: no LPI pending tables");
	if (num_online_nodes() < 2)
		kunit_skip(test, "needs two online NUMA nodes");
	for_each_possible_cpu(cpu) {
		struct page *pend_page = per_cpu(gic_rdists->rdist->pend_page, cpu);

		if (!pend_page &&
		    (gic_rdists->flags & RDIST_FLAGS_RD_TABLES_PREALLOCATED)) {
			kunit_info(test, "CPU %d: pending table preallocated by firmware\n", cpu);
			continue;
		}
		KUNIT_EXPECT_NOT_NULL_MSG(test, pend_page, "CPU %d has no LPI pending table",
					  cpu);
		if (!pend_page)
			continue;
		snprintf(what, sizeof(what), "LPI pending table of CPU %d", cpu);
		snprintf(owner, sizeof(owner), "CPU %d", cpu);
		its_kunit_expect_owned_on_node(test, what, page_address(pend_page),
					       LPI_PENDBASE_SZ, cpu_to_node(cpu), owner);
		checked++;
	}
	if (!checked)
		kunit_skip(test, "every CPU's pending table was preallocated by firmware");
}

static struct kunit_case its_kunit_placement_cases[] __refdata = {
	KUNIT_CASE_PARAM(its_kunit_probe_places_all_on_node, its_kunit_placement_gen_params),
	KUNIT_CASE(its_kunit_itts_on_their_its_node),
	KUNIT_CASE(its_kunit_boot_its_on_node),
	KUNIT_CASE(its_kunit_lpi_pending_tables_on_their_cpu_node),
	{}
};

static struct kunit_suite its_kunit_placement_suite = {
	.name = "irq_gic_v3_its_placement",
	.init = its_kunit_init,
	.test_cases = its_kunit_placement_cases,
};

static struct kunit_case its_kunit_failure_cases[] __refdata = {
	KUNIT_CASE_PARAM(its_kunit_probe_fails_cleanly, its_kunit_layout_gen_params),
	KUNIT_CASE_PARAM(its_kunit_create_device_fails_cleanly, its_kunit_itt_gen_params),
	{}
};

static struct kunit_suite its_kunit_failure_suite = {
	.name = "irq_gic_v3_its_alloc_failure",
	.init = its_kunit_init,
	.test_cases = its_kunit_failure_cases,
};

kunit_test_init_section_suites(&its_kunit_placement_suite, &its_kunit_failure_suite);
