# SPDX-License-Identifier: GPL-2.0
"""kloc-count's cache model against QEMU's own, contrib/plugins/cache.c, on one boot.

Issue 25's cross-check: for one vCPU with coherence off, kloc-count's misses
agree with cache.c's configured alike (size, ways, 64-byte lines, LRU; its
L1 dcache is compared, its icache is not). Both plugins are loaded into the
same QEMU, so they see the same accesses in the same order; cache.c is
built from the qemu source of exactly the QEMU that runs (qemu/source.py
keeps it beside qemu-plugin.h).

What the two count differently, and so what bounds the difference:
- cache.c looks each access up once, at the line of its first byte;
  kloc-count looks up every line the access touches. An access that
  straddles two lines (crossing a page is one such) is one reference more
  for kloc-count. QEMU reports no such count, and kloc-count's loads and
  stores count accesses, not lines: a third plugin, built here
  (STRADDLE_SOURCE, a few lines), counts the non-MMIO accesses that
  straddle a line, an upper bound of those extra references.
- MMIO (qemu_plugin_hwaddr_is_io) enters neither cache. An access with
  no hwaddr at all is io for kloc-count and a lookup at its virtual address
  for cache.c; one outside the RAM map (the BIOS ROM, option ROMs) is
  unmapped for kloc-count and a lookup for cache.c. Both kinds are in
  cache.c's accesses less kloc-count's cached ones (its local + remote):
  references only cache.c makes. A firmware that reads its ROM little
  (qboot, not SeaBIOS) keeps them few.
- cache.c's line is that of qemu_plugin_hwaddr_phys_addr(), kloc-count's
  that of the guest-physical address it maps that value to (ram=): before
  QEMU 8.2 the two differ by where each RAM block sits, and are the same
  for one RAM block at 0 (one -numa node), which the machine should have.
A reference one model makes and the other does not changes the misses
by one, to first order: it misses (or not) itself, and it evicts a line
(or brings one in) that a later access then misses (or hits). So
|kloc-count's misses - cache.c's| <= straddles + cache.c-only references
is the bound the cross-check states. Under LRU, a reference can in the worst
case change the misses of one set by its associativity + 1 (each line the set
holds misses once more, in a cascade); worst_case_bound says how much that
would be.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from kloc.counting.counts import read_counts
from kloc.counting.errors import CountingError, run_tool
from kloc.counting.plugin import build_into, build_plugin, header_dir
from kloc.counting.qemu_args import counted_command
from kloc.paths import cache_dir
from kloc.qemu import release, source

CACHE_PLUGIN = source.CACHE_PLUGIN      # contrib/plugins/cache.c, beside qemu-plugin.h
LINE = 64

# Counts the accesses that cache.c and kloc-count look up (not MMIO, with an
# hwaddr) and, of those, the ones whose bytes cross a line= boundary: the
# references kloc-count makes beyond cache.c's one per access.
STRADDLE_SOURCE = r'''
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib.h>
#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

static uint64_t accesses, straddles, line = 64;
static const char *out;

static void mem(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *u)
{
    struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
    uint64_t size = 1ULL << qemu_plugin_mem_size_shift(info);

    (void)vcpu;
    (void)u;
    if (!hw || qemu_plugin_hwaddr_is_io(hw))
        return;
    __atomic_fetch_add(&accesses, 1, __ATOMIC_RELAXED);
    if ((vaddr & (line - 1)) + size > line)
        __atomic_fetch_add(&straddles, 1, __ATOMIC_RELAXED);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    for (size_t i = 0; i < qemu_plugin_tb_n_insns(tb); i++)
        qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i), mem,
                                         QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, NULL);
}

static void done(qemu_plugin_id_t id, void *p)
{
    FILE *f = fopen(out, "w");

    (void)id;
    (void)p;
    if (!f)
        return;
    fprintf(f, "accesses %" PRIu64 "\nstraddles %" PRIu64 "\n", accesses, straddles);
    fclose(f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "out=", 4))
            out = argv[i] + 4;
        else if (!strncmp(argv[i], "line=", 5))
            line = strtoull(argv[i] + 5, NULL, 0);
        else
            return -1;
    }
    if (!out || !line || (line & (line - 1)))
        return -1;
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, done, NULL);
    return 0;
}
'''


@dataclass(frozen=True)
class CacheConfig:
    size: int           # bytes
    assoc: int          # ways per set
    line: int = LINE    # bytes

    def __post_init__(self) -> None:
        sets, rest = divmod(self.size, self.assoc * self.line)
        if rest or sets < 1 or sets & (sets - 1) or self.line & (self.line - 1):
            raise CountingError(f'cache {self.size} bytes, {self.assoc}-way, {self.line}-byte '
                                'lines: both models want a power-of-two number of sets')

    def kloc_args(self) -> list[str]:
        return ['count=all', 'coherence=off', f'cache={self.size}', f'assoc={self.assoc}',
                f'line={self.line}']

    def cache_c_args(self) -> list[str]:
        """Its L1 dcache so; one core (its icache, not compared, keeps the defaults)."""
        return [f'dcachesize={self.size}', f'dassoc={self.assoc}', f'dblksize={self.line}',
                'evict=lru', 'cores=1']

    def __str__(self) -> str:
        size = (f'{self.size >> 20} MiB' if self.size % (1 << 20) == 0
                else f'{self.size >> 10} KiB')
        return f'{size} {self.assoc}-way, {self.line}-byte lines'


@dataclass(frozen=True)
class CacheCore:
    """One core's line of cache.c's table."""
    core: int
    data_accesses: int
    data_misses: int


@dataclass(frozen=True)
class CrossCheck:
    config: CacheConfig         # kloc-count's cache
    qemu_config: CacheConfig    # cache.c's dcache (the same, but for a deliberate mismatch)
    kloc_misses: int
    kloc_accesses: int          # loads + stores: every access, MMIO too
    kloc_cached: int            # local + remote: the accesses that entered its cache
    io: int                     # MMIO, or no hwaddr
    unmapped: int               # outside the RAM map
    qemu_misses: int            # cache.c's data misses
    qemu_accesses: int          # and data accesses (all but MMIO)
    straddles: int              # accesses looked up that cross a line (STRADDLE_SOURCE)
    looked_up: int              # the accesses STRADDLE_SOURCE counted (not MMIO, hwaddr)

    @property
    def qemu_only(self) -> int:
        """References cache.c makes and kloc-count does not (unmapped, no hwaddr)."""
        return self.qemu_accesses - self.kloc_cached

    @property
    def bound(self) -> int:
        """First order: one miss more or less per reference one model alone makes."""
        return self.straddles + self.qemu_only

    @property
    def worst_case_bound(self) -> int:
        """LRU's worst case: associativity + 1 misses per such reference."""
        return (self.config.assoc + 1) * self.bound

    @property
    def difference(self) -> int:
        return self.kloc_misses - self.qemu_misses

    @property
    def relative_difference(self) -> float:
        return abs(self.difference) / self.qemu_misses if self.qemu_misses else float('nan')

    @property
    def agrees(self) -> bool:
        return abs(self.difference) <= self.bound

    def summary(self) -> str:
        other = '' if self.qemu_config == self.config else f' (cache.c: {self.qemu_config})'
        return (f'{self.config}{other}: misses kloc-count {self.kloc_misses}, cache.c '
                f'{self.qemu_misses} (difference {self.difference:+d}, '
                f'{100 * self.relative_difference:.4f}%); accesses kloc-count '
                f'{self.kloc_accesses} (cached {self.kloc_cached}, io {self.io}, unmapped '
                f'{self.unmapped}), cache.c {self.qemu_accesses}; straddling {self.straddles}, '
                f'cache.c-only {self.qemu_only}: bound {self.bound} (LRU worst case '
                f'{self.worst_case_bound})')


