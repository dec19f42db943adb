# SPDX-License-Identifier: GPL-2.0
"""A small KTAP parser for kernel console logs.

It finds the KTAP document in a console log (printk timestamps and
interleaved kernel messages allowed), and returns the tree of results. A
test whose result line never came (an oops, a hang, a reboot) is CRASHED,
with the console lines that followed its start as its log.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field


class Status(enum.Enum):
    PASS = 'PASS'
    FAIL = 'FAIL'
    SKIP = 'SKIP'
    CRASHED = 'CRASHED'


@dataclass
class Result:
    name: str
    status: Status = Status.CRASHED
    reason: str = ''          # SKIP reason, or why it crashed
    log: list[str] = field(default_factory=list)
    children: list[Result] = field(default_factory=list)
    planned: int | None = None

    def leaves(self, prefix: str = '') -> list[tuple[str, Result]]:
        """(path, case) for every case that has no subtests."""
        path = f'{prefix}.{self.name}' if prefix else self.name
        if not self.children:
            return [(path, self)]
        out: list[tuple[str, Result]] = []
        for c in self.children:
            out.extend(c.leaves(path))
        # A parent that crashed, or failed with no failing case to show for
        # it (missing subtests), is a result of its own.
        bad = (Status.FAIL, Status.CRASHED)
        if self.status in bad and not any(leaf.status in bad for _, leaf in out):
            out.append((path, self))
        return out


@dataclass
class Document:
    found: bool               # whether any KTAP/TAP header was seen
    suites: list[Result]
    planned: int | None
    trailing: list[str]       # console lines after the last result

    def counts(self) -> dict[Status, int]:
        c = {s: 0 for s in Status}
        for suite in self.suites:
            for _, leaf in suite.leaves():
                c[leaf.status] += 1
        return c

    @property
    def ok(self) -> bool:
        if not self.found or not self.suites:
            return False
        if self.planned is not None and len(self.suites) < self.planned:
            return False
        c = self.counts()
        return c[Status.FAIL] == 0 and c[Status.CRASHED] == 0


# The KTAP patterns, defined here only (the runner's extract_ktap uses them).
TIMESTAMP = re.compile(r'^\[\s*\d+\.\d+\]\s?')
HEADER = re.compile(r'^(\s*)K?TAP version \d+')

_SUBTEST = re.compile(r'^(\s*)# Subtest: (.*)$')
_PLAN = re.compile(r'^(\s*)1\.\.(\d{1,9})\s*$')    # a longer count is no plan
_RESULT_START = re.compile(r'(\s*)(ok|not ok) (\d+)(.*)', re.DOTALL)
_DIRECTIVE = re.compile(r'#\s*(\w+)\s*(.*)', re.DOTALL)
# Deeper than this, a header or "# Subtest:" is a log line: KUnit nests 3 or 4
# levels, and the tree is walked recursively.
MAX_DEPTH = 64


@dataclass(frozen=True)
class _Line:
    indent: int
    ok: str              # 'ok' or 'not ok'
    name: str
    directive: str | None
    reason: str


def _result(line: str) -> _Line | None:
    """A result line: (indent)ok|not ok N[ -][ name][ # DIRECTIVE reason].

    In linear time: a regular expression for it backtracks quadratically on a
    long run of spaces.
    """
    m = _RESULT_START.fullmatch(line)
    if not m:
        return None
    rest = m.group(4)
    pre, hash_, post = rest.partition('#')
    directive: str | None = None
    reason = ''
    if hash_:
        d = _DIRECTIVE.fullmatch(hash_ + post)
        if not d:
            return None
        directive, reason = d.group(1), d.group(2)
    if pre.startswith(' -') and (pre[2:3] in ('', ' ') or pre[2:].isspace()):
        pre = pre[2:]
    if pre.startswith(' '):
        name = pre[1:]
    elif pre == '' or pre.isspace():
        name = ''
    else:
        return None
    return _Line(len(m.group(1)), m.group(2), name.strip(), directive, reason.strip())


def _clean(line: str) -> str:
    return TIMESTAMP.sub('', line.rstrip('\r\n'))


@dataclass
class _Open:
    indent: int
    node: Result
    pending: list[str] = field(default_factory=list)


def parse(text: str) -> Document:
    lines = [_clean(x) for x in text.splitlines()]
    start = next((i for i, x in enumerate(lines) if HEADER.match(x)), None)
    if start is None:
        return Document(False, [], None, lines[-40:])
    root = Result('(root)')
    stack = [_Open(len(HEADER.match(lines[start]).group(1)), root)]  # type: ignore[union-attr]
    trailing: list[str] = []
    for line in lines[start + 1:]:
        top = stack[-1]
        deepest = len(stack) >= MAX_DEPTH
        m = HEADER.match(line)
        if m:
            indent = len(m.group(1))
            if indent > top.indent and not deepest:
                stack.append(_Open(indent, Result('')))
            continue
        m = _SUBTEST.match(line)
        if m and (len(m.group(1)) == top.indent
                  or (len(m.group(1)) > top.indent and not deepest)):
            if len(m.group(1)) > top.indent:
                stack.append(_Open(len(m.group(1)), Result('')))
            stack[-1].node.name = m.group(2).strip()
            continue
        m = _PLAN.match(line)
        if m and len(m.group(1)) == top.indent:
            top.node.planned = int(m.group(2))
            continue
        r = _result(line)
        if r and r.indent <= top.indent:
            indent = r.indent
            pending_child: _Open | None = None
            while len(stack) > 1 and stack[-1].indent > indent:
                done = stack.pop()
                if stack[-1].indent <= indent and pending_child is None:
                    pending_child = done      # the subtest this line closes
                else:
                    _crashed(done, stack[-1])
            parent = stack[-1]
            name = r.name
            status = _status(r.ok, r.directive)
            reason = r.reason
            if pending_child is not None:
                node = pending_child.node
                node.name = node.name or name
                node.log = node.log + pending_child.pending
            else:
                node = Result(name, log=parent.pending)
            node.status = status
            node.reason = reason
            parent.pending = []
            parent.node.children.append(node)
            trailing = []
            continue
        # Diagnostics and console noise belong to the innermost open test.
        stack[-1].pending.append(line)
        trailing.append(line)
    # Whatever is still open never finished.
    while len(stack) > 1:
        done = stack.pop()
        _crashed(done, stack[-1])
    _mark_missing(root)
    return Document(True, root.children, root.planned, trailing[-40:])


def _crashed(done: _Open, parent: _Open) -> None:
    node = done.node
    node.log = node.log + done.pending
    node.status = Status.CRASHED
    node.reason = 'no result line: the kernel crashed, hung or stopped'
    parent.node.children.append(node)


def _status(ok: str, directive: str | None) -> Status:
    if directive and directive.upper() == 'SKIP':
        return Status.SKIP
    return Status.PASS if ok == 'ok' else Status.FAIL


def _mark_missing(node: Result) -> None:
    """A parent that ended early with planned > seen: count the rest as crashed."""
    for c in node.children:
        _mark_missing(c)
    if node.planned is not None and node.children and len(node.children) < node.planned:
        if node.status == Status.PASS:
            node.status = Status.FAIL
        missing = node.planned - len(node.children)
        node.reason = node.reason or f'{missing} of {node.planned} planned subtests never ran'
