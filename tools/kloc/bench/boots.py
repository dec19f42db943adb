# SPDX-License-Identifier: GPL-2.0
"""Counted boots side by side: up to JOBS at once, one per host core.

A counted boot runs every vCPU of its guest on one host thread under icount
(guests/guest.py, ICOUNT), so what it counts does not depend on the host's
timing, nor on what runs beside it: boot k of a kernel with seed k counts the
same to the last access whether it ran alone or next to another
(docs/counting.md). Its wall time does, which is why timed runs stay one at
a time and never come here.

The caller hands a queue of boots, in the order it wants them started, and
gets each result in its own thread as the boot ends, in whatever order they
end: it records it, and may queue a retry, or stop the starting of others.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from kloc import progress
from kloc.atomicfile import write_text
from kloc.bench import countstore
from kloc.bench.countstore import CountStore, Stored
from kloc.counting.plugin import Plugin
from kloc.errors import KlocError
from kloc.guests import guest
from kloc.qemu.topology import Topology


@dataclass(frozen=True)
class Boot:
    side: str               # whose boot: a side's label, or the guest's name
    seed: int               # QEMU's -seed: the pair's index, whatever ends first
    guest: guest.Guest
    initrd: Path
    topology: Topology
    timeout: int            # a timed boot's; guest.run gives a counted one more
    log: Path               # its console; the counts go beside it
    plugin: Plugin
    label: str = ''         # what progress lines call it (the side's label); '': side


# What the caller does with a boot that ended, in the calling thread: False stops
# the starting of the boots still queued (those running end and are handed over).
Done = Callable[[Boot, guest.RunResult], bool]


def _name(b: Boot) -> str:
    return f'{b.label or b.side} seed {b.seed}'


def _boot(b: Boot) -> guest.RunResult:
    return guest.run(b.guest, b.initrd, b.topology, b.timeout, b.log, b.plugin, b.seed)


def _key(store: CountStore, b: Boot) -> dict[str, str] | None:
    """The boot's key in the store (countstore.boot_key), or None where a file it
    loads cannot be read: the boot then runs, and its failure says why."""
    counts = guest.counts_path(b.log)
    try:
        cmd = guest.counted_command(b.guest, b.initrd, b.topology, b.plugin, counts, b.seed)
        return store.key(cmd, counts)
    except (OSError, KlocError):
        return None


def _reuse(b: Boot, stored: Stored) -> guest.RunResult:
    """A stored boot as if it ran now: its console and counts where the boot's would
    be, its figures computed from them by today's code."""
    counts = guest.counts_path(b.log)
    write_text(b.log, stored.console)
    write_text(counts, stored.counts)
    r = guest.result(stored.console, stored.seconds, b.topology, counts, b.seed)
    if r.record is not None:
        r.record['stored'] = stored.digest
    return r


def _ran(b: Boot) -> tuple[str, str]:
    """What a boot that ran left: its console and the plugin's JSON, as text."""
    return (b.log.read_text(errors='replace'),
            guest.counts_path(b.log).read_text(errors='replace'))


def _save(store: CountStore, key: dict[str, str], b: Boot, r: guest.RunResult,
          ran: tuple[str, str] | None = None) -> None:
    try:
        console, counts = ran or _ran(b)
        store.save(key, console, counts, r.seconds)
    except OSError as e:
        progress.say(f'{_name(b)}: its counts were not stored ({e}); the '
                     'next command counts it again')


def run(todo: deque[Boot], jobs: int, done: Done, store: CountStore | None = None) -> None:
    """Run the boots of todo, up to jobs at once, started in todo's order; done() for
    each as it ends. done() may append to todo (a retry). An error raised in a boot or
    in done() stops the starting of others, waits for those running, and is raised.

    With a store (countstore.for_command()), each good boot is stored, and a boot
    counted before is handed on from the store without booting, once one of them
    has been re-counted in this command and counted what was stored; a re-count that
    differs drops the store, and the boots held for it run."""
    jobs = max(1, jobs)
    running: dict[Future[guest.RunResult],
                  tuple[Boot, dict[str, str] | None, Stored | None]] = {}
    held: list[tuple[Boot, Stored]] = []    # stored, waiting for the check
    checking = False
    go_on = True
    reused = 0

    def hand(b: Boot, r: guest.RunResult) -> None:
        nonlocal go_on
        if not done(b, r):
            go_on = False

    def stored_boot(b: Boot, stored: Stored) -> None:
        nonlocal reused
        assert store is not None
        r = _reuse(b, stored)
        if not r.ok:        # today's checks refuse what was stored: boot it instead
            store.bypass.add(stored.digest)
            progress.say(f'{_name(b)}: its stored counts ({stored.digest[:12]}) fail '
                         f'today\'s checks ({r.why}); it boots')
            todo.appendleft(b)
            return
        reused += 1
        progress.say(f'{_name(b)}: counted before, with the same bytes '
                     f'loaded; its stored counts reused ({stored.digest[:12]})')
        hand(b, r)

    def release(boot_them: bool) -> None:
        """The boots held for the check: handed on from the store, or queued to boot."""
        rest = held[:]
        held.clear()
        if boot_them:
            todo.extendleft(reversed([h for h, _ in rest]))
            return
        for hb, hs in rest:
            if go_on:
                stored_boot(hb, hs)

    def ended(b: Boot, key: dict[str, str] | None, stored: Stored | None,
              r: guest.RunResult) -> None:
        nonlocal checking
        if store is None or key is None:
            hand(b, r)
            return
        if stored is None:
            if r.ok:
                _save(store, key, b, r)
            hand(b, r)
            return
        checking = False
        if not r.ok:
            # the check did not count: the boots held for it run (a retry of this one,
            # if done() queues it, is the next check)
            hand(b, r)
            release(boot_them=True)
            return
        ran = _ran(b)
        why = countstore.differs(stored, *ran)
        if why:
            store.drop(f'{_name(b)}, counted again as the check: {why} than its stored '
                       f'boot {stored.digest[:12]}')
        else:
            store.checked = True
            progress.say(f'{_name(b)}, counted again as the check, counted exactly what '
                         'was stored: stored boots are reused')
        _save(store, key, b, r, ran)
        hand(b, r)
        release(boot_them=bool(why))

    def start(b: Boot) -> None:
        nonlocal checking
        key = _key(store, b) if store is not None else None
        stored = store.lookup(key) if store is not None and key else None
        if store is not None and stored is not None:
            if store.checked or stored.digest in store.saved:
                # checked in this command, or counted by it a moment ago
                stored_boot(b, stored)
                return
            if checking:
                held.append((b, stored))
                return
            checking = True
            progress.say(f'{_name(b)}: counted before; counted again as this '
                         'command\'s check of the stored counts')
        running[pool.submit(_boot, b)] = (b, key, stored)

    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix='counted-boot') as pool:
        try:
            while True:
                while go_on and todo and len(running) < jobs:
                    start(todo.popleft())
                if not running:
                    assert not held or not go_on, 'boots held for a check that ended'
                    if reused and store is not None:
                        progress.say(f'{reused} counted boot{"s" if reused > 1 else ""} '
                                     f'reused from {store.root}')
                    return
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in sorted(finished, key=lambda f: (running[f][0].seed,
                                                         running[f][0].side)):
                    b, key, stored = running.pop(f)
                    ended(b, key, stored, f.result())
        except BaseException:
            for f in running:
                f.cancel()
            raise
