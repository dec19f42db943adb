# SPDX-License-Identifier: GPL-2.0
"""Property tests (Hypothesis) for the parsers of outside input.

The KTAP/console parser and the patch/mbox parser take whatever a kernel
or a user gives them: on any input they return a result or raise a
KlocError, never a traceback; on well-formed input they recover what was
written.
"""

from __future__ import annotations

import re
import os
import tempfile
import unittest
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings, strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from kloc.kunitpy import ktap
from kloc.review import patch_input
from kloc.series import mail
from kloc.series.patching import Contents, PatchError, apply_text, file_changes, touched_files
from kloc.errors import KlocError
from kloc.series.planning import Step
from kloc.paths import PACKAGE_ROOT
from kloc.series.changes import Change

from .helpers import DATA, stock_parser

# Hypothesis caches a Unicode table under its home: out of the source tree.
HYPOTHESIS_HOME = Path(tempfile.gettempdir()) / 'kloc-hypothesis'
set_hypothesis_home_dir(str(HYPOTHESIS_HOME))  # type: ignore[no-untyped-call]
# The same examples every run, so that make test is reproducible: random ones
# found a console that made kunit_parser loop until memory ran out (10 GB in
# CI, ktap._plans_after_headers), by chance, in one run of many. KLOC_FUZZ=1
# draws new ones (docs/tests.md).
FUZZ = os.environ.get('KLOC_FUZZ', '') not in ('', '0')
SETTINGS = settings(max_examples=600 if FUZZ else 60, deadline=None, database=None,
                    derandomize=not FUZZ,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.data_too_large])
FEW = settings(SETTINGS, max_examples=30)     # each example runs GNU patch

CONSOLES = {p.name: p.read_text() for p in sorted(DATA.glob('*.console'))}
PATCHES = {str(p.relative_to(PACKAGE_ROOT)): p.read_text() for p in sorted(
    list(PACKAGE_ROOT.glob('kunit/*/mutants/*/*.patch'))
    + list(PACKAGE_ROOT.glob('selftests/lo_counters/review/*.patch'))
    + list(PACKAGE_ROOT.glob('kunit/*/*/*.patch')))}
MAILS = {k: v for k, v in PATCHES.items() if v.startswith('From ')}


# --- KTAP ------------------------------------------------------------------

def check_document(doc: ktap.Document) -> None:
    """What every parse must give, whatever the input."""
    assert isinstance(doc, ktap.Document)
    counts = doc.counts()
    assert sum(counts.values()) == sum(len(s.leaves()) for s in doc.suites)
    assert isinstance(doc.ok, bool)
    assert len(doc.trailing) <= 40
    for suite in doc.suites:
        for path, leaf in suite.leaves():
            assert isinstance(path, str) and leaf.status in ktap.Status


def parse(text: str) -> ktap.Document | None:
    try:
        doc = ktap.parse(text, stock_parser())
    except KlocError:
        return None
    check_document(doc)
    return doc


@dataclass
class Node:
    name: str
    status: ktap.Status
    reason: str
    children: list[Node]
    plan: bool


NAMES = st.from_regex(r'[A-Za-z_][A-Za-z0-9_]{0,12}( [A-Za-z0-9_]{1,6}){0,2}',
                      fullmatch=True)
REASONS = st.from_regex(r'([A-Za-z0-9_]{1,6}( [A-Za-z0-9_]{1,6}){0,3})?', fullmatch=True)
LEAF_STATUS = st.sampled_from([ktap.Status.PASS, ktap.Status.FAIL, ktap.Status.SKIP])


def _distinct(n: Node, above: frozenset[str] = frozenset()) -> bool:
    """kunit.py's parser ends a test at a result line with its name: no test
    may share a name with a test it is nested in (KUnit never prints one)."""
    return n.name not in above and all(_distinct(c, above | {n.name}) for c in n.children)


def _suite(n: Node) -> Node:
    """KUnit prints a plan for every suite."""
    return Node(n.name, n.status, n.reason, n.children, True)