@dataclass(frozen=True)
class Run:
    check: CrossCheck
    console: str        # QEMU's stdout and stderr (the guest's serial console)
    seconds: float


def _build(name: str, source: bytes, inc: Path, cache: Path, flags: list[str],
           cc: str = 'gcc') -> Path:
    """source built into cache/qemu-plugin/<hash>/name.so, once per source, header,
    flags and compiler."""
    glib = run_tool(['pkg-config', '--cflags', '--libs', 'glib-2.0'],
                    'finding glib-2.0 for a QEMU plugin').split()
    key = hashlib.sha256()
    for part in (name.encode(), source, (inc / 'qemu-plugin.h').read_bytes(),
                 ' '.join(flags + glib).encode(),
                 run_tool([cc, '--version'], 'the C compiler').encode()):
        key.update(part + b'\0')
    out = cache / 'qemu-plugin' / key.hexdigest()[:16]
    so = out / f'{name}.so'
    if so.exists():
        return so

    def build(tmp: Path) -> None:
        src = tmp / f'{name}.c'
        src.write_bytes(source)
        run_tool([cc, '-shared', '-fPIC', '-O2', *flags, f'-I{inc}', '-o',
                  str(tmp / f'{name}.so'), str(src), *glib], f'building {name}.so')

    build_into(out, so, build)
    return so


def cache_plugin_source() -> Path:
    """contrib/plugins/cache.c of the QEMU this command runs, beside its qemu-plugin.h
    (fetched there, for a QEMU 10.0 fetched before kloc kept it)."""
    inc = header_dir()
    if not (inc / CACHE_PLUGIN).is_file() and release.in_use() is not None:
        release.fetch(cache_dir())
    if not (inc / CACHE_PLUGIN).is_file():
        raise CountingError(f'{inc} has no {CACHE_PLUGIN} (QEMU\'s contrib/plugins/cache.c): '
                            'make deps fetches it with qemu-plugin.h')
    return inc / CACHE_PLUGIN


