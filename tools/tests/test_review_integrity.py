# SPDX-License-Identifier: GPL-2.0
"""make review refuses a patch that changes what judges it (review/integrity.py).

A patch that rewrites the package's suites, its hooks' own lines, the
selftest or KUnit itself is refused before anything is built or written,
naming the files, unless REVIEW_PACKAGE=1; then the report, review.json and
the KCIDB record say so first. A patch to the hooked driver's own code is
what review is for, and passes. All on a small copy of the 6.12 tree,
without the package and with it installed; nothing is built.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from kloc.kcidb import schema as kcidb_schema
from kloc.review import integrity, kcidb, patch_input, reporting, review
from kloc.review.errors import ReviewError
from kloc.series import changes, planning
from kloc.series.state import STATE_DIR
from kloc.series.patching import HunkError
from kloc.trees.sources import Tree

from .helpers import carry
from .test_review import TREE_FILES, diff, pristine_mini_tree

TOOLS = Path(__file__).resolve().parents[1]
DRIVER = 'drivers/irqchip/irq-gic-v3-its.c'
SUITE = 'mm/tests/percpu_locality_kunit.c'
SUITE_INCLUDE = '#include "tests/irq-gic-v3-its_kunit.c"'


class Refusals(unittest.TestCase):
    """On a KDIR tree without the package: the patch applies to the installed state."""
    installed = False

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)
        self.base = pristine_mini_tree(self.dir / 'linux')
        self.series = changes.load_series()
        if self.installed:
            carry(self.base.path, self.base.version)
        plan = planning.plan(self.base.path, self.base.version, self.series)
        self.final = plan.final
        self.cache = self.dir / 'cache'
        self.opts = review.ReviewOptions(('arm64_2n_its1',), 'x86_64_2n', 2, 1.0, 0.05, 60, 1,
                                         self.dir / 'out')

    def snapshot(self) -> dict[str, str]:
        out = {}
        for dirpath, dirs, names in os.walk(self.base.path):
            for n in names + dirs:
                p = Path(dirpath) / n
                out[str(p.relative_to(self.base.path))] = \
                    hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else 'dir'
        return out

    def patch(self, text: str, name: str = 'x.patch') -> patch_input.PatchInfo:
        p = self.dir / name
        p.write_text(text)
        return patch_input.load(p)

    def edit(self, rel: str, old: str, new: str, count: int = 1) -> patch_input.PatchInfo:
        data = self.final[rel]
        assert data is not None
        text = data.decode()
        self.assertIn(old, text)
        return self.patch(diff(rel, data, text.replace(old, new, count)))

    def refused(self, p: patch_input.PatchInfo, *names: str) -> str:
        before = self.snapshot()
        with self.assertRaises(ReviewError) as c:
            review.check(self.base, p)
        msg = str(c.exception)
        self.assertNotIn('\n', msg)
        for n in names:
            self.assertIn(n, msg)
        self.assertIn(integrity.OPT_IN, msg)
        with self.assertRaises(ReviewError):        # review.run checks first
            review.run(self.base, p, self.opts, self.cache)
        self.assertEqual(self.snapshot(), before, 'the tree was written')
        self.assertFalse(self.cache.exists())
        self.assertFalse(self.opts.out.exists())
        return msg

    def test_a_patch_that_voids_the_percpu_suite_is_refused(self) -> None:
        data = self.final[SUITE]
        assert data is not None
        voided = re.sub(r'\bKUNIT_EXPECT_\w+\(', '(void)(', data.decode())
        self.assertNotEqual(voided, data.decode())
        self.refused(self.patch(diff(SUITE, data, voided)), SUITE, 'the package\'s')

    def test_renaming_the_hooked_driver_is_refused(self) -> None:
        p = self.patch(f'diff --git a/{DRIVER} b/drivers/irqchip/irq-gic-v3-its-new.c\n'
                       'similarity index 100%\n'
                       f'rename from {DRIVER}\n'
                       'rename to drivers/irqchip/irq-gic-v3-its-new.c\n')
        self.refused(p, DRIVER, 'deletes or renames it')

    def test_the_suites_include_line_is_the_packages(self) -> None:
        msg = self.refused(self.edit(DRIVER, SUITE_INCLUDE + '\n', ''), DRIVER)
        self.assertRegex(msg, r"the package's line \d+")
        self.refused(self.edit(DRIVER, SUITE_INCLUDE, '#include "tests/other.c"'), DRIVER)

    def test_the_seam_and_its_header_are_the_packages(self) -> None:
        whole, hooked = integrity.package_files(self.base.version, self.series)
        seam = [rel for rel in whole if rel.endswith('_seam.h')]
        for rel in seam:     # the seam as a header: changing its include line or it
            line = f'#include "tests/{Path(rel).name}"'
            self.refused(self.edit(DRIVER, line + '\n', ''), DRIVER)
            data = self.final[rel]
            assert data is not None
            self.refused(self.patch(diff(rel, data, data.decode() + '/* x */\n')), rel)
        self.assertIn(DRIVER, hooked)

    def test_the_packages_kconfig_entry_is_refused_the_rest_is_not(self) -> None:
        self.refused(self.edit('mm/Kconfig', '\tdepends on KUNIT=y\n',
                               '\tdepends on KUNIT=y && BROKEN\n'), 'mm/Kconfig')
        ok = self.edit('mm/Kconfig', 'This feature collects and exposes statistics via debugfs.',
                       'This feature collects statistics and exposes them via debugfs.')
        self.assertEqual(review.check(self.base, ok).package, ())

    def test_the_selftest_marker_and_its_hook_are_refused(self) -> None:
        marker = 'tools/testing/selftests/lo_counters/kloc-marker.h'
        data = self.final[marker]
        assert data is not None
        self.refused(self.patch(diff(marker, data, data.decode().replace('#define', '#undef',
                                                                         1))), marker)
        self.refused(self.edit('tools/testing/selftests/Makefile', 'TARGETS += lo_counters\n',
                               ''), 'tools/testing/selftests/Makefile')

    def test_kunit_itself_is_refused(self) -> None:
        rel = 'tools/testing/kunit/kunit.py'
        data = (self.base.path / rel).read_bytes()
        self.refused(self.patch(diff(rel, data, data.decode() + '# x\n')), rel, 'KUnit itself')

    def test_a_patch_to_the_drivers_own_code_passes(self) -> None:
        ok = self.edit(DRIVER, 'pr_err_ratelimited("Unable to get SGI status\\n");',
                       'pr_err_ratelimited("Unable to read the SGI status\\n");')
        self.assertEqual(review.check(self.base, ok).package, ())
        # the driver's allocation code, wherever the package has no line of its own
        data = self.final[DRIVER]
        assert data is not None
        _, hooked = integrity.package_files(self.base.version, self.series)
        mine = integrity.package_lines(DRIVER, data, self.base.version, self.series,
                                       hooked[DRIVER])
        lines = data.decode().splitlines(keepends=True)
        alloc = [i for i, line in enumerate(lines) if 'GFP_KERNEL | __GFP_ZERO' in line
                 and i not in mine]
        self.assertTrue(alloc)
        lines[alloc[0]] = lines[alloc[0]].replace('GFP_KERNEL | __GFP_ZERO', 'GFP_KERNEL')
        ok = self.patch(diff(DRIVER, data, ''.join(lines)), 'alloc.patch')
        self.assertEqual(review.check(self.base, ok).package, ())
        # a patch made against the installed driver (the package's line in its
        # context) is not a patch as posted: it does not apply to the stock driver
        made_on_installed = self.edit(DRIVER, SUITE_INCLUDE + '\n',
                                      SUITE_INCLUDE + '\n/* more */\n')
        with self.assertRaisesRegex(HunkError, 'made against a tree with the package installed'):
            review.check(self.base, made_on_installed)

    def test_opted_in_the_report_json_and_kcidb_say_so_first(self) -> None:
        data = self.final[SUITE]
        assert data is not None
        p = self.patch(diff(SUITE, data, data.decode().replace('KUNIT_EXPECT_', '(void)', 1)))
        checked = review.check(self.base, p, review_package=True)
        self.assertEqual([t.path for t in checked.package], [SUITE])
        tree = Tree(self.dir / 'patched', self.base.version, 'review')
        o = review.ReviewOutcome(self.base, tree, p, package=checked.package)
        opts = review.ReviewOptions(('arm64_2n_its1',), 'x86_64_2n', 2, 1.0, 0.05, 60, 1,
                                    self.dir / 'out', review_package=True)
        text = reporting.render(o, opts)
        lines = text.splitlines()
        self.assertIn('REVIEW_PACKAGE=1', lines[0])
        self.assertTrue(lines[2].startswith('Patch: '), 'the patch subject stays third')
        self.assertIn(SUITE, '\n'.join(lines[:8]))
        self.assertTrue(all(len(line) <= reporting.WIDTH for line in lines), text)
        doc = reporting.to_json(o, opts)
        first = next(iter(doc))
        self.assertEqual(first, 'review_package')
        notice = doc[first]
        assert isinstance(notice, dict)
        self.assertIn('REVIEW_PACKAGE=1', notice['warning'])
        self.assertEqual([c['file'] for c in notice['changed']], [SUITE])
        k = doc['kcidb']
        assert isinstance(k, dict)
        kcidb_schema.validate(k)
        patched = k['checkouts'][-1]
        self.assertTrue(patched['comment'].startswith(kcidb.PACKAGE_WARNING))
        self.assertEqual(next(iter(patched['misc'])), 'review_package')
        json.dumps(doc)
        # not opted in: none of it
        plain = review.ReviewOutcome(self.base, tree, p)
        self.assertEqual(reporting.render(plain, self.opts).splitlines()[0], 'kloc review')
        self.assertIsNone(reporting.to_json(plain, self.opts)['review_package'])


class RefusalsInstalled(Refusals):
    """The same on a tree that carries the package."""
    installed = True


class CommandLine(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)

    def kloc(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, '-m', 'kloc', *args], cwd=TOOLS,
                              capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=str(TOOLS),
                                       KLOC_CACHE=str(self.dir / 'cache')))

    def test_refused_in_one_line_before_anything(self) -> None:
        base = pristine_mini_tree(self.dir / 'linux')
        final = planning.plan(base.path, base.version, changes.load_series()).final[SUITE]
        assert final is not None
        p = self.dir / 'void.patch'
        p.write_text(diff(SUITE, final, final.decode().replace('KUNIT_EXPECT_', '(void)')))
        out = self.dir / 'out'
        r = self.kloc('review', '--patch', str(p), '--kdir', str(base.path),
                      '--out', str(out))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertNotIn('Traceback', r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if not ln.startswith('[kloc ')]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn(SUITE, lines[0])
        self.assertIn('REVIEW_PACKAGE=1', lines[0])
        self.assertFalse(out.exists())
        # kloc's copy of the tree is made (trees/workcopy.py); no patched copy, no build
        self.assertEqual(sorted(p.name for p in (self.dir / 'cache' / 'kdir').glob('*/*')),
                         ['src', 'src.lock'])
        self.assertFalse((self.dir / 'cache' / 'review').exists())
        self.assertFalse((base.path / STATE_DIR).exists())
        self.assertEqual(sorted({'Makefile', *TREE_FILES}), sorted(
            str(f.relative_to(base.path)) for f in base.path.rglob('*') if f.is_file()))

    def test_the_opt_in_is_a_strict_boolean(self) -> None:
        for value in ('no', 'yes', 'true', '2'):
            with self.subTest(value=value):
                r = self.kloc('review', '--aa', '--review-package', value)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(f'REVIEW_PACKAGE={value} is not 0 or 1', r.stderr)
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)


if __name__ == '__main__':
    unittest.main()
