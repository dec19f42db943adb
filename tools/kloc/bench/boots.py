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

from kloc.counting.plugin import Plugin
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


# What the caller does with a boot that ended, in the calling thread: False stops
# the starting of the boots still queued (those running end and are handed over).
Done = Callable[[Boot, guest.RunResult], bool]


def _boot(b: Boot) -> guest.RunResult:
    return guest.run(b.guest, b.initrd, b.topology, b.timeout, b.log, b.plugin, b.seed)


def run(todo: deque[Boot], jobs: int, done: Done) -> None:
    """Run the boots of todo, up to jobs at once, started in todo's order; done() for
    each as it ends. done() may append to todo (a retry). An error raised in a boot or
    in done() stops the starting of others, waits for those running, and is raised."""
    jobs = max(1, jobs)
    running: dict[Future[guest.RunResult], Boot] = {}
    go_on = True
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix='counted-boot') as pool:
        try:
            while True:
                while go_on and todo and len(running) < jobs:
                    b = todo.popleft()
                    running[pool.submit(_boot, b)] = b
                if not running:
                    return
                ended, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in sorted(ended, key=lambda f: (running[f].seed, running[f].side)):
                    b = running.pop(f)
                    if not done(b, f.result()):
                        go_on = False
        except BaseException:
            for f in running:
                f.cancel()
            raise
