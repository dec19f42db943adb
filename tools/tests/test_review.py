# SPDX-License-Identifier: GPL-2.0
"""make review: bad input, the cached patched tree, status changes, the report."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from kloc import procs
from kloc.bench import counted as counted_runs, interleave, metrics, plot, tables
from kloc.bench.store import BenchRun, open_store
from kloc.guests import guest
from kloc.kcidb import schema as kcidb_schema
from kloc.kunitpy import known
from kloc.pages import html as pages_html
from kloc.review import copies, patch_input, reporting, review, workflow
from kloc.review.errors import ReviewError
from kloc.review.patched import patched_tree
from kloc.series import changes, planning
from kloc.series.state import STATE_DIR
from kloc.series.patching import HunkError
from kloc.trees.sources import Tree
from kloc.paths import PACKAGE_ROOT

from .helpers import carry, DATA, debian_tree, mini_tree, review_2008, stock_parser
from .test_cli import kloc
from .test_stats import HonestVerdicts as StatsVerdicts

NOOP_A, NOOP_B = StatsVerdicts.NOOP_A, StatsVerdicts.NOOP_B

NOOP = PACKAGE_ROOT / 'selftests/lo_counters/review/noop.patch'
SLOW = PACKAGE_ROOT / 'selftests/lo_counters/review/slow-xmit.patch'
TREE_FILES = ['Kconfig', 'tools/testing/kunit/kunit.py', 'scripts/checkpatch.pl',
              'drivers/irqchip/irq-gic-v3-its.c', 'drivers/irqchip/Kconfig', 'mm/Kconfig',
              'mm/Makefile', 'drivers/net/loopback.c', 'tools/testing/selftests/Makefile']


class BadPatches(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def refused(self, data: bytes, message: str) -> None:
        p = self.dir / 'x.patch'
        p.write_bytes(data)
        out = self.dir / 'out'
        out.mkdir(exist_ok=True)
        (out / 'earlier-result.txt').write_text('kept')
        r = kloc('review', '--patch', str(p), '--out', str(out))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(message, r.stderr)
        self.assertEqual(os.listdir(out), ['earlier-result.txt'])
        self.assertEqual((out / 'earlier-result.txt').read_text(), 'kept')

    def test_empty(self) -> None:
        self.refused(b'\n  \n', 'is empty: there is nothing to review')

    def test_binary(self) -> None:
        self.refused(b'diff --git a/logo.png b/logo.png\nGIT binary patch\nliteral 4\n',
                     'holds a binary patch')
        self.refused(b'Binary files a/x.bin and b/x.bin differ\n', 'holds a binary patch')

    def test_not_a_diff(self) -> None:
        self.refused(b'please apply my change\n', 'no "+++ b/..." line')

    def test_not_utf8(self) -> None:
        self.refused(b'--- a/x\n+++ b/x\n@@ -1 +1 @@\n-\xff\n+\xfe\n', 'is not UTF-8 text')

    def test_missing(self) -> None:
        r = kloc('review', '--patch', '/nonexistent.patch')
        self.assertEqual(r.returncode, 2)
        self.assertIn('no such file', r.stderr)

    def test_neither_patch_nor_aa(self) -> None:
        r = kloc('review')
        self.assertEqual(r.returncode, 2)
        self.assertIn('give PATCH=file.patch', r.stderr)

    def test_subjects(self) -> None:
        self.assertRegex(patch_input.load(SLOW).subject,
                         r'^\[PATCH\] loopback: spin \d+ times in every transmit \(a '
                         r'deliberate slowdown\)$')
        m = patch_input.load(PACKAGE_ROOT / 'kunit/its/mutants/6.12/numa-unaware-table.patch')
        self.assertEqual(m.subject, 'Mutant: GITS_BASER tables allocated without the '
                         'ITS\'s node')
        self.assertEqual(m.files, ('drivers/irqchip/irq-gic-v3-its.c',))


def diff(rel: str, old: bytes, new: str) -> str:
    """A -p1 diff of rel from old to new, as a patch to review."""
    return ''.join(difflib.unified_diff(old.decode().splitlines(keepends=True),
                                        new.splitlines(keepends=True), f'a/{rel}', f'b/{rel}'))


def pristine_mini_tree(dest: Path) -> Tree:
    """A KDIR-like copy of the files the review tests need, without the package."""
    real = debian_tree('6.12')
    src = mini_tree(real, dest, TREE_FILES)
    _, read = planning.pristine_reader(real.path)   # the cache may carry the package
    for rel in TREE_FILES:
        data = read(rel)
        if data is not None:
            (src / rel).write_bytes(data)
    return Tree(src, real.version, 'kdir')


class PatchedTree(unittest.TestCase):
    """On a small copy of the 6.12 tree: what the review does before it builds."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        self.base = pristine_mini_tree(root / 'linux' / 'src')
        self.cache = root / 'cache'
        carry(self.base.path, self.base.version)

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def test_made_once_then_reused_base_untouched(self) -> None:
        before = (self.base.path / 'drivers/net/loopback.c').read_bytes()
        p = patch_input.load(SLOW)
        tree, reused = patched_tree(self.base, p, self.cache)
        self.assertFalse(reused)
        self.assertIn(b'barrier();', (tree.path / 'drivers/net/loopback.c').read_bytes())
        self.assertEqual((self.base.path / 'drivers/net/loopback.c').read_bytes(), before)
        same = (tree.path / 'Kconfig').stat().st_ino == (self.base.path / 'Kconfig').stat().st_ino
        self.assertTrue(same, 'untouched files are hard links to the base')
        again, reused = patched_tree(self.base, p, self.cache)
        self.assertTrue(reused)
        self.assertEqual(again.path, tree.path)
        other, reused = patched_tree(self.base, patch_input.load(NOOP), self.cache)
        self.assertFalse(reused)
        self.assertNotEqual(other.path, tree.path)

    def test_old_copies_are_pruned(self) -> None:
        old = [old_copy(self.cache, i, 1000.0 + i) for i in range(5)]
        a, _ = patched_tree(self.base, patch_input.load(SLOW), self.cache)
        b, _ = patched_tree(self.base, patch_input.load(NOOP), self.cache)
        left = sorted(p for p in (self.cache / 'review').iterdir() if p.is_dir())
        self.assertEqual(len(left), copies.KEEP, left)
        self.assertEqual(set(left), {a.path.parent, b.path.parent, old[4], old[3]})

    def test_an_mbox_series_applies_in_order(self) -> None:
        mbox = Path(self.tmp.name) / 'series.mbox'
        mbox.write_text(NOOP.read_text() + '\n' + SLOW.read_text())
        p = patch_input.load(mbox)
        self.assertEqual(p.mails, 2)
        self.assertIn('reword the comment', p.subject)
        tree, _ = patched_tree(self.base, p, self.cache)
        text = (tree.path / 'drivers/net/loopback.c').read_text()
        self.assertIn('called with bottom halves disabled', text)
        self.assertIn('barrier();', text)

    def test_hunk_that_does_not_apply_is_named_before_any_build(self) -> None:
        bad = Path(self.tmp.name) / 'bad.patch'
        bad.write_text(SLOW.read_text().replace(' \tskb_tx_timestamp(skb);\n',
                                                ' \tskb_tx_stamp(skb);\n'))
        with self.assertRaisesRegex(HunkError, r'drivers/net/loopback.c: hunk #1 \(at line '
                                               r'\d+\) does not apply.* The base is Linux '
                                               r'6\.12\.\d+ at .*: if the patch was made '
                                               r'against another kernel, name that one with '
                                               r'KERNEL= or KDIR='):
            patched_tree(self.base, patch_input.load(bad), self.cache)
        self.assertFalse((self.cache / 'review').exists())

    def test_patch_for_another_tree(self) -> None:
        other = Path(self.tmp.name) / 'other.patch'
        other.write_text('--- a/src/main.c\n+++ b/src/main.c\n@@ -1 +1 @@\n-int x;\n+int y;\n')
        with self.assertRaisesRegex(ReviewError, 'changes src/main.c, which Linux '
                                    r'6.12.\d+ at .* does not have: is the patch for '
                                    'another tree'):
            patched_tree(self.base, patch_input.load(other), self.cache)