def _node(children: st.SearchStrategy[list[Node]]) -> st.SearchStrategy[Node]:
    return st.builds(Node, NAMES, LEAF_STATUS, REASONS, children, st.booleans())


LEAVES = _node(st.just([]))
TREES = st.recursive(LEAVES, lambda kids: _node(st.lists(kids, min_size=1, max_size=4)),
                     max_leaves=12)
SUITES = st.lists(_node(st.lists(TREES, min_size=1, max_size=4)).map(_suite).filter(_distinct),
                  min_size=1, max_size=3)


def render(nodes: list[Node], indent: int, dash: bool,
           starts: list[tuple[int, int, int]] | None, out: list[str]) -> None:
    """KTAP as KUnit prints it; starts gets (header, subtest, result) line numbers."""
    pad = ' ' * indent
    for k, n in enumerate(nodes, 1):
        header = subtest = len(out)
        if n.children:
            out.append(f'{pad}    KTAP version 1')
            subtest = len(out)
            out.append(f'{pad}    # Subtest: {n.name}')
            if n.plan:
                out.append(f'{pad}    1..{len(n.children)}')
            render(n.children, indent + 4, dash, None, out)
        ok = 'not ok' if n.status == ktap.Status.FAIL else 'ok'
        skip = f' # SKIP {n.reason}'.rstrip() if n.status == ktap.Status.SKIP else ''
        if starts is not None:
            starts.append((header, subtest, len(out)))
        out.append(f'{pad}{ok} {k}{" -" if dash else ""} {n.name}{skip}')


def ktap_lines(suites: list[Node], dash: bool,
               starts: list[tuple[int, int, int]] | None = None) -> list[str]:
    out = ['KTAP version 1', f'1..{len(suites)}']
    render(suites, 0, dash, starts, out)
    return out


def shape(n: ktap.Result | Node) -> tuple[object, ...]:
    reason = n.reason if n.status == ktap.Status.SKIP else ''
    return (n.name, n.status, reason, tuple(shape(c) for c in n.children))


# Lines KTAP gives a meaning to: kernel noise must not look like them.
KTAP_LIKE = [ktap.HEADER, re.compile(r'^\s*# Subtest:'), re.compile(r'^\s*1\.\.\d'),
             re.compile(r'^\s*(ok|not ok) \d')]
KERNEL_WORDS = st.sampled_from(['ITS@0x0000000060910000:', 'allocated', '8192', 'Devices',
                                '@60940000', '(flat,', 'esz', 'psz', '64K', 'CPU1:',
                                'Booted', 'secondary', 'processor', 'Kernel', 'panic',
                                '------------[', 'cut', 'here', ']------------', 'ok', '1',
                                '#', '1..2', 'not', 'Subtest:', 'KTAP', 'version'])


def _words(lead: str, words: list[str]) -> str:
    return lead + ' '.join(words)


def _not_ktap(line: str) -> bool:
    return not any(r.match(line) for r in KTAP_LIKE)


KERNEL_LINES = st.builds(_words, st.sampled_from(['', '', '', ' ', '\t', '        ']),
                         st.lists(KERNEL_WORDS, min_size=1, max_size=8)).filter(_not_ktap)


def _indented(pad: int, line: str) -> str:
    return ' ' * pad + line


def header_then_subtest(lines: list[str], at: int) -> bool:
    """Whether lines[at] is a "# Subtest:" line right after a KTAP header."""
    return at > 0 and bool(ktap.HEADER.match(lines[at - 1])) and '# Subtest:' in lines[at]


def stamp(line: str, when: int) -> str:
    return f'[{when // 1000:5d}.{when % 1000:06d}] {line}'


