/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Between kloc-count's two halves, built into one kloc-count.so:
 * kloc-count.c counts (its arguments, the markers and their windows,
 * instructions, the running vCPU, the JSON) and kloc-model.c models the
 * caches and their coherence. docs/counting.md describes both.
 */
#ifndef KLOC_COUNT_H
#define KLOC_COUNT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define MAX_VCPUS 16		/* holders are 16-bit masks */
#define MAX_NODES 64
#define MAX_SEGS 16
#define MAX_LINE 64		/* byte masks are 64 bits */
#define PC_SLOTS 8
#define RELAXED __ATOMIC_RELAXED

/* What one vCPU did in the windows of one phase. */
struct counts {
	uint64_t insns_user, insns_kernel, loads, stores;
	uint64_t local, remote, io, unmapped;
	uint64_t miss_local, miss_remote;	/* by the line's home node */
	uint64_t hitm_local, hitm_remote;	/* by the holder's node */
	uint64_t inval;
	uint64_t true_sharing, false_sharing;	/* the transfers, by their bytes */
	uint64_t contended, contended_false;	/* accesses, by the window's bytes */
};

struct node_arg { uint64_t lo, hi; int node; };	/* node=N:LO-HI */
struct ram_arg { uint64_t lo, hi, gpa; };		/* ram=LO-HI:GPA */

/* The plugin's arguments, from kloc-count.c's table; read-only once installed. */
struct kloc_config {
	char *out_path;		/* out= */
	bool count_all;		/* count=all: one window from start to exit */
	bool mem_always;	/* mem=always: memory callbacks outside windows too */
	uint64_t percpu_addr;	/* percpu=; 0: no register cross-check */
	uint64_t top_n, pcs_n, lines_max;
	uint64_t cache_bytes, assoc, line_bytes;
	bool coherence;
	struct node_arg node[MAX_SEGS];
	int nnodes;
	struct ram_arg ram[MAX_SEGS];
	int nram;
	int cpu_node[MAX_VCPUS];	/* cpus= */
	int nvcpus;		/* QEMU's max_vcpus */
};

/* One load or store of one vCPU inside a window of phase. */
struct access {
	unsigned int vcpu;	/* the running vCPU's index */
	int phase;
	bool store;
	uint64_t pc;
	struct counts *c;	/* the vCPU's counts of the phase */
};

void plugin_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* kloc-model.c: every call but model_access() is made under the window lock. */
int model_init(const struct kloc_config *cfg);
void model_free(void);
void model_open_window(void);
void model_close_window(unsigned int vcpu, struct counts *c);
bool model_access(const struct access *a, uint64_t raw, uint64_t vaddr, unsigned int size,
		  bool first);
void model_write_config(FILE *f);
void model_write_lines(FILE *f, int phase);

#endif /* KLOC_COUNT_H */
