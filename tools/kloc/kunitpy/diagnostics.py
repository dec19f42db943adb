# SPDX-License-Identifier: GPL-2.0
"""The lines the C suites print for the tools: "kloc: key=value ...".

A suite prints them with kunit_info(), and its C source marks each such
line as parsed. This module is the only place their format is known. The
runner reads from them the machine the kernel saw, and checks it against
the topology: every key it reads is in KEYS, and a tool test checks that
the C sources print each of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# In a case's log: "    # <case>: kloc: online_nodes=2 its_numa_node=1"
PATTERN = re.compile(r'(?:^|\s)kloc: ((?:[a-z_]+=\S+)(?: [a-z_]+=\S+)*)\s*$')

ONLINE_NODES = 'online_nodes'
ITS_NUMA_NODE = 'its_numa_node'
KEYS = (ONLINE_NODES, ITS_NUMA_NODE)


def records(lines: Iterable[str]) -> list[dict[str, str]]:
    """Each diagnostic line's key=value pairs, in order."""
    out = []
    for line in lines:
        m = PATTERN.search(line)
        if m:
            out.append(dict(pair.split('=', 1) for pair in m.group(1).split()))
    return out


def integers(lines: Iterable[str], key: str) -> list[int]:
    """Every integer value of one key; a value that is not one is left out."""
    return [int(r[key]) for r in records(lines)
            if re.fullmatch(r'-?\d+', r.get(key, ''))]
