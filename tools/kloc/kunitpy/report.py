# SPDX-License-Identifier: GPL-2.0
"""make report (and the end of make kunit): every KUnit run under OUT/kunit merged
into one JUnit file and one summary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kloc import paths
from kloc.atomicfile import write_text
from kloc.kunitpy import junit, runner, summary


@dataclass(frozen=True)
class Report:
    text: str           # the summary, then where the files are
    ok: bool            # every run complete, every failure a known one


def write(out: Path) -> Report:
    """Read OUT/kunit/<kernel>/*, write OUT/kunit/junit.xml and summary.txt."""
    runs = runner.load_runs(out / 'kunit')
    kout = paths.mark_out(out) / 'kunit'
    kout.mkdir(parents=True, exist_ok=True)
    write_text(kout / 'junit.xml', junit.to_xml(runs))
    text = summary.render(runs)
    write_text(kout / 'summary.txt', text)
    return Report(text + f'Results: {kout}/<kernel>/<topology>.{{ktap,json,console}}, '
                  f'JUnit: {kout / "junit.xml"}\n', summary.ok(runs))
