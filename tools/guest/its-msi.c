// SPDX-License-Identifier: GPL-2.0
/*
 * An MSI workload for arm64 guests with a GICv3 ITS: a fixed number of
 * requests to a virtio-rng PCI device, each of which the device completes
 * with one MSI-X message that the ITS translates. kloc boots it under QEMU
 * with the ITS's trace events on (tools/kloc/its/trace.py) and counts the
 * ITS's table reads per interrupt in the window this program marks on its
 * console:
 *
 *   kloc-its: l2 <level-1 index> <address>   the device table's level-2 page
 *                                            for the device (indirect tables:
 *                                            the address is in no trace event)
 *   kloc-its: begin
 *   ... each of the device's interrupts moved to the next CPU (commands) ...
 *   ... the requests ...
 *   kloc-its: end
 *   kloc-its: result requests=N bytes=B interrupts=M devid=0xD node=X moved=K
 *
 * M is the device's interrupts in the window as /proc/interrupts counts
 * them: the host compares it with the translations it saw; X is the
 * device's NUMA node by sysfs (-1: none); K interrupts were moved, so that
 * the ITS reads 2K commands (MOVI, SYNC) from its queue in the window. The
 * hwrng core's own reads (its fill thread) are interrupts too; they are
 * rare, and counted, not hidden.
 *
 * Why virtio-rng: one request is one read of /dev/hwrng and one MSI, with
 * no file system, network or block layer between; a tinyconfig guest needs
 * five options for it (configs/its-msi.config).
 *
 * The level-2 page is read through /dev/mem: GITS_BASERn from the ITS's
 * register frame (its address from the device tree), then the level-1
 * entry. Build: static, for the guest (kloc does it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <termios.h>
#include <unistd.h>

#define PCI_DEVICES	"/sys/bus/pci/devices"
#define DT_ROOT		"/sys/firmware/devicetree/base"
#define ITS_COMPAT	"arm,gic-v3-its"
#define GITS_BASER0	0x100
#define GITS_BASERS	8
#define ITS_FRAME	0x10000
#define BASER_DEVICE	1
#define L2_ADDR_MASK	0x000ffffffffff000ULL
#define MAX_IRQS	8
#define SETTLE_POLLS	2000
#define PROBE_POLLS	200
#define RNG_CURRENT	"/sys/class/misc/hw_random/rng_current"

struct msi_dev {
	unsigned int devid;
	long node;		/* the device's NUMA node, as sysfs says (-1: none) */
	unsigned int irqs[MAX_IRQS];
	int nr_irqs;
};

static int fail(const char *what)
{
	fprintf(stderr, "its-msi: %s: %s\n", what, strerror(errno));
	return -1;
}

/* A sysfs attribute's first line into buf; 0, or -1 where it cannot be read. */
static int read_attr(const char *dir, const char *name, char *buf, int size)
{
	char path[600];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	ok = !!fgets(buf, size, f);
	fclose(f);
	return ok ? 0 : -1;
}

static int read_hex(const char *dir, const char *name, unsigned long *val)
{
	char buf[32];

	if (read_attr(dir, name, buf, sizeof(buf)))
		return -1;
	*val = strtoul(buf, NULL, 16);
	return 0;
}

/* A decimal sysfs attribute; -1 where it cannot be read. */
static long read_long(const char *dir, const char *name)
{
	char buf[32];

	return read_attr(dir, name, buf, sizeof(buf)) ? -1 : strtol(buf, NULL, 10);
}

