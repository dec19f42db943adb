// SPDX-License-Identifier: GPL-2.0
/*
 * cpu-index-check: is the vCPU index QEMU gives a TB callback the vCPU that
 * runs the block? For x86_64 Linux guests. Linux keeps each CPU's per-CPU
 * base in MSR_GS_BASE while in the kernel and in MSR_KERNEL_GS_BASE while in
 * user mode; the register API reads them from the running vCPU. Every 64th
 * block of each index, the callback reads them and tallies the kernel-half
 * base under the index it was given. Right indices see one base each (once
 * per-CPU areas exist); indices of the translating vCPU see several.
 *
 * gcc -O2 -shared -fPIC -o libcpu-index-check.so cpu-index-check.c \
 *     -I<dir of qemu-plugin.h> $(pkg-config --cflags glib-2.0)
 * (docs/qemu-cpu-index.md; reproduce.sh beside it runs it)
 * qemu-system-x86_64 -smp 4 ... -plugin ./libcpu-index-check.so -d plugin
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <glib.h>
#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define MAX_VCPUS 64
#define MAX_BASES 8
#define SAMPLE 64

struct seen {
	uint64_t base[MAX_BASES];
	uint64_t blocks[MAX_BASES];
	uint64_t calls;
};

/*
 * Written by the thread that runs the callback for that index: one thread
 * under the round-robin scheduler, the index's own under MTTCG (where the
 * index is right).
 */
static struct seen seen[MAX_VCPUS];
static struct qemu_plugin_register *gs, *kgs;
static GByteArray *buf[MAX_VCPUS];

static struct qemu_plugin_register *find(GArray *regs, const char *name)
{
	for (guint i = 0; i < regs->len; i++) {
		qemu_plugin_reg_descriptor *d =
			&g_array_index(regs, qemu_plugin_reg_descriptor, i);

		if (!strcmp(d->name, name))
			return d->handle;
	}
	return NULL;
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
	GArray *regs = qemu_plugin_get_registers();

	gs = find(regs, "gs_base");
	kgs = find(regs, "k_gs_base");
	g_array_free(regs, TRUE);
	if (vcpu < MAX_VCPUS)
		buf[vcpu] = g_byte_array_new();
}

static uint64_t read64(struct qemu_plugin_register *r, GByteArray *b)
{
	uint64_t v = 0;

	g_byte_array_set_size(b, 0);
	if (r && qemu_plugin_read_register(r, b) == sizeof(v))
		memcpy(&v, b->data, sizeof(v));
	return v;
}

static void tb_exec(unsigned int vcpu, void *udata)
{
	struct seen *s;
	uint64_t base;
	int i;

	if (vcpu >= MAX_VCPUS)
		return;
	s = &seen[vcpu];
	if (s->calls++ % SAMPLE)
		return;
	base = read64(gs, buf[vcpu]);
	if (!(base >> 63))		/* user mode: the kernel's is swapped out */
		base = read64(kgs, buf[vcpu]);
	if (!(base >> 63))		/* no per-CPU area yet */
		return;
	for (i = 0; i < MAX_BASES && s->base[i] && s->base[i] != base; i++)
		;
	if (i == MAX_BASES)
		return;
	s->base[i] = base;
	s->blocks[i]++;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_R_REGS, NULL);
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
	GString *out = g_string_new("");
	int n = qemu_plugin_num_vcpus();

	for (int v = 0; v < n && v < MAX_VCPUS; v++) {
		g_string_append_printf(out, "index %d:", v);
		for (int i = 0; i < MAX_BASES && seen[v].base[i]; i++)
			g_string_append_printf(out, " base %#" PRIx64 " in %" PRIu64,
					       seen[v].base[i], seen[v].blocks[i]);
		g_string_append(out, " (sampled blocks)\n");
	}
	qemu_plugin_outs(out->str);
	g_string_free(out, TRUE);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