class KtapProperties(unittest.TestCase):
    @SETTINGS
    @given(st.sampled_from(sorted(CONSOLES)), st.floats(0, 1), st.booleans())
    def test_truncated_consoles(self, name: str, where: float, at_line: bool) -> None:
        """A console cut anywhere parses; suites finished before the cut are as in full."""
        text = CONSOLES[name]
        cut = int(len(text) * where)
        if at_line:
            cut = text.rfind('\n', 0, cut) + 1
        doc = parse(text[:cut])
        assert doc is not None
        full = ktap.parse(text, stock_parser())
        if at_line:
            done = sum(1 for line in text[:cut].splitlines()
                       if re.match(r'(\[\s*\d+\.\d+\] ?)?(not )?ok \d+', line))
            self.assertEqual(doc.suites[:done], full.suites[:done])

    @SETTINGS
    @given(st.sampled_from(sorted(CONSOLES)), st.lists(st.tuples(
        st.floats(0, 1), st.one_of(KERNEL_LINES, st.text(max_size=80)))), st.integers(0, 5))
    def test_consoles_with_lines_added_and_dropped(
            self, name: str, inserts: list[tuple[float, str]], drops: int) -> None:
        lines = CONSOLES[name].splitlines()
        for where, line in inserts:
            lines.insert(int(where * len(lines)), line)
        for k in range(drops):
            if lines:
                del lines[(k * 7919) % len(lines)]
        parse('\n'.join(lines))

    @SETTINGS
    @given(st.one_of(st.text(), st.binary().map(lambda b: b.decode('utf-8', 'replace')),
                     st.lists(st.one_of(
                         st.builds(_indented, st.integers(0, 12),
                                   st.sampled_from(['KTAP version 1', 'TAP version 14',
                                                    '# Subtest: x', '1..3', '1..0', 'ok 1',
                                                    'not ok 2 - y # SKIP', 'ok 3 z # TODO',
                                                    'ok 1 #', '# x: pass:1', '[ 1.0] ok 1',
                                                    'ok 99999999999999999999 big'])),
                         st.text(max_size=20))).map('\n'.join)))
    @example('KTAP version 1\n' + ''.join(' ' * i + 'KTAP version 1\n' for i in range(1, 3000)))
    @example('KTAP version 1\n' + ''.join(' ' * i + '# Subtest: x\n' for i in range(1, 3000)))
    @example('KTAP version 1\n1..' + '9' * 5000 + '\n')
    @example('  KTAP version 1\n       ok 99999999999999999999 big\n            1..0')
    @example('KTAP version 1\nok 1 ' + ' ' * 100000 + 'x\n')
    def test_garbage(self, text: str) -> None:
        """Any text: a Document (or a KlocError), never a traceback, in linear time."""
        parse(text)

    @SETTINGS
    @given(SUITES, st.booleans(), st.booleans(), st.booleans(),
           st.lists(st.tuples(st.floats(0, 1), KERNEL_LINES), max_size=20))
    def test_well_formed_ktap_round_trips(self, suites: list[Node], dash: bool,
                                          stamps: bool, crlf: bool,
                                          noise: list[tuple[float, str]]) -> None:
        """KTAP from a strategy, with kernel messages and timestamps mixed in: the parse
        gives back every name and status, nested subtests included.

        Not between a nested KTAP header and its "# Subtest:" line: kunit.py's
        parser gives up there (test_kernel_line_inside_a_header)."""
        lines = ktap_lines(suites, dash)
        for where, line in sorted(noise, reverse=True):
            at = 2 + int(where * (len(lines) - 2))
            if at < len(lines) and header_then_subtest(lines, at):
                at += 1
            lines.insert(at, line)
        if stamps:
            lines = [stamp(line, 1000 + i) for i, line in enumerate(lines)]
        doc = ktap.parse(('\r\n' if crlf else '\n').join(lines) + '\n', stock_parser())
        check_document(doc)
        self.assertTrue(doc.found)
        self.assertEqual(doc.planned, len(suites))
        self.assertEqual([shape(s) for s in doc.suites], [shape(s) for s in suites])

    def test_kernel_line_inside_a_header(self) -> None:
        """Where kunit.py's parser fails, kloc says so (a KlocError), no traceback."""
        text = ('KTAP version 1\n1..1\n    KTAP version 1\nITS@0x0000000060910000:\n'
                '    # Subtest: B\n    1..1\n    ok 1 A\nok 1 B\n')
        with self.assertRaisesRegex(ktap.ParserError, "kunit.py's parser gave up"):
            ktap.parse(text, stock_parser())

    @SETTINGS
    @given(SUITES, st.floats(0, 1))
    def test_well_formed_ktap_cut_short(self, suites: list[Node], where: float) -> None:
        """Cut after any line: the finished suites as written, the one cut never a
        pass, and each planned suite after it a nameless case that never ran."""
        starts: list[tuple[int, int, int]] = []
        lines = ktap_lines(suites, False, starts)
        cut = 1 + int(where * (len(lines) - 1))
        doc = ktap.parse('\n'.join(lines[:cut]) + '\n', stock_parser())
        check_document(doc)
        want = [shape(n) for n, (_, _, end) in zip(suites, starts) if end < cut]
        got = [shape(s) for s in doc.suites]
        self.assertEqual(got[:len(want)], want)
        if cut <= 1:
            return          # the header alone: no plan was seen
        self.assertEqual(len(got), len(suites))
        open_ = [(n, sub) for n, (head, sub, end) in zip(suites, starts) if head < cut <= end]
        rest = doc.suites[len(want):]
        if open_:
            node, sub = open_[0]
            cut_one, rest = rest[0], rest[1:]
            # kunit.py calls a suite cut before its own result line crashed,
            # or failed for a plan it did not reach: never passed.
            self.assertIn(cut_one.status, (ktap.Status.CRASHED, ktap.Status.FAIL))
            if sub < cut:
                self.assertEqual(cut_one.name, node.name)
        for r in rest:
            self.assertEqual(r.status, ktap.Status.CRASHED)
            self.assertRegex(r.name, r'^\(suite \d+ of \d+: never ran\)$')