/* The virtio-rng function (legacy 0x1005, modern 0x1044) and its MSI irqs. */
static int find_rng_once(struct msi_dev *dev)
{
	unsigned long vendor, device;
	unsigned int dom, bus, slot, fn;
	char path[512];
	struct dirent *e;
	DIR *d, *m;

	d = opendir(PCI_DEVICES);
	if (!d)
		return fail(PCI_DEVICES);
	while ((e = readdir(d))) {
		snprintf(path, sizeof(path), PCI_DEVICES "/%s", e->d_name);
		if (read_hex(path, "vendor", &vendor) || read_hex(path, "device", &device))
			continue;
		if (vendor != 0x1af4 || (device != 0x1005 && device != 0x1044))
			continue;
		if (sscanf(e->d_name, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4)
			continue;
		dev->devid = bus << 8 | slot << 3 | fn;
		dev->node = read_long(path, "numa_node");
		strncat(path, "/msi_irqs", sizeof(path) - strlen(path) - 1);
		m = opendir(path);
		if (!m)
			break;
		while ((e = readdir(m)) && dev->nr_irqs < MAX_IRQS)
			if (e->d_name[0] != '.')
				dev->irqs[dev->nr_irqs++] = strtoul(e->d_name, NULL, 10);
		closedir(m);
		break;
	}
	closedir(d);
	return dev->nr_irqs ? 0 : -1;
}

/* Whether the hwrng core reads from virtio-rng yet. */
static int bound(void)
{
	char buf[64] = "";
	FILE *f = fopen(RNG_CURRENT, "r");

	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return !strncmp(buf, "virtio_rng", 10);
}

/*
 * The device, once its driver has it. kloc boots with
 * driver_async_probe=virtio_rng (the probe, which allocates the device's
 * ITT and level-2 table page, then runs on a CPU of the device's node):
 * wait for it a while.
 */
static int find_rng(struct msi_dev *dev)
{
	int tries;

	for (tries = 0; tries < PROBE_POLLS; tries++) {
		dev->nr_irqs = 0;
		if (!find_rng_once(dev) && !access(RNG_CURRENT, R_OK) && bound())
			return 0;
		usleep(50000);
	}
	fprintf(stderr, "its-msi: %s (QEMU: %s; guest: %s)\n",
		"no virtio-rng PCI device with MSIs", "-device virtio-rng-pci",
		"configs/its-msi.config");
	return -1;
}

/* The device's interrupts so far, summed over its irqs and every CPU. */
static long long irq_count(const struct msi_dev *dev)
{
	char line[4096], *p, *end;
	long long sum = 0;
	unsigned long irq;
	FILE *f;
	int i;

	f = fopen("/proc/interrupts", "r");
	if (!f)
		return fail("/proc/interrupts");
	while (fgets(line, sizeof(line), f)) {
		irq = strtoul(line, &p, 10);
		if (p == line || *p != ':')
			continue;
		for (i = 0; i < dev->nr_irqs && dev->irqs[i] != irq; i++)
			;
		if (i == dev->nr_irqs)
			continue;
		for (p++;; p = end) {
			long long n = strtoll(p, &end, 10);

			if (end == p)
				break;
			sum += n;
		}
	}
	fclose(f);
	return sum;
}

/* Whether a node's compatible list (NUL-separated strings) names ITS_COMPAT. */
static int is_its(const char *list, ssize_t len)
{
	ssize_t at;

	for (at = 0; at < len; at += strlen(list + at) + 1)
		if (!strcmp(list + at, ITS_COMPAT))
			return 1;
	return 0;
}

/* The ITS's register frame, from the first node compatible with ITS_COMPAT. */
static int find_its(const char *dir, uint64_t *base, int depth)
{
	char path[1024], buf[256];
	unsigned char reg[16];
	struct dirent *e;
	int found = -1, fd, i;
	ssize_t n;
	DIR *d;

	snprintf(path, sizeof(path), "%s/compatible", dir);
	fd = open(path, O_RDONLY);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0)
			buf[n] = '\0';
		if (n > 0 && is_its(buf, n)) {
			snprintf(path, sizeof(path), "%s/reg", dir);
			fd = open(path, O_RDONLY);
			if (fd < 0)
				return -1;
			n = read(fd, reg, sizeof(reg));
			close(fd);
			if (n != sizeof(reg))	/* two address cells, two size cells */
				return -1;
			for (*base = 0, i = 0; i < 8; i++)
				*base = *base << 8 | reg[i];
			return 0;
		}
	}
	if (depth > 4)
		return -1;
	d = opendir(dir);
	if (!d)
		return -1;
	while (found && (e = readdir(d))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		found = find_its(path, base, depth + 1);
	}
	closedir(d);
	return found;
}

/*
 * Where the ITS finds the device's entry: for an indirect device table,
 * print the level-2 page the level-1 entry names.
 */
static int report_l2(const struct msi_dev *dev)
{
	uint64_t its, baser = 0, entry, table;
	unsigned int page, esz, idx;
	uint64_t *regs;
	int fd, n;

	if (find_its(DT_ROOT, &its, 0)) {
		fprintf(stderr, "its-msi: no %s node under " DT_ROOT "\n", ITS_COMPAT);
		return -1;
	}
	fd = open("/dev/mem", O_RDONLY | O_SYNC);
	if (fd < 0)
		return fail("/dev/mem (CONFIG_DEVMEM=y, CONFIG_STRICT_DEVMEM off)");
	regs = mmap(NULL, ITS_FRAME, PROT_READ, MAP_SHARED, fd, its);
	if (regs == MAP_FAILED) {
		close(fd);
		return fail("mmap of the ITS frame");
	}
	for (n = 0; n < GITS_BASERS; n++) {
		/* one 64-bit load of the register */
		baser = __atomic_load_n(&regs[(GITS_BASER0 >> 3) + n], __ATOMIC_RELAXED);
		if (baser >> 63 && ((baser >> 56) & 7) == BASER_DEVICE)
			break;
	}
	munmap((void *)regs, ITS_FRAME);
	if (n == GITS_BASERS) {
		close(fd);
		fprintf(stderr, "its-msi: the ITS has no valid device table\n");
		return -1;
	}
	if (!(baser >> 62 & 1)) {	/* flat: the trace has all it needs */
		close(fd);
		return 0;
	}
	page = ((baser >> 8) & 3) == 0 ? 4096 : ((baser >> 8) & 3) == 1 ? 16384 : 65536;
	esz = ((baser >> 48) & 0x1f) + 1;
	table = baser & 0x0000ffffffff0000ULL;
	if (page == 65536)
		table |= ((baser >> 12) & 0xf) << 48;
	else
		table = baser & 0x0000fffffffff000ULL;
	idx = dev->devid / (page / esz);
	n = pread(fd, &entry, sizeof(entry), table + idx * 8ULL);
	close(fd);
	if (n != sizeof(entry))
		return fail("reading the level-1 entry through /dev/mem");
	if (!(entry >> 63)) {
		fprintf(stderr, "its-msi: level-1 entry %u is not valid\n", idx);
		return -1;
	}
	printf("kloc-its: l2 %u 0x%llx\n", idx, (unsigned long long)(entry & L2_ADDR_MASK));
	return 0;
}

