/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Redirection points for the GICv3 ITS KUnit tests (irq-gic-v3-its_kunit.c).
 *
 * irq-gic-v3-its.c includes this header once, after its own includes.
 * When the tests are built, each memory allocation and free that the
 * tests intercept, the mapping of ITS register frames and GITS_BASERn
 * writes are renamed, for this translation unit alone, to static
 * wrappers that carry a redirection point. The tests can then see where
 * every allocation of the driver lands, make any one of them fail, and
 * stand in for an ITS's registers. The driver's own lines stay as they
 * are: a patch to its allocation code applies, and is tested, as posted.
 *
 * Without CONFIG_ARM_GIC_V3_ITS_KUNIT_TEST this header is empty. With it,
 * the wrappers call the kernel's functions unless a test, in its own
 * KUnit thread, has set its stand-ins in its_kunit_seam_redirect. (A
 * table rather than static stubs: Linux 6.1 has none, and one mechanism
 * for every kernel keeps the header free of version checks.)
 */
#ifndef _IRQ_GIC_V3_ITS_KUNIT_SEAM_H
#define _IRQ_GIC_V3_ITS_KUNIT_SEAM_H

#ifdef CONFIG_ARM_GIC_V3_ITS_KUNIT_TEST

/*
 * The driver defines its flags right after its includes: if they exist
 * already, this header came too late to rename the driver's calls, and
 * the tests that need the redirection points say so and fail.
 */
#ifdef ITS_FLAGS_CMDQ_NEEDS_FLUSHING
#define ITS_KUNIT_SEAM_LATE
#endif

#include <linux/gfp.h>
#include <linux/io.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <asm/arch_gicv3.h>

/*
 * The test's stand-ins, set by a test for its own duration. (Members are
 * named NAME_fn: several NAMEs are function-like macros.) Only a KUnit
 * thread follows them: any other thread that allocates for the driver
 * meanwhile gets the kernel's functions.
 */
struct its_kunit_seam_table {
	struct page *(*alloc_pages_node_fn)(int nid, gfp_t gfp, unsigned int order);
	struct page *(*alloc_pages_fn)(gfp_t gfp, unsigned int order);
	void (*free_pages_fn)(unsigned long addr, unsigned int order);
	void *(*kmalloc_fn)(size_t size, gfp_t gfp);
	void *(*kzalloc_fn)(size_t size, gfp_t gfp);
	void *(*kzalloc_node_fn)(size_t size, gfp_t gfp, int node);
	void *(*kcalloc_fn)(size_t n, size_t size, gfp_t gfp);
	void *(*kmalloc_array_fn)(size_t n, size_t size, gfp_t gfp);
	void (*kfree_fn)(const void *p);
	void __iomem *(*ioremap_fn)(phys_addr_t phys, size_t size);
	void (*iounmap_fn)(void __iomem *addr);
	void (*gits_write_baser_fn)(u64 val, void __iomem *addr);
};

static struct its_kunit_seam_table its_kunit_seam_redirect;