def old_copy(cache: Path, n: int, used: float) -> Path:
    """A review copy as patched_tree() leaves one, last used at time `used`."""
    root = cache / 'review' / f'linux-6.12.1-{n:016x}'
    (root / 'src').mkdir(parents=True)
    (root / 'src' / 'Makefile').write_text('# a copy\n')
    os.utime(root, (used, used))
    return root


class ReviewCopies(unittest.TestCase):
    """Only the most recently used review copies stay, and none that is in use."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.cache = Path(tmp.name)

    def test_the_most_recently_used_are_kept(self) -> None:
        old = [old_copy(self.cache, i, 1000.0 + i) for i in range(6)]
        other = self.cache / 'review' / 'not-a-copy'
        other.mkdir()
        new = self.cache / 'review' / f'linux-7.2.13-{99:016x}'
        copies.use(self.cache, new, keep=4)
        left = {p for p in (self.cache / 'review').iterdir() if p.is_dir()}
        self.assertEqual(left, {new, other, *old[3:]})
        # using an old one again makes it the most recent
        copies.use(self.cache, old[3], keep=2)
        self.assertEqual({p for p in (self.cache / 'review').iterdir() if p.is_dir()},
                         {new, other, old[3]})

    def test_a_copy_another_command_uses_is_kept(self) -> None:
        held = old_copy(self.cache, 1, 1000.0)
        code = ('import sys; from pathlib import Path; from kloc.review import copies; '
                'copies.use(Path(sys.argv[1]), Path(sys.argv[2])); print("held", flush=True); '
                'sys.stdin.read()')
        child = subprocess.Popen([sys.executable, '-c', code, str(self.cache), str(held)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 env=dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT / 'tools')))
        self.addCleanup(child.kill)
        assert child.stdout is not None and child.stdin is not None
        self.assertEqual(child.stdout.readline(), 'held\n')
        os.utime(held / '.in-use', (1000.0, 1000.0))     # as if it were last used long ago
        new = self.cache / 'review' / f'linux-7.2.13-{99:016x}'
        copies.use(self.cache, new, keep=1)
        self.assertTrue((held / 'src' / 'Makefile').is_file(), 'a copy in use was removed')
        child.stdin.close()
        child.wait(timeout=60)
        copies.use(self.cache, new, keep=1)
        self.assertFalse(held.exists(), 'the copy no one uses any more stayed')


def _one_line_hunk(text: str, line: str, replacement: str) -> str:
    """A -p1 hunk replacing the one line holding `line`, with 3 lines of context."""
    lines = text.splitlines(keepends=True)
    i = next(n for n, x in enumerate(lines) if line in x)
    lo, hi = max(0, i - 3), min(len(lines), i + 4)
    body = ''.join(' ' + x for x in lines[lo:i]) + '-' + lines[i] + \
        '+' + lines[i].replace(line, replacement) + ''.join(' ' + x for x in lines[i + 1:hi])
    return f'@@ -{lo + 1},{hi - lo} +{lo + 1},{hi - lo} @@\n' + body


class ChecksBeforeWriting(unittest.TestCase):
    """make review on a KDIR tree without the package: a patch that cannot apply, or
    names a file the tree lacks, is refused before the install writes anything."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        self.base = pristine_mini_tree(root / 'linux')
        self.cache = root / 'cache'
        self.opts = review.ReviewOptions(('arm64_2n_its1',), 'x86_64_2n', 2, 1.0, 0.05, 60,
                                         1, root / 'out')

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def snapshot(self) -> dict[str, tuple[str, int]]:
        out = {}
        for dirpath, dirs, names in os.walk(self.base.path):
            for n in names + dirs:
                p = Path(dirpath) / n
                out[str(p.relative_to(self.base.path))] = (
                    hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else 'dir',
                    p.stat().st_mode)
        return out

    def refused(self, text: str, error: type[Exception], message: str) -> None:
        bad = Path(self.tmp.name) / 'bad.patch'
        bad.write_text(text)
        before = self.snapshot()
        with self.assertRaisesRegex(error, message):
            review.run(self.base, patch_input.load(bad), self.opts, self.cache)
        self.assertEqual(self.snapshot(), before, 'the tree was written')
        self.assertFalse((self.base.path / STATE_DIR).exists())
        self.assertFalse(self.cache.exists())
        self.assertFalse(self.opts.out.exists())
        with self.assertRaisesRegex(error, message):    # what cmd_review may call first
            review.check(self.base, patch_input.load(bad))
        self.assertEqual(self.snapshot(), before, 'the tree was written')

    def test_a_hunk_that_does_not_apply(self) -> None:
        self.refused(SLOW.read_text().replace(' \tskb_tx_timestamp(skb);\n',
                                              ' \tskb_tx_stamp(skb);\n'),
                     HunkError, r'drivers/net/loopback.c: hunk #1 \(at line \d+\) does '
                     'not apply')

    def test_a_missing_file(self) -> None:
        self.refused('--- a/drivers/net/nosuch.c\n+++ b/drivers/net/nosuch.c\n'
                     '@@ -1 +1 @@\n-int x;\n+int y;\n', ReviewError,
                     'changes drivers/net/nosuch.c, which Linux 6.12.\\d+ at .* does not '
                     'have')

    def test_a_file_deleted_or_renamed_that_is_not_there(self) -> None:
        self.refused('diff --git a/drivers/net/nosuch.c b/drivers/net/x.c\n'
                     'similarity index 100%\nrename from drivers/net/nosuch.c\n'
                     'rename to drivers/net/x.c\n', ReviewError,
                     'renames drivers/net/nosuch.c, which Linux .* does not have')

    def test_checked_as_posted_not_against_the_installed_state(self) -> None:
        """A patch made against the tree as the install leaves it (a line added after one
        the series adds) is refused: a patch applies as posted, to the stock files
        (tests/test_review_stock.py)."""
        plan = planning.plan(self.base.path, self.base.version, changes.load_series())
        rel = 'drivers/irqchip/irq-gic-v3-its.c'
        final = plan.final[rel]
        assert final is not None
        line = '#include "tests/irq-gic-v3-its_kunit.c"\n'
        self.assertIn(line.encode(), final)
        self.assertNotIn(line.encode(), (self.base.path / rel).read_bytes())
        text = final.decode()
        i = text.index(line)
        before_ctx = text[:i].splitlines(keepends=True)[-3:]
        after_ctx = text[i + len(line):].splitlines(keepends=True)[:3]
        n = text[:i].count('\n') + 1 - len(before_ctx)
        hunk = (f'--- a/{rel}\n+++ b/{rel}\n@@ -{n},{len(before_ctx) + 1 + len(after_ctx)} '
                f'+{n},{len(before_ctx) + 2 + len(after_ctx)} @@\n'
                + ''.join(' ' + x for x in before_ctx) + ' ' + line + '+/* more */\n'
                + ''.join(' ' + x for x in after_ctx))
        self.refused(hunk, HunkError, r'drivers/irqchip/irq-gic-v3-its.c: hunk #1 \(at line '
                     r'\d+\) does not apply; the patch was applied as posted, to the stock '
                     r'files .* made against a tree with the package installed')

    def test_hand_edits_are_reviewed_as_they_are_and_recorded(self) -> None:
        """An edited driver (its hooks kept): the patch is checked against the edit,
        the patched copy carries it, and the report and KCIDB record say so."""
        carry(self.base.path, self.base.version)
        rel = 'drivers/irqchip/irq-gic-v3-its.c'
        drv = self.base.path / rel
        old = 'pr_err_ratelimited("Unable to get SGI status\\n");'
        new = 'pr_err_ratelimited("Unable to read the SGI status\\n");'
        drv.write_text(drv.read_text().replace(old, new))
        p = Path(self.tmp.name) / 'on-edit.patch'
        p.write_text(f'--- a/{rel}\n+++ b/{rel}\n' + _one_line_hunk(drv.read_text(), new,
                                                                    new + ' /* x */'))
        checked = review.check(self.base, patch_input.load(p))
        assert checked.applied is not None
        self.assertIn(b'SGI status\\n"); /* x */', checked.applied.contents[rel] or b'')
        self.assertEqual(planning.dirty_files(self.base.path), [rel])
        tree, _ = patched_tree(self.base, patch_input.load(p), self.cache,
                               checked.applied)
        self.assertIn('Unable to read the SGI status', (tree.path / rel).read_text())
        o = review.ReviewOutcome(self.base, tree, patch_input.load(p), dirty=[rel])
        text = reporting.render(o, self.opts)
        self.assertIn('uncommitted edits', text)
        self.assertIn('irq-gic-v3-its.c', text)
        doc = reporting.to_json(o, self.opts)
        kc = doc['kcidb']
        assert isinstance(kc, dict)
        self.assertEqual(kc['checkouts'][0]['misc']['uncommitted_files'], [rel])

    def test_rename_and_mode_change_on_the_installed_tree(self) -> None:
        p = Path(self.tmp.name) / 'mv.patch'
        p.write_text('diff --git a/drivers/net/loopback.c b/drivers/net/lo.c\n'
                     'similarity index 100%\nrename from drivers/net/loopback.c\n'
                     'rename to drivers/net/lo.c\n'
                     'diff --git a/mm/Kconfig b/mm/Kconfig\nold mode 100644\n'
                     'new mode 100755\n')
        checked = review.check(self.base, patch_input.load(p))
        carry(self.base.path, self.base.version)
        tree, _ = patched_tree(self.base, patch_input.load(p), self.cache,
                               checked.applied)
        self.assertFalse((tree.path / 'drivers/net/loopback.c').exists())
        self.assertTrue((self.base.path / 'drivers/net/loopback.c').exists())
        self.assertEqual((tree.path / 'drivers/net/lo.c').read_bytes(),
                         (self.base.path / 'drivers/net/loopback.c').read_bytes())
        self.assertEqual((tree.path / 'mm/Kconfig').stat().st_mode & 0o777, 0o755)
        self.assertEqual((self.base.path / 'mm/Kconfig').stat().st_mode & 0o777, 0o644)


