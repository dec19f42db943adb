# SPDX-License-Identifier: GPL-2.0
"""Run every part of make run (parts.py), each as its own command, so that one that
fails (or crashes) leaves the others to run; keep each one's output in
OUT/run/<part>.log while showing its progress; then write OUT/run.json and print one
screen: a line or two per part, its verdict and where its details are.

A second run reuses what is built (every build is incremental) and measures again:
a comparison that finished is moved to <folder>.prev first, so its boots are
re-run, not resumed. Each part's line says which kernel images it rebuilt itself (not
those other commands built in the cache meanwhile); none
means every kernel it booted was reused.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kloc import progress
from kloc.atomicfile import write_text
from kloc.paths import PACKAGE_ROOT
from kloc.pages import html as pages_html
from kloc.run import parts as run_parts, results
from kloc.trees import buildstamp
from kloc.pages.built import summary as built_summary

FORMAT = 'kloc-run-v1'


@dataclass(frozen=True)
class Outcome:
    name: str
    title: str
    ok: bool
    exit: int
    verdict: str
    seconds: float
    log: str                        # its whole output
    details: str                    # where its results are, under OUT
    command: str                    # the make command that reproduces it alone
    built: tuple[str, ...]          # kernel images it (re)built; () : all reused


def _fresh_compare(out: Path) -> None:
    """A finished comparison moves aside: make run measures again, it does not resume."""
    d = results.compare_dir(out)
    if d is None or not (d / 'compare.json').exists():
        return
    prev = d.with_name(d.name + '.prev')
    if prev.is_dir() and not prev.is_symlink():
        shutil.rmtree(prev)
    os.rename(d, prev)
    progress.say(f'compare: the last finished comparison moved to {prev}; measuring again')


def run_part(p: run_parts.Part, out: Path, cache: Path, env: dict[str, str]) -> Outcome:
    logs = out / 'run'
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f'{p.name}.log'
    if p.script:
        cmd = [str(PACKAGE_ROOT / 'tools' / p.argv[0]), *p.argv[1:]]
    else:
        cmd = [sys.executable, '-m', 'kloc', *p.argv, '--out', str(out)]
    own = logs / f'{p.name}.built'
    own.unlink(missing_ok=True)
    env = dict(env, **{buildstamp.BUILT_LOG: str(own)})
    start = time.monotonic()
    progress.say(f'{p.name}: {p.title} ({p.make}); its output in {log}')
    text: list[str] = []
    with open(log, 'w', encoding='utf-8', errors='replace') as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors='replace', env=env, cwd=PACKAGE_ROOT)
        assert proc.stdout is not None
        for line in proc.stdout:
            f.write(line)
            f.flush()
            text.append(line)
            if line.startswith('[kloc '):       # progress lines: shown as they come
                sys.stderr.write(f'  {p.name}: {line}')
        rc = proc.wait()
    built = buildstamp.built(own, cache)
    verdict = p.verdict(out, ''.join(text))
    return Outcome(p.name, p.title, rc == 0, rc, verdict, round(time.monotonic() - start, 1),
                   str(log), str(out / p.details), p.make, built)


def environment(where: run_parts.Where, out: Path) -> dict[str, str]:
    """The parts' environment: kloc on PYTHONPATH, and OUT, KERNEL or KDIR for the
    script parts."""
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT / 'tools'), PYTHON=sys.executable,
               OUT=str(out))
    if where.kdir:
        env['KDIR'] = where.kdir
    else:
        env['KERNEL'] = where.kernel
    return env


def run(where: run_parts.Where, out: Path, cache: Path) -> list[Outcome]:
    env = environment(where, out)
    outcomes = []
    todo = run_parts.plan(where)
    for k, p in enumerate(todo, 1):
        progress.say(f'part {k} of {len(todo)}: {p.name}')
        if p.name == 'compare':
            _fresh_compare(out)
        outcomes.append(run_part(p, out, cache, env))
        write_json(out, where, outcomes)
    return outcomes


def _qemu() -> str:
    try:
        r = subprocess.run(['qemu-system-x86_64', '--version'], capture_output=True,
                           text=True)
    except FileNotFoundError:
        return 'not found'
    return r.stdout.splitlines()[0] if r.stdout else 'unknown'


def document(title: str, tree: str, parts: list[dict[str, object]],
             out: Path) -> dict[str, object]:
    """run.json's content: what ran (title: make run, make test), where, each part's
    outcome, and what the parts measured, read from OUT (results.py)."""
    return {'format': FORMAT, 'title': title, 'tree': tree,
            'machine': {'host': platform.node(), 'kernel': platform.release(),
                        'cpus': os.cpu_count(), 'arch': platform.machine()},
            'qemu': _qemu(), 'ok': all(p.get('ok') for p in parts),
            'parts': parts, 'results': results.gather(out)}


def write(out: Path, doc: dict[str, object]) -> Path:
    """OUT/run.json and OUT/report.html from it."""
    path = out / 'run.json'
    write_text(path, json.dumps(doc, indent=1) + '\n')
    write_text(out / 'report.html', pages_html.render(doc))
    return path


def write_json(out: Path, where: run_parts.Where, outcomes: list[Outcome]) -> Path:
    """OUT/run.json: what ran, where, each part's outcome and what it measured, and
    OUT/report.html from it (both rewritten after each part, so an interrupted run
    keeps those that finished)."""
    return write(out, document('make run', where.make_tree(),
                               [asdict(o) for o in outcomes], out))


PHASE_KEYS: dict[str, type | tuple[type, ...]] = {'name': str, 'ok': bool, 'exit': int,
                                                  'seconds': (int, float)}


def phases(path: Path) -> list[dict[str, object]]:
    """make test's phases, one JSON line each (tools/make-test.sh), as parts: a line
    that is not one make-test.sh could have written is refused (OUT is not trusted)."""
    out: list[dict[str, object]] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        try:
            p = json.loads(line)
        except ValueError:
            p = None
        if not isinstance(p, dict) or any(not isinstance(p.get(k), t)
                                          for k, t in PHASE_KEYS.items()):
            raise run_parts.RunError(f'{path}:{n}: not a phase line of make test')
        out.append({'name': p['name'], 'title': p['name'], 'ok': p['ok'], 'exit': p['exit'],
                    'verdict': 'ok' if p['ok'] else f'FAILED (exit {p["exit"]})',
                    'seconds': p['seconds'], 'log': '', 'details': '',
                    'command': 'make test', 'built': None})
    return out


def screen(outcomes: list[Outcome], out: Path) -> str:
    """One screen: per part, PASS or FAIL, its verdict, what it rebuilt, where it is."""
    lines = ['', f'make run: {sum(o.ok for o in outcomes)} of {len(outcomes)} parts passed', '']
    for o in outcomes:
        lines.append(f'{"PASS" if o.ok else "FAIL"}  {o.name:<18} {o.seconds:>7.0f} s  '
                     f"{built_summary(o.built)}")
        lines.append(f'      {o.verdict}')
        lines.append(f'      details: {o.details}; log: {o.log}')
    lines += ['', f'All of it: {out}/report.html (from {out}/run.json)']
    return '\n'.join(lines) + '\n'