# --- patches and mboxes ----------------------------------------------------

HUNK = re.compile(r'@@ -(\d+)(?:,(\d+))? \+\d+(?:,(\d+))? @@')


def preimage(text: str) -> Contents:
    """Files the patch applies to: its context and removed lines where its hunks say,
    filler lines around them."""
    files: dict[str, dict[int, str]] = {}
    cur: str | None = None
    lines = text.split('\n')
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith('--- ') and i + 1 < len(lines) and lines[i + 1].startswith('+++ '):
            name = line[4:].split('\t')[0]
            cur = None if name == '/dev/null' else name.partition('/')[2]
            if cur:
                files.setdefault(cur, {})
            i += 2
            continue
        m = HUNK.match(line)
        if m and cur:
            k = int(m.group(1))
            old, new = int(m.group(2) or 1), int(m.group(3) or 1)
            i += 1
            while i < len(lines) and (old > 0 or new > 0) and lines[i][:1] in ' -+\\':
                c = lines[i][:1]
                if c in ' -':
                    files[cur][k] = lines[i][1:]
                    k += 1
                    old -= 1
                if c in ' +':
                    new -= 1
                i += 1
            continue
        i += 1
    out: Contents = {}
    for rel, known in files.items():
        n = max(known, default=0)
        out[rel] = ''.join(known.get(k, f'/* filler {k} */') + '\n'
                           for k in range(1, n + 1)).encode() if n else None
    return out