# 7.2.13 with the placement suite as it was until 2026-12-05, when its per-node cases
# took small ITTs from the ITT pool: node 1's cases failed in that run (the pool's page
# was node 0's); in another run the page was node 1's, and node 0's cases failed
# instead (issue 48): the same console with the failure moved, as it read then. The
# known failure as it was declared then, over those cases too.
STOCK_72 = (DATA / 'its-7.2-itt-pool-moves-arm64_2n_its1.console').read_text()
POOL_THEN = (dataclasses.replace(
    known.KNOWN[0], cases=known.KNOWN[0].cases + (
        'irq_gic_v3_its_placement.its_kunit_probe_places_all_on_node.*',)),)
MOVED_72 = STOCK_72.replace(
    '        not ok 3 64K flat on node 1',
    '        ok 3 64K flat on node 1').replace(
    '        ok 2 64K flat on node 0',
    '    # its_kunit_probe_places_all_on_node: EXPECTATION FAILED at drivers/irqchip/tests/'
    'irq-gic-v3-its_kunit.c:727\n    Expected nid == node, but\n        nid == 1 (0x1)\n'
    '        node == 0 (0x0)\ndevice ITT page 1 of 1 (pfn 0x602f0) is on node 1, the ITS '
    'on node 0\n        not ok 2 64K flat on node 0', 1)


