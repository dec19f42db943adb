# SPDX-License-Identifier: GPL-2.0
"""One JUnit XML document for many (kernel, topology) KTAP runs."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from kloc.kunitpy.ktap import Document, Status


@dataclass(frozen=True)
class KunitRun:
    kernel: str      # e.g. linux-6.12.57
    topology: str    # e.g. arm64_2n_its1
    doc: Document
    seconds: float = 0.0
    origin: str = 'kdir'     # the tree: 'debian' (stock), 'kdir', 'review', 'mutant'
    fixes: tuple[str, ...] = ()  # the known failures (known.py) whose fix the tree has


def _case(parent: ET.Element, classname: str, name: str, status: Status,
          reason: str, log: list[str]) -> None:
    tc = ET.SubElement(parent, 'testcase', classname=classname, name=name)
    text = '\n'.join(log)
    if status == Status.FAIL:
        ET.SubElement(tc, 'failure', message=reason or 'failed').text = text
    elif status == Status.CRASHED:
        ET.SubElement(tc, 'error', message=reason or 'crashed').text = text
    elif status == Status.SKIP:
        ET.SubElement(tc, 'skipped', message=reason or 'skipped')
    if text and status == Status.PASS:
        ET.SubElement(tc, 'system-out').text = text


def to_xml(runs: list[KunitRun]) -> str:
    root = ET.Element('testsuites', name='kloc kunit')
    for run in runs:
        suite_name = f'{run.kernel}.{run.topology}'
        ts = ET.SubElement(root, 'testsuite', name=suite_name, time=f'{run.seconds:.1f}')
        n = {'tests': 0, 'failures': 0, 'errors': 0, 'skipped': 0}
        if not run.doc.found or not run.doc.suites:
            _case(ts, suite_name, f'boot [{run.topology}]', Status.CRASHED,
                  'the kernel printed no KTAP results: it did not boot, or crashed '
                  'before KUnit ran', run.doc.trailing)
            n['tests'] += 1
            n['errors'] += 1
        for suite in run.doc.suites:
            for path, leaf in suite.leaves():
                _, _, case = path.partition('.')
                _case(ts, f'{suite_name}.{suite.name}', f'{case} [{run.topology}]',
                      leaf.status, leaf.reason, leaf.log)
                n['tests'] += 1
                n['failures'] += leaf.status == Status.FAIL
                n['errors'] += leaf.status == Status.CRASHED
                n['skipped'] += leaf.status == Status.SKIP
        for k, v in n.items():
            ts.set(k, str(v))
    ET.indent(root)
    body = ET.tostring(root, encoding='unicode')
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + '\n'