def build_cache_plugin(cache: Path | None = None) -> Path:
    """QEMU's contrib/plugins/cache.c, built as QEMU's own build does (no -Werror)."""
    src = cache_plugin_source()
    return _build('cache', src.read_bytes(), src.parent, cache or cache_dir(), [])


def build_straddle_plugin(cache: Path | None = None) -> Path:
    return _build('kloc-straddle', STRADDLE_SOURCE.encode(), header_dir(),
                  cache or cache_dir(), ['-std=gnu11', '-Wall', '-Wextra', '-Werror'])


_TABLE = 'core #, data accesses, data misses'
_ROW = re.compile(r'^(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+%\s+\d+\s+\d+\s+[\d.]+%')


def parse_cache_log(text: str) -> dict[int, CacheCore]:
    """Each core's data accesses and misses from the table cache.c writes at exit."""
    lines = text.splitlines()
    at = next((i for i, x in enumerate(lines) if x.startswith(_TABLE)), None)
    if at is None:
        raise CountingError(f'cache.c wrote no "{_TABLE}" table: {text[-500:]!r}')
    cores: dict[int, CacheCore] = {}
    for x in lines[at + 1:]:
        m = _ROW.match(x)
        if not m:
            break
        cores[int(m.group(1))] = CacheCore(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if not cores:
        raise CountingError(f'cache.c\'s table has no core: {text[at:at + 500]!r}')
    return cores


def parse_straddles(text: str) -> tuple[int, int]:
    """(accesses, straddles) from STRADDLE_SOURCE's output."""
    got = dict(re.findall(r'^(accesses|straddles) (\d+)$', text, re.M))
    if set(got) != {'accesses', 'straddles'}:
        raise CountingError(f'the straddle counter wrote {text!r}')
    return int(got['accesses']), int(got['straddles'])


def command(base: list[str], config: CacheConfig, work: Path,
            qemu_config: CacheConfig | None = None) -> list[str]:
    """base (one vCPU, -numa nodes) with kloc-count, cache.c and the straddle counter,
    writing into work."""
    if ',' in str(work):
        raise CountingError(f'{work}: QEMU cannot take a path with a comma in -plugin')
    kloc = build_plugin()
    cmd = counted_command(base, kloc.path, work / 'counts.json', extra=config.kloc_args())
    cache_so = build_cache_plugin()
    straddle = build_straddle_plugin()
    return cmd + ['-plugin', ','.join([str(cache_so), *(qemu_config or config).cache_c_args()]),
                  '-plugin', f'{straddle},line={config.line},out={work / "straddles"}',
                  '-d', 'plugin', '-D', str(work / 'cache.log')]


def run(base: list[str], config: CacheConfig, work: Path, timeout: float,
        qemu_config: CacheConfig | None = None) -> Run:
    """One boot of base (one vCPU) with the three plugins; both models' figures.
    qemu_config: cache.c's dcache, when not config (a deliberate mismatch)."""
    cmd = command(base, config, work, qemu_config)
    start = time.monotonic()
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
    except FileNotFoundError:
        raise CountingError(f'{cmd[0]} not found; run "make deps"') from None
    except subprocess.TimeoutExpired as e:
        tail = (e.output or b'').decode(errors='replace')[-2000:]
        raise CountingError(f'the cross-check boot ran past {timeout:.0f} s:\n{tail}') from None
    console = r.stdout.decode(errors='replace')
    seconds = time.monotonic() - start
    if r.returncode:
        raise CountingError(f'the cross-check boot exited {r.returncode}:\n{console[-2000:]}')
    counts = read_counts(work / 'counts.json')
    c = counts.cache
    if ((c.size, c.assoc, c.line, c.coherence, counts.count)
            != (config.size, config.assoc, config.line, False, 'all')):
        raise CountingError(f'kloc-count modelled {c} counting {counts.count}, not {config} '
                            'without coherence over the whole run')
    vcpus = counts.phase(0).vcpus
    if len(vcpus) != 1:
        raise CountingError(f'the cross-check wants one vCPU; kloc-count saw {len(vcpus)}')
    v = vcpus[0]
    cores = parse_cache_log((work / 'cache.log').read_text(errors='replace'))
    if set(cores) != {0}:
        raise CountingError(f'cache.c modelled cores {sorted(cores)}, not core 0 alone')
    looked_up, straddles = parse_straddles((work / 'straddles').read_text())
    check = CrossCheck(config=config, qemu_config=qemu_config or config,
                       kloc_misses=v.misses, kloc_accesses=v.loads + v.stores,
                       kloc_cached=v.local + v.remote, io=v.io, unmapped=v.unmapped,
                       qemu_misses=cores[0].data_misses, qemu_accesses=cores[0].data_accesses,
                       straddles=straddles, looked_up=looked_up)
    return Run(check, console, seconds)