VOCABULARY = [
    '--- a/x/y.c', '+++ b/x/y.c', '--- /dev/null', '+++ /dev/null', '+++ b/../../etc/passwd',
    '--- a/x/../../y', 'diff --git a/x/y.c b/x/z.c', 'diff --git a/x b', 'diff --git ',
    'diff --git "a/x/t\\303\\251st.c" "b/x/t\\303\\251st.c"', 'diff --git "a/x',
    'rename from x/y.c',
    'rename to x/z.c', 'rename from ../a', 'rename to /abs', 'copy from drivers/net/loopback.c',
    'copy to drivers/net/lo2.c', 'similarity index 100%', 'dissimilarity index 90%',
    'old mode 100644', 'new mode 100755', 'new mode 120000', 'new mode 777', 'old mode x',
    'deleted file mode 100644', 'new file mode 160000', 'new file mode 100644',
    'index 0000000..1111111 100644', 'index 0000000..1111111 120000', 'index abc',
    '@@ -1 +1 @@', '@@ -0,0 +1,99999999 @@', '@@ -99999999999999999999,1 +1 @@',
    '@@ -1,3 +1,3 @@ static int', '@@ -', '\\ No newline at end of file',
    'From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001',
    'Subject: =?x-bogus?q?a?=', 'Subject: =?utf-8?b?!!?=', 'Subject: =?utf-8?q?caf=C3=A9?=',
    '-', '+', ' ', '', '---', '-- ', '\r', 'Index: x/y.c', '*** a/x/y.c',
    '--- a/x/y.c\t2024-01-01',
]


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, str]:
    """(name of a real patch, the patch with a few random edits)."""
    name = draw(st.sampled_from(sorted(PATCHES)))
    lines = PATCHES[name].split('\n')
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(['delete', 'duplicate', 'insert', 'replace', 'swap',
                                   'char', 'truncate']))
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        line = draw(st.one_of(st.sampled_from(VOCABULARY), st.text(max_size=40)))
        if not lines:
            lines = [line]
        elif op == 'delete':
            del lines[i]
        elif op == 'duplicate':
            lines.insert(i, lines[i])
        elif op == 'insert':
            lines.insert(i, line)
        elif op == 'replace':
            lines[i] = line
        elif op == 'swap':
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 'char':
            at = draw(st.integers(0, len(lines[i])))
            c = draw(st.sampled_from(list('-+ @\\#/\t.0') + ['\r', '\x00', 'é']))
            lines[i] = lines[i][:at] + c + lines[i][at + 1:]
        else:
            lines = lines[:i]
    return name, '\n'.join(lines)


def load_text(data: bytes) -> patch_input.PatchInfo | None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / 'x.patch'
        p.write_bytes(data)
        try:
            return patch_input.load(p)
        except PatchError as e:
            assert '\n' not in str(e), str(e)
            return None


def check_names(names: list[str]) -> None:
    for n in names:
        assert n and not n.startswith('/') and '..' not in n.split('/'), n


def subject_of(mail: str) -> str:
    m = re.search(r'^Subject: (.*)$', mail, re.MULTILINE)
    assert m
    return m.group(1)


class PatchProperties(unittest.TestCase):
    def test_real_patches_apply_to_their_preimage(self) -> None:
        """The fixture the properties below mutate: each real patch applies as written."""
        for name, text in PATCHES.items():
            with self.subTest(patch=name):
                state = preimage(text)
                out, _ = apply_text(text, state, {}, name)
                self.assertEqual(sorted(out), sorted(touched_files(text)))
                info = load_text(text.encode())
                assert info is not None
                self.assertEqual(list(info.files), touched_files(text))

    @SETTINGS
    @given(mutated())
    def test_mutated_patches_parse_or_are_refused(self, case: tuple[str, str]) -> None:
        _, text = case
        try:
            names = touched_files(text)
            changes = file_changes(text)
        except PatchError as e:
            self.assertNotIn('\n', str(e))
            return
        check_names(names)
        self.assertEqual(set(names), {n for c in changes for n in (c.old, c.new) if n})
        info = load_text(text.encode('utf-8', 'surrogatepass'))
        if info is not None:
            self.assertEqual(list(info.files), names)

    @SETTINGS
    @given(st.sampled_from(sorted(PATCHES)), st.lists(st.tuples(st.floats(0, 1),
                                                                st.integers(0, 255)),
                                                      min_size=1, max_size=8))
    def test_flipped_bytes(self, name: str, flips: list[tuple[float, int]]) -> None:
        data = bytearray(PATCHES[name].encode())
        for where, byte in flips:
            data[int(where * (len(data) - 1))] = byte
        load_text(bytes(data))

    @FEW
    @given(mutated())
    def test_mutated_patches_apply_or_are_refused(self, case: tuple[str, str]) -> None:
        """Applied to the files the real patch fits: a result, or a PatchError naming why."""
        name, text = case
        try:
            out, modes = apply_text(text, preimage(PATCHES[name]), {}, 'p')
        except PatchError as e:
            self.assertNotIn('\n', str(e))
            return
        self.assertEqual(sorted(out), sorted(touched_files(text)))
        self.assertEqual(sorted(modes), sorted(k for k, v in out.items() if v is not None))

    @SETTINGS
    @given(st.lists(st.sampled_from(sorted(MAILS)), min_size=1, max_size=5),
           st.sampled_from(['\n', '', '\n\n']))
    def test_mbox_concatenations(self, names: list[str], sep: str) -> None:
        text = sep.join(MAILS[n] if MAILS[n].endswith('\n') else MAILS[n] + '\n'
                        for n in names)
        info = load_text(text.encode())
        assert info is not None
        self.assertEqual(info.mails, len(names))
        want: list[str] = []
        for n in names:
            want += touched_files(MAILS[n])
        self.assertEqual(info.files, tuple(dict.fromkeys(want)))
        first = load_text(MAILS[names[0]].encode())
        assert first is not None
        self.assertEqual(info.subject, first.subject)


