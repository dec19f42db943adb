# SPDX-License-Identifier: GPL-2.0
"""What goes wrong in counting: CountingError, and running a tool so that its failure is one."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kloc.errors import KlocError


class CountingError(KlocError):
    """The plugin cannot be built, set up or read."""


def run_tool(cmd: list[str], what: str, cwd: Path | None = None) -> str:
    """cmd's stdout; CountingError, saying what needed it, if it is missing or fails."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    except FileNotFoundError:
        raise CountingError(f'{cmd[0]} not found: {what} needs it; run "make deps"') from None
    if r.returncode != 0:
        raise CountingError(f'{what} failed ({" ".join(cmd)}):\n'
                            f'{(r.stderr or r.stdout).strip()}')
    return r.stdout