def kunit_run_dir(root: Path, side: str, console: str, kernel: str = 'linux-7.2.13') -> Path:
    """A review's KUnit run of one side, as runner.run lays it out."""
    run = root / side
    run.mkdir()
    (run / 'arm64_2n_its1.console').write_text(console)
    (run / 'arm64_2n_its1.meta.json').write_text(json.dumps(
        {'kernel': kernel, 'topology': 'arm64_2n_its1', 'seconds': 1.0,
         'kunit_py_exit': 0, 'kunit_dir': str(stock_parser())}))
    return run


class KnownFailuresMove(unittest.TestCase):
    """Issue 48, item 4: 7.2's known ITT-pool failure landing in another case on the
    patched kernel is no change of the patch's when known.py excuses it on both sides
    (its signature checked); a failure it does not explain still is one."""

    def test_a_moved_known_failure_is_not_a_change(self) -> None:
        self.assertNotEqual(MOVED_72.count('not ok 2 64K flat on node 0'), 0)
        with tempfile.TemporaryDirectory() as d:
            a = review.read_runs(kunit_run_dir(Path(d), 'base', STOCK_72), None, POOL_THEN)
            b = review.read_runs(kunit_run_dir(Path(d), 'patched', MOVED_72), None, POOL_THEN)
        cases = ('irq_gic_v3_its_placement.its_kunit_probe_places_all_on_node.64K flat on '
                 'node 0', 'irq_gic_v3_its_placement.its_kunit_probe_places_all_on_node.'
                 '64K flat on node 1')
        # read as plain statuses, as compare_statuses() did before: two changes
        plain, _ = review.compare_statuses(a[0], b[0])
        self.assertEqual(sorted(c.case for c in plain), list(cases))
        changes, moved = review.split_known(plain, a[0], b[0], a[1], b[1])
        self.assertEqual(changes, [])
        self.assertEqual([(c.case, c.base, c.patched) for c in moved],
                         [(cases[0], 'PASS', 'FAIL'), (cases[1], 'FAIL', 'PASS')])

    def test_a_failure_the_entry_does_not_explain_is_a_change(self) -> None:
        other = MOVED_72.replace('device ITT page 1 of 1 (pfn 0x602f0) is on node 1',
                                 'level-2 device table page 1 of 1 (pfn 0x602f0) is on node 1')
        with tempfile.TemporaryDirectory() as d:
            a = review.read_runs(kunit_run_dir(Path(d), 'base', STOCK_72), None, POOL_THEN)
            b = review.read_runs(kunit_run_dir(Path(d), 'patched', other), None, POOL_THEN)
        plain, _ = review.compare_statuses(a[0], b[0])
        changes, _ = review.split_known(plain, a[0], b[0], a[1], b[1])
        # node 0's new failure is the entry's signature's but for the table: a change;
        # node 1's case passing is the known failure gone from it (it stays in other
        # cases of the topology on both sides): not one
        self.assertEqual([(c.case.rsplit('.', 1)[1], c.base, c.patched) for c in changes],
                         [('64K flat on node 0', 'PASS', 'FAIL')])

    def test_not_excused_outside_the_range(self) -> None:
        """6.12 carries no ITT pool: the same moves there are changes."""
        with tempfile.TemporaryDirectory() as d:
            a = review.read_runs(kunit_run_dir(Path(d), 'base', STOCK_72, 'linux-6.12.118'),
                                 None, POOL_THEN)
            b = review.read_runs(kunit_run_dir(Path(d), 'patched', MOVED_72, 'linux-6.12.118'),
                                 None, POOL_THEN)
        self.assertEqual((a[1], b[1]), ({}, {}))
        self.assertEqual(len(review.split_known(review.compare_statuses(a[0], b[0])[0],
                                                a[0], b[0], a[1], b[1])[0]), 2)