# --- the series export, read back ------------------------------------------

SAFE_TEXT = st.text(alphabet=st.characters(
    whitelist_categories=('L', 'N', 'P', 'S', 'Zs', 'Zl', 'Zp'),
    whitelist_characters='\x0b\x0c\r\x1c\x1d\x1e\x85',
    blacklist_characters='\u00a0'), max_size=30)
CONTENT = st.one_of(st.none(), st.lists(SAFE_TEXT, max_size=12).flatmap(
    lambda lines: st.sampled_from(['\n', '']).map(
        lambda end: ('\n'.join(lines) + (end if lines else '')).encode())))
PATHS = st.from_regex(r'[a-z]{1,6}(/[a-z0-9_]{1,6}){0,2}\.[ch]', fullmatch=True)
SUBJECTS = st.from_regex(r'[A-Za-z0-9:,()_-]{1,10}( [A-Za-z0-9:,()_\'-]{1,10}){0,6}',
                         fullmatch=True)
BODIES = st.lists(st.from_regex(r'([A-Za-z0-9,.()]{1,8}( [A-Za-z0-9,.()]{1,8}){0,6})?',
                                fullmatch=True), max_size=5).map('\n'.join)


class ExportProperties(unittest.TestCase):
    @FEW
    @given(SUBJECTS, BODIES, st.dictionaries(PATHS, st.tuples(CONTENT, CONTENT),
                                             min_size=1, max_size=4),
           st.integers(1, 3))
    def test_a_mail_reads_back_and_applies(self, subject: str, body: str,
                                           files: dict[str, tuple[bytes | None,
                                                                  bytes | None]],
                                           index: int) -> None:
        """mailpatch's git-am mail: the same subject and files, and GNU patch turns the
        files before into the files after."""
        before = {rel: b for rel, (b, a) in files.items() if not (b is None and a is None)}
        after = {rel: a for rel, (b, a) in files.items() if not (b is None and a is None)}
        changed = [rel for rel in sorted(after) if before[rel] != after[rel]]
        if not changed:
            return
        step = Step(Change('c', subject, body, {}, ()), before, after)
        text = mail.mail(step, index, 3, 'T <t@t>', '6.12.0')
        info = load_text(text.encode())
        assert info is not None, text
        self.assertEqual(info.subject, f'[PATCH {index}/3] {subject}')
        self.assertEqual(sorted(info.files), changed)
        out, modes = apply_text(text, dict(before), {}, 'export')
        self.assertEqual(out, {rel: after[rel] for rel in changed})
        self.assertTrue(all(m == 0o644 for m in modes.values()))


if __name__ == '__main__':
    unittest.main()
