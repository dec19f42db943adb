# SPDX-License-Identifier: GPL-2.0
"""Run a long command with its output in a log file and a heartbeat on stderr."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from kloc import progress

HEARTBEAT_S = 30.0


def last_line(path: Path) -> str:
    try:
        with path.open('rb') as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().decode(errors='replace').strip().splitlines()
    except OSError:
        return ''
    return lines[-1][:120] if lines else ''


def tail(path: Path, n: int = 30) -> str:
    try:
        lines = path.read_text(errors='replace').splitlines()
    except OSError:
        return ''
    return '\n'.join(lines[-n:])


def run_logged(cmd: list[str], log: Path, what: str, cwd: Path | None = None,
               env: Mapping[str, str] | None = None,
               status: Callable[[], str] | None = None) -> int:
    """Run cmd, output to log; print progress every HEARTBEAT_S. Returns the exit code.

    status() says how far the command got; by default, the log's last line.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with log.open('w') as out:
        out.write('$ ' + ' '.join(cmd) + '\n')
        out.flush()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env=None if env is None else dict(env))
        while True:
            try:
                return proc.wait(timeout=HEARTBEAT_S)
            except subprocess.TimeoutExpired:
                now = status() if status else last_line(log)
                progress.say(f'{what}: {int(time.monotonic() - start)} s; {now}')
            except KeyboardInterrupt:
                proc.terminate()
                proc.wait()
                raise


def disk_full_hint(log: Path) -> str:
    """A plain explanation when a build failed because the disk filled."""
    if 'No space left on device' not in tail(log, 200):
        return ''
    return (f'the disk filled during the build (No space left on device, see {log}); free '
            'some space (df -h) or point KLOC_CACHE at a bigger disk, then run the same '
            'command again: finished results are kept; ')