/*
 * Move each of the device's interrupts to the next CPU: the driver sends the
 * ITS a MOVI and a SYNC for each, two commands it reads from its queue.
 * Returns how many moved, or -1.
 */
static int move_irqs(const struct msi_dev *dev)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	char path[64];
	int i, cur, ok;
	FILE *f;

	for (i = 0; i < dev->nr_irqs; i++) {
		snprintf(path, sizeof(path), "/proc/irq/%u/effective_affinity_list",
			 dev->irqs[i]);
		f = fopen(path, "r");
		if (!f)
			return fail(path);
		ok = fscanf(f, "%d", &cur) == 1;
		fclose(f);
		if (!ok || cpus < 2) {
			fprintf(stderr, "its-msi: %s: no CPU to move to\n", path);
			return -1;
		}
		snprintf(path, sizeof(path), "/proc/irq/%u/smp_affinity_list", dev->irqs[i]);
		f = fopen(path, "w");
		if (!f)
			return fail(path);
		ok = fprintf(f, "%ld\n", (cur + 1) % cpus) > 0;
		if (fclose(f) || !ok)
			return fail(path);
	}
	return dev->nr_irqs;
}

/* A console line, written out before the program goes on. */
static void mark(const char *line)
{
	printf("%s\n", line);
	fflush(stdout);
	if (isatty(STDOUT_FILENO))
		tcdrain(STDOUT_FILENO);
}

/* Wait until the device's interrupts stop changing (its refill has landed). */
static long long settle(const struct msi_dev *dev)
{
	long long last = irq_count(dev), now;
	int i;

	for (i = 0; i < SETTLE_POLLS; i++) {
		usleep(500);
		now = irq_count(dev);
		if (now == last && i > 4)
			break;
		last = now;
	}
	return last;
}

int main(int argc, char **argv)
{
	struct msi_dev dev = { 0 };
	long requests = 1000, bytes = 64, i;
	long long before, after;
	int moved;
	unsigned char buf[4096];
	ssize_t got;
	int opt, fd;

	while ((opt = getopt(argc, argv, "n:b:")) != -1) {
		if (opt == 'n')
			requests = strtol(optarg, NULL, 10);
		else if (opt == 'b')
			bytes = strtol(optarg, NULL, 10);
		else
			return 2;
	}
	if (requests < 1 || bytes < 1 || bytes > (long)sizeof(buf)) {
		fprintf(stderr, "usage: its-msi [-n requests] [-b bytes, 1-%zu]\n", sizeof(buf));
		return 2;
	}
	if (find_rng(&dev) || report_l2(&dev))
		return 1;
	fd = open("/dev/hwrng", O_RDONLY);
	if (fd < 0) {
		fail("/dev/hwrng");
		return 1;
	}
	if (read(fd, buf, bytes) != bytes) {	/* the first request's setup */
		fail("the first read of /dev/hwrng");
		return 1;
	}
	settle(&dev);
	mark("kloc-its: begin");
	moved = move_irqs(&dev);
	if (moved < 0)
		return 1;
	before = irq_count(&dev);
	for (i = 0; i < requests; i++) {
		got = read(fd, buf, bytes);
		if (got != bytes) {
			fprintf(stderr, "its-msi: read %ld of /dev/hwrng gave %zd bytes\n", i, got);
			return 1;
		}
	}
	after = settle(&dev);
	mark("kloc-its: end");
	close(fd);
	if (before < 0 || after < 0)
		return 1;
	printf("kloc-its: result requests=%ld bytes=%ld interrupts=%lld ", requests, bytes,
	       after - before);
	printf("devid=0x%x node=%ld moved=%d\n", dev.devid, dev.node, moved);
	return 0;
}