class RunAgain(unittest.TestCase):
    """Issue 48, item 4: a status that differs is run again on both sides; one that
    changes within the base kernel is flaky, one that changes within the patched
    kernel only is the patch's, one that holds is the patch's."""

    def test_confirm(self) -> None:
        t = 'arm64_2n_its1'
        changes = [review.StatusChange(t, c, b, p) for c, b, p in
                   (('s.flaky_base', 'PASS', 'FAIL'), ('s.flaky_patched', 'PASS', 'FAIL'),
                    ('s.holds', 'PASS', 'FAIL'))]
        Side = tuple[review.Statuses, review.Excuses]

        def side(flaky_base: str, flaky_patched: str, holds: str) -> Side:
            return ({(t, 's.flaky_base'): flaky_base, (t, 's.flaky_patched'): flaky_patched,
                     (t, 's.holds'): holds}, {})
        first = {'base': side('PASS', 'PASS', 'PASS'), 'patched': side('FAIL', 'FAIL', 'FAIL')}
        again = {'base': side('FAIL', 'PASS', 'PASS'), 'patched': side('FAIL', 'PASS', 'FAIL')}
        mine, flaky = review.confirm(first, again, changes)
        self.assertEqual([(c.case, c.flaky) for c in flaky], [('s.flaky_base', 'base')])
        self.assertEqual([(c.case, c.flaky) for c in mine],
                         [('s.flaky_patched', 'patched'), ('s.holds', '')])
        self.assertEqual(flaky[0].runs, {'base': ['PASS', 'FAIL'], 'patched': ['FAIL', 'FAIL']})
        base = Tree(Path('/t/linux-7.2/src'), debian_tree('6.12').version, 'debian')
        o = review.ReviewOutcome(base, base, patch_input.load(NOOP), kunit_changes=mine,
                                 kunit_flaky=flaky)
        with tempfile.TemporaryDirectory() as tmp:
            opts = review.ReviewOptions((t,), 'x86_64_2n', 10, 1.0, 0.05, 60, 2, Path(tmp),
                                        bench=False)
            text = reporting.render(o, opts)
        self.assertIn('Verdict: 2 KUnit status changes.', text)
        self.assertIn('  arm64_2n_its1: PASS -> FAIL (flaky on the patched kernel only)', text)
        self.assertIn("Flaky on the base kernel, not the patch's (1):", text)
        self.assertIn('    base: PASS, FAIL', text)