/* Whether the current thread follows the stand-in for @name. */
#define its_kunit_seam_on(name) \
	(current->kunit_test && its_kunit_seam_redirect.name##_fn)

/*
 * The kernel's functions, for the tests' own use: a test's stand-in
 * calls these, not the renamed names, to reach the real allocator.
 */
static inline struct page *its_kunit_real_alloc_pages_node(int nid, gfp_t gfp,
							   unsigned int order)
{
	return alloc_pages_node(nid, gfp, order);
}

static inline struct page *its_kunit_real_alloc_pages(gfp_t gfp, unsigned int order)
{
	return alloc_pages(gfp, order);
}

static inline void its_kunit_real_free_pages(unsigned long addr, unsigned int order)
{
	free_pages(addr, order);
}

static inline void *its_kunit_real_kmalloc(size_t size, gfp_t gfp)
{
	return kmalloc(size, gfp);
}

static inline void *its_kunit_real_kzalloc(size_t size, gfp_t gfp)
{
	return kzalloc(size, gfp);
}

static inline void *its_kunit_real_kzalloc_node(size_t size, gfp_t gfp, int node)
{
	return kzalloc_node(size, gfp, node);
}

static inline void *its_kunit_real_kcalloc(size_t n, size_t size, gfp_t gfp)
{
	return kcalloc(n, size, gfp);
}

static inline void *its_kunit_real_kmalloc_array(size_t n, size_t size, gfp_t gfp)
{
	return kmalloc_array(n, size, gfp);
}

static inline void its_kunit_real_kfree(const void *p)
{
	kfree(p);
}

static inline void __iomem *its_kunit_real_ioremap(phys_addr_t phys, size_t size)
{
	return ioremap(phys, size);
}

static inline void its_kunit_real_iounmap(void __iomem *addr)
{
	iounmap(addr);
}

static inline void its_kunit_real_gits_write_baser(u64 val, void __iomem *addr)
{
	gits_write_baser(val, addr);
}

/*
 * The redirection points. They are inlined into the driver's functions,
 * so that a test's stand-in sees the driver's call site as its caller.
 */
static __always_inline struct page *its_kunit_seam_alloc_pages_node(int nid, gfp_t gfp,
								    unsigned int order)
{
	if (its_kunit_seam_on(alloc_pages_node))
		return its_kunit_seam_redirect.alloc_pages_node_fn(nid, gfp, order);
	return its_kunit_real_alloc_pages_node(nid, gfp, order);
}

static __always_inline struct page *its_kunit_seam_alloc_pages(gfp_t gfp, unsigned int order)
{
	if (its_kunit_seam_on(alloc_pages))
		return its_kunit_seam_redirect.alloc_pages_fn(gfp, order);
	return its_kunit_real_alloc_pages(gfp, order);
}

static __always_inline void its_kunit_seam_free_pages(unsigned long addr, unsigned int order)
{
	if (its_kunit_seam_on(free_pages))
		its_kunit_seam_redirect.free_pages_fn(addr, order);
	else
		its_kunit_real_free_pages(addr, order);
}

static __always_inline void *its_kunit_seam_kmalloc(size_t size, gfp_t gfp)
{
	if (its_kunit_seam_on(kmalloc))
		return its_kunit_seam_redirect.kmalloc_fn(size, gfp);
	return its_kunit_real_kmalloc(size, gfp);
}

static __always_inline void *its_kunit_seam_kzalloc(size_t size, gfp_t gfp)
{
	if (its_kunit_seam_on(kzalloc))
		return its_kunit_seam_redirect.kzalloc_fn(size, gfp);
	return its_kunit_real_kzalloc(size, gfp);
}

static __always_inline void *its_kunit_seam_kzalloc_node(size_t size, gfp_t gfp, int node)
{
	if (its_kunit_seam_on(kzalloc_node))
		return its_kunit_seam_redirect.kzalloc_node_fn(size, gfp, node);
	return its_kunit_real_kzalloc_node(size, gfp, node);
}

static __always_inline void *its_kunit_seam_kcalloc(size_t n, size_t size, gfp_t gfp)
{
	if (its_kunit_seam_on(kcalloc))
		return its_kunit_seam_redirect.kcalloc_fn(n, size, gfp);
	return its_kunit_real_kcalloc(n, size, gfp);
}

static __always_inline void *its_kunit_seam_kmalloc_array(size_t n, size_t size, gfp_t gfp)
{
	if (its_kunit_seam_on(kmalloc_array))
		return its_kunit_seam_redirect.kmalloc_array_fn(n, size, gfp);
	return its_kunit_real_kmalloc_array(n, size, gfp);
}

static __always_inline void its_kunit_seam_kfree(const void *p)
{
	if (its_kunit_seam_on(kfree))
		its_kunit_seam_redirect.kfree_fn(p);
	else
		its_kunit_real_kfree(p);
}

static __always_inline void __iomem *its_kunit_seam_ioremap(phys_addr_t phys, size_t size)
{
	if (its_kunit_seam_on(ioremap))
		return its_kunit_seam_redirect.ioremap_fn(phys, size);
	return its_kunit_real_ioremap(phys, size);
}

static __always_inline void its_kunit_seam_iounmap(void __iomem *addr)
{
	if (its_kunit_seam_on(iounmap))
		its_kunit_seam_redirect.iounmap_fn(addr);
	else
		its_kunit_real_iounmap(addr);
}

static __always_inline void its_kunit_seam_gits_write_baser(u64 val, void __iomem *addr)
{
	if (its_kunit_seam_on(gits_write_baser))
		its_kunit_seam_redirect.gits_write_baser_fn(val, addr);
	else
		its_kunit_real_gits_write_baser(val, addr);
}

/*
 * From here on, the driver's calls go through the points above. Several
 * of these names are macros already (the allocation profiling wrappers
 * since 6.10, gits_write_baser() always): each is replaced, in this
 * translation unit only.
 */
#undef alloc_pages_node
#define alloc_pages_node(nid, gfp, order)	its_kunit_seam_alloc_pages_node(nid, gfp, order)
#undef alloc_pages
#define alloc_pages(gfp, order)		its_kunit_seam_alloc_pages(gfp, order)
#undef free_pages
#define free_pages(addr, order)		its_kunit_seam_free_pages(addr, order)
#undef kmalloc
#define kmalloc(size, gfp)		its_kunit_seam_kmalloc(size, gfp)
#undef kzalloc
#define kzalloc(size, gfp)		its_kunit_seam_kzalloc(size, gfp)
#undef kzalloc_node
#define kzalloc_node(size, gfp, node)	its_kunit_seam_kzalloc_node(size, gfp, node)
#undef kcalloc
#define kcalloc(n, size, gfp)		its_kunit_seam_kcalloc(n, size, gfp)
#undef kmalloc_array
#define kmalloc_array(n, size, gfp)	its_kunit_seam_kmalloc_array(n, size, gfp)
#undef kfree
#define kfree(p)			its_kunit_seam_kfree(p)
#undef ioremap
#define ioremap(phys, size)		its_kunit_seam_ioremap(phys, size)
#undef iounmap
#define iounmap(addr)			its_kunit_seam_iounmap(addr)
#undef gits_write_baser
#define gits_write_baser(val, addr)	its_kunit_seam_gits_write_baser(val, addr)

#endif /* CONFIG_ARM_GIC_V3_ITS_KUNIT_TEST */

#endif /* _IRQ_GIC_V3_ITS_KUNIT_SEAM_H */