class StatusChanges(unittest.TestCase):
    def test_placement_cases_change(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            for side, console in (('base', 'its-6.12-its1-pass.console'),
                                  ('patched', 'mutant-numa-unaware-lvl2.console')):
                run = Path(d) / side
                run.mkdir()
                shutil.copy(DATA / console, run / 'arm64_2n_its1.console')
                (run / 'arm64_2n_its1.meta.json').write_text(json.dumps(
                    {'kernel': 'linux-6.12', 'topology': 'arm64_2n_its1', 'seconds': 1.0,
                     'kunit_py_exit': 0, 'kunit_dir': str(stock_parser())}))
            status_changes, totals = review.kunit_changes(Path(d) / 'base', Path(d) / 'patched')
        self.assertTrue(status_changes)
        self.assertTrue(all(c.base == 'PASS' and c.patched == 'FAIL' for c in status_changes))
        self.assertTrue(any('its_kunit_probe_places_all_on_node' in c.case
                            for c in status_changes))
        self.assertEqual(totals['base'].get('FAIL', 0), 0)


def timed_diffs(seed: int, scale: float) -> list[metrics.Difference]:
    """10 timed runs a side, the patched side's packets/s scaled by scale (1% noise)."""
    rng = random.Random(seed)

    def rec(k: float) -> dict[str, object]:
        p1, pn = 8e4 * k * rng.gauss(1, 0.01), 1.4e5 * k * rng.gauss(1, 0.01)
        return {'pps_single': p1, 'pps_total': pn, 'scaling_efficiency': pn / (4 * p1),
                'per_cpu': [{'cpu': c, 'node': c // 2, 'pps': pn / 4} for c in range(4)]}
    return metrics.compare([rec(1) for _ in range(10)], [rec(scale) for _ in range(10)], 0.05)


class Report(unittest.TestCase):
    def test_mail_width_and_kcidb(self) -> None:
        diffs = timed_diffs(3, 0.95)
        base = Tree(Path('/t/linux-6.12/src'), debian_tree('6.12').version, 'debian')
        o = review.ReviewOutcome(base, base, patch_input.load(SLOW), diffs=diffs,
                                 kunit_changes=[review.StatusChange('arm64_2n_its1', 'a.b.c',
                                                                    'PASS', 'FAIL')],
                                 kunit_totals={'base': {'PASS': 3}, 'patched': {'PASS': 2,
                                                                                'FAIL': 1}},
                                 failed_runs={'base': 0, 'patched': 1},
                                 qemu_command=['qemu-system-x86_64', '-machine', 'pc', '-kernel',
                                               '/very/long/path/arch/x86/boot/bzImage', '-initrd',
                                               '/x/initramfs.gz'] + ['-numa', 'node'] * 12)
        opts = review.ReviewOptions(('arm64_2n_its1', 'x86_64_2n'), 'x86_64_2n', 10, 2.0, 0.05,
                                    60, 2, Path('/nonexistent'))
        text = reporting.render(o, opts)
        self.assertTrue(all(len(line) < 72 for line in text.splitlines()), text)
        for want in ('Patch: [PATCH] loopback: spin', 'Base:    Linux 6.12',
                     'arm64_2n_its1: PASS -> FAIL', 'regression (significant at alpha = 0.05)',
                     '<bzImage>',
                     'Verdict: regression in 2 of 3 timed figures (1 thread, all CPUs)',
                     'guest-base.config'):
            self.assertIn(want, text)
        doc = reporting.to_json(o, opts)
        json.dumps(doc)
        k = doc['kcidb']
        assert isinstance(k, dict)
        for t in k['tests']:
            self.assertRegex(t['path'], r'^[.a-zA-Z0-9_-]*$')
            self.assertTrue(t['id'].startswith('kloc:'))
        kcidb_schema.validate(k)
        change = [t for t in k['tests'] if t['path'] == 'lo_counters.pps_single.change'][0]
        self.assertEqual(change['status'], 'FAIL')
        self.assertEqual(change['number']['unit'], '%')
        base_checkout, patched_checkout = k['checkouts']
        self.assertEqual(base_checkout['patchset_hash'], '')
        self.assertEqual(len(patched_checkout['patchset_hash']), 64)

    def test_kunit_only_has_no_loopback_anywhere(self) -> None:
        """BENCH=0: the report, review.json and the KCIDB record hold KUnit alone."""
        base = Tree(Path('/t/linux-6.12/src'), debian_tree('6.12').version, 'debian')
        o = review.ReviewOutcome(base, base, patch_input.load(SLOW),
                                 kunit_changes=[review.StatusChange('arm64_2n_its1', 'a.b.c',
                                                                    'PASS', 'FAIL')],
                                 kunit_totals={'base': {'PASS': 3}, 'patched': {'PASS': 2,
                                                                                'FAIL': 1}})
        opts = review.ReviewOptions(('arm64_2n_its1',), 'x86_64_2n', 10, 2.0, 0.05, 60, 2,
                                    Path('/nonexistent'), bench=False)
        text = reporting.render(o, opts)
        self.assertIn('Loopback benchmark: not run (BENCH=0)', text)
        self.assertIn('Verdict: 1 KUnit status change.', text)
        self.assertNotIn('loopback throughput', text)
        doc = reporting.to_json(o, opts)
        self.assertIsNone(doc['loopback'])
        k = doc['kcidb']
        assert isinstance(k, dict)
        kcidb_schema.validate(k)
        self.assertFalse([t for t in k['tests'] if t['path'].startswith('lo_counters')])
        self.assertFalse([b for b in k['builds'] if 'guest' in b['id']])

    def test_counted_figures_judge_and_the_timed_are_shown(self) -> None:
        """With counted figures the verdict is theirs, even where the timed moved."""
        timed = timed_diffs(5, 0.9)
        self.assertIn('regression in', tables.verdict(timed))
        counts = {'insns_pkt_single': 7000.0, 'insns_pkt_all': 9000.0,
                  'fsharing_pkt_all': 3.0, 'fcontended_pkt_all': 1.0}
        same: list[dict[str, object]] = [
            {'counted': dict(counts, insns_pkt_single=7000.0 + i)} for i in range(3)]
        counted = metrics.compare(same, same, 0.05, kind='counted')
        v = tables.verdict(timed + counted)
        # the same boots on both sides: identical pairs, no change, exactly (issue 48)
        self.assertTrue(v.startswith('no change in counts: each counted boot'), v)
        self.assertIn('the timed figures (wall-clock under emulation) are shown, not judged',
                      v)


class SkippedLoopback(unittest.TestCase):
    def test_a_patch_the_guest_does_not_build_is_reported_as_not_run(self) -> None:
        """Issue 37, item 6: the mail, review.json and KCIDB say why, in one line."""
        base = Tree(Path('/t/linux-6.12/src'), debian_tree('6.12').version, 'debian')
        why = ('the patch changes no file the x86_64 guest builds from: kbuild\'s record '
               'of its 3591 sources and headers names none of drivers/irqchip/irq-gic-v3-its.c')
        o = review.ReviewOutcome(base, base, patch_input.load(NOOP), bench_skipped=why,
                                 kunit_totals={'base': {'PASS': 3}, 'patched': {'PASS': 3}})
        opts = review.ReviewOptions(('arm64_2n_its1',), 'x86_64_2n', 10, 1.0, 0.05, 60, 2,
                                    Path('/nonexistent'), bench=False)
        text = reporting.render(o, opts)
        self.assertIn('Loopback benchmark: not run: the patch changes no file', text)
        self.assertNotIn('BENCH=0', text)
        doc = reporting.to_json(o, opts)
        self.assertEqual(doc['loopback'], {'skipped': why})
        k = doc['kcidb']
        assert isinstance(k, dict)
        kcidb_schema.validate(k)


class SeriesHash(unittest.TestCase):
    def test_a_copy_of_the_package_elsewhere_hashes_the_same(self) -> None:
        """The review key's series hash is of the package's files, not of where it sits:
        a copy (a worktree, another checkout) resumes the same reviews."""
        code = 'from kloc.review.patched import series_hash; print(series_hash())'
        here = subprocess.run([sys.executable, '-c', code], cwd=PACKAGE_ROOT / 'tools',
                              capture_output=True, text=True, check=True).stdout
        with tempfile.TemporaryDirectory() as d:
            tar = subprocess.run(['tar', '-C', str(PACKAGE_ROOT), '--exclude=./out',
                                  '--exclude=./.git', '-cf', '-', '.'],
                                 capture_output=True, check=True).stdout
            subprocess.run(['tar', '-C', d, '-xf', '-'], input=tar, check=True)
            there = subprocess.run([sys.executable, '-c', code], cwd=Path(d) / 'tools',
                                   capture_output=True, text=True, check=True).stdout
        self.assertEqual(here, there)


def noop_review(tmp: Path, counted: list[metrics.Difference],
                timed: bool) -> tuple[review.ReviewOutcome, review.ReviewOptions]:
    """noop.patch's review, loopback only: 3 counted boots a side (counted), with
    timed runs (timed_diffs, 7 a side) or none."""
    base = Tree(Path('/t/linux-6.12/src'), debian_tree('6.12').version, 'debian')
    store = open_store(tmp / 'counted.jsonl', {'test': 'noop'})
    o = review.ReviewOutcome(base, base, patch_input.load(NOOP),
                             diffs=timed_diffs(3, 1.0) if timed else [],
                             counted=counted_runs.CountedResult(
                                 3, counted, store, {'base': 'T1', 'patched': 'T2'}))
    opts = review.ReviewOptions(('arm64_2n_its1',), 'x86_64_2n', 7, 1.0, 0.05, 60, 2, tmp,
                                kunit=False, counted=3, timed=timed)
    return o, opts


class MailOrder(unittest.TestCase):
    """Issue 37, item 5: the mail leads with the verdict and the figures that carry it,
    then KUnit's status changes, then (where a cache figure moved) the contended
    lines; the QEMU command line and the tables come after, as details."""

    def test_the_2008_layout_leads_with_false_sharing(self) -> None:
        counted, doc = review_2008()
        base = Tree(Path('/t/linux-7.2/src'), debian_tree('6.12').version, 'debian')
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(Path(tmp) / 'counted.jsonl', {'test': '2008'})
            o = review.ReviewOutcome(
                base, base, patch_input.load(NOOP), diffs=timed_diffs(3, 1.0),
                kunit_changes=[review.StatusChange('arm64_2n_its1', 'a.b.c', 'PASS', 'FAIL')],
                kunit_totals={'base': {'PASS': 3}, 'patched': {'PASS': 2, 'FAIL': 1}},
                qemu_command=['qemu-system-x86_64', '-machine', 'pc'],
                counted=counted_runs.CountedResult(5, counted, store,
                                                   doc['contended_lines']))
            opts = review.ReviewOptions(('arm64_2n_its1',), 'x86_64_2n', 10, 1.0, 0.05, 60,
                                        2, Path(tmp), counted=5)
            text = reporting.render(o, opts)
        lines = text.splitlines()
        at = {what: next(i for i, line in enumerate(lines) if line.startswith(what))
              for what in ('Verdict: regression', '  false-shared accesses',
                           'KUnit status changes (1)', 'Most contended cache lines',
                           'patched:', 'Details', '  $ qemu-system-x86_64',
                           'Counted figures')}
        self.assertLess(at['Verdict: regression'], 8, text)
        order = sorted(at, key=at.__getitem__)
        self.assertEqual(order, list(at), text)
        self.assertIn('loopback_xmit', '\n'.join(lines[at['patched:']:at['Details']]))
        # the contended lines are shown once
        self.assertEqual(text.count('Most contended cache lines'), 1, text)
        self.assertTrue(all(len(line) <= reporting.WIDTH for line in lines), text)

    def test_no_cache_figure_moved_no_lines_up_front(self) -> None:
        counted = metrics.compare(NOOP_A, NOOP_B, 0.05, kind='counted')
        with tempfile.TemporaryDirectory() as tmp:
            text = reporting.render(*noop_review(Path(tmp), counted, timed=True))
        lines = text.splitlines()
        verdict = next(i for i, line in enumerate(lines) if line.startswith('Verdict: '))
        details = lines.index('Details')
        # every judged (counted, primary) figure under the verdict, none moved
        lead = '\n'.join(lines[verdict:details])
        for d in counted:
            if d.figure.primary:
                self.assertIn(f'  {d.figure.short[:23]} ', lead)
        self.assertTrue(all(len(line) <= reporting.WIDTH for line in lines), text)
        self.assertLess(details, text.splitlines().index('Most contended cache lines, one '
                                                         'thread per CPU, last counted boot'))


class StoredBoots(unittest.TestCase):
    """The report says how many of the boots it compares came from the store of counted
    boots (bench/countstore.py), and none where none did."""

    def test_the_report_counts_the_reused_boots(self) -> None:
        counted = metrics.compare(NOOP_A, NOOP_B, 0.05, kind='counted')
        with tempfile.TemporaryDirectory() as tmp:
            o, opts = noop_review(Path(tmp), counted, timed=False)
            assert o.counted is not None
            self.assertNotIn('counted before', reporting.render(o, opts))
            for side, seed, stored in (('a', 0, True), ('a', 1, True), ('a', 2, True),
                                       ('b', 0, False), ('b', 1, True), ('b', 2, False),
                                       ('b', 3, True)):      # seed 3: not compared
                record: dict[str, object] = {'seed': seed}
                if stored:
                    record['stored'] = 'd' * 64
                o.counted.store.append(BenchRun(side, True, 1.0, record))
            text = reporting.render(o, opts)
        self.assertIn('Counted figures: 3 boots a side under the QEMU plugin\n  4 of the 6 '
                      'were counted before, with the same bytes loaded: reused', text)
        self.assertTrue(all(len(line) <= reporting.WIDTH for line in text.splitlines()))


class NoTimedRuns(unittest.TestCase):
    """Issue 48, item 3: timed runs are not judged where counted boots are, so a review
    boots them only where asked (TIMED=1), where no counted boots are, or for a lab."""

    def test_when_a_review_times(self) -> None:
        lab: interleave.Runner = lambda plan: interleave.run(plan)   # noqa: E731
        self.assertFalse(workflow.timed_runs(False, 5, interleave.run))
        self.assertTrue(workflow.timed_runs(True, 5, interleave.run))
        self.assertTrue(workflow.timed_runs(False, 0, interleave.run))
        self.assertTrue(workflow.timed_runs(False, 5, lab))

    def test_the_report_says_none_were_booted(self) -> None:
        counted = metrics.compare(NOOP_A, NOOP_B, 0.05, kind='counted')
        with tempfile.TemporaryDirectory() as tmp:
            o, opts = noop_review(Path(tmp), counted, timed=False)
            text = reporting.render(o, opts)
            doc = reporting.to_json(o, opts)
        self.assertIn('Verdict: no significant difference in counts, KUnit not run.', text)
        self.assertNotIn('shown, not judged', text)
        self.assertIn('  timed runs: none (the counted boots judge', text)
        self.assertNotIn('Mann-Whitney', text)
        self.assertTrue(all(len(line) <= reporting.WIDTH for line in text.splitlines()))
        loop = doc['loopback']
        assert isinstance(loop, dict)
        self.assertEqual((loop['runs_per_side'], loop['figures']), (0, []))
        self.assertTrue(str(loop['timed']).startswith('not run: '))
        page = pages_html.render_review(doc, None)
        self.assertIn('id="loopback-untimed"', page)
        self.assertNotIn('Timed: 0 runs', page)


class HonestVerdicts(unittest.TestCase):
    """Issue 25, item 4: the review's verdict needs significance and a change of interest,
    and a comment-only patch is no change, not a request for more runs."""

    def test_a_comment_only_patch_is_no_change(self) -> None:
        counted = metrics.compare(NOOP_A, NOOP_B, 0.05, kind='counted')
        v = reporting.overall(timed_diffs(7, 1.0) + counted, 0)
        self.assertEqual(v, 'no significant difference in counts, the timed figures '
                            '(wall-clock under emulation) are shown, not judged, '
                            '0 KUnit status changes')
        self.assertNotIn('give more', v)

    def test_near_zero_counts_are_shown_in_their_unit(self) -> None:
        """The plot and the KCIDB change test give a count near zero's change in events
        a packet: a percent of a near-zero base (or a NaN) says nothing."""
        counted = metrics.compare(NOOP_A, NOOP_B, 0.05, kind='counted')
        near = [d for d in counted if d.absolute is not None]
        self.assertTrue(near)
        svg = plot.render(counted, 'base', 'patched', 'noop')
        self.assertNotIn('nan', svg)
        under = re.findall(r'>([^<]* p=[^<]*)<', svg)      # the line under each title
        self.assertEqual(len(under), len(counted))
        self.assertTrue(all(len(t) <= plot.SUBTITLE_CHARS for t in under), under)
        for d in near:
            self.assertIn(f'{d.absolute.change:+.2g}/packet, ' if d.absolute else '', svg)
        base = Tree(Path('/t/linux-6.12/src'), debian_tree('6.12').version, 'debian')
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(Path(tmp) / 'counted.jsonl', {'test': 'near zero'})
            o = review.ReviewOutcome(base, base, patch_input.load(NOOP),
                                     diffs=timed_diffs(3, 1.0),
                                     counted=counted_runs.CountedResult(3, counted, store, {}))
            opts = review.ReviewOptions(('arm64_2n_its1',), 'x86_64_2n', 7, 1.0, 0.05, 60, 2,
                                        Path(tmp), kunit=False, counted=3)
            k = reporting.to_json(o, opts)['kcidb']
        assert isinstance(k, dict)
        tests = {t['path']: t for t in k['tests']}
        for d in near:
            number = tests[f'lo_counters.counted.{d.figure.name}.change']['number']
            self.assertEqual(number['unit'], d.figure.unit)
            self.assertAlmostEqual(number['value'], d.absolute.change if d.absolute else 0)

    def test_a_small_significant_change_passes(self) -> None:
        """1% fewer packets/s, measured to 0.1%: significant, but under the 3.6% of
        interest; not a regression, and KCIDB's change test passes."""
        rng = random.Random(11)

        def rec(k: float) -> dict[str, object]:
            p1, pn = 8e4 * k * rng.gauss(1, 0.001), 1.4e5 * k * rng.gauss(1, 0.001)
            return {'pps_single': p1, 'pps_total': pn, 'scaling_efficiency': pn / (4 * p1)}
        diffs = metrics.compare([rec(1) for _ in range(10)], [rec(0.99) for _ in range(10)],
                                0.05)
        by = {d.figure.name: d for d in diffs}
        self.assertLess(by['pps_single'].p_adjusted, 0.05)
        self.assertAlmostEqual(by['pps_single'].change_pct, -1.0, delta=0.2)
        self.assertEqual(by['pps_single'].verdict, 'small')
        self.assertEqual(reporting.overall(diffs, 0),
                         'no change of interest in loopback throughput, significant but below '
                         'the change of interest in 2 of 3 timed figures (1 thread, all CPUs), '
                         '0 KUnit status changes')
        base = Tree(Path('/t/linux-6.12/src'), debian_tree('6.12').version, 'debian')
        o = review.ReviewOutcome(base, base, patch_input.load(NOOP), diffs=diffs)
        opts = review.ReviewOptions(('arm64_2n_its1',), 'x86_64_2n', 10, 1.0, 0.05, 60, 2,
                                    Path('/nonexistent'), kunit=False)
        text = reporting.render(o, opts)
        self.assertIn('  verdict     patched lower than base (significant at alpha = 0.05), but\n'
                      '              below the change of interest, 3.6%\n', text)
        self.assertIn('Verdict: no change of interest in loopback throughput, significant but\n'
                      '  below the change of interest', text)
        k = reporting.to_json(o, opts)['kcidb']
        assert isinstance(k, dict)
        change = [t for t in k['tests'] if t['path'] == 'lo_counters.pps_single.change'][0]
        self.assertEqual(change['status'], 'PASS')
        self.assertEqual(change['misc']['verdict'], 'small')


class DiskFull(unittest.TestCase):
    """A real ENOSPC, on a 1 MiB tmpfs (needs root to mount)."""

    def test_build_log_and_space_check(self) -> None:
        if os.geteuid() != 0:
            self.skipTest('mounting a tmpfs needs root')
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'kloc-test', d],
                               capture_output=True, text=True)
            if r.returncode:
                self.skipTest(f'cannot mount a tmpfs here: {r.stderr.strip()}')
            try:
                log = Path(d) / 'build.log'
                rc = procs.run_logged(['dd', 'if=/dev/zero', f'of={d}/big', 'bs=64k',
                                       'count=64'], log, 'filling')
                self.assertNotEqual(rc, 0)
                self.assertIn('the disk filled during the build', procs.disk_full_hint(log))
                with self.assertRaisesRegex(guest.GuestError, 'GiB free; kernel builds need'):
                    guest.check_space(Path(d))
            finally:
                subprocess.run(['umount', d], check=True)


if __name__ == '__main__':
    unittest.main()
