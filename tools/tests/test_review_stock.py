# SPDX-License-Identifier: GPL-2.0
"""make review applies a patch as posted: to the stock files, then the package on top.

A patch to the ITS driver is made against the stock tree, as it would be
posted to the list. review.check() applies it to the stock driver (the
tree's saved original where the package is installed), then installs the
package's series on the result: the patched tree carries the patch and
the package's two lines. A patch that changes the lines the package puts
its own next to is refused naming the package's change and the line; one
made against the installed driver does not apply to the stock file, and
says so. All on a small copy of the 6.12 tree, without the package and
with it installed; nothing is built.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import unittest
from pathlib import Path

from kloc.review import patch_input, review
from kloc.review.errors import ReviewError
from kloc.review.patched import patched_tree
from kloc.series import changes, planning
from kloc.series.patching import HunkError

from .helpers import carry
from .test_review import diff, pristine_mini_tree

DRIVER = 'drivers/irqchip/irq-gic-v3-its.c'
SEAM_INCLUDE = '#include "tests/irq-gic-v3-its_kunit_seam.h"'
SUITE_INCLUDE = '#include "tests/irq-gic-v3-its_kunit.c"'
ALLOC = 'alloc_pages_node(its->numa_node, GFP_KERNEL | __GFP_ZERO, order)'
NO_NODE = 'alloc_pages_node(NUMA_NO_NODE, GFP_KERNEL | __GFP_ZERO, order)'
LAST_INCLUDE = '#include "irq-msi-lib.h"\n'       # the 6.12 driver's; the seam goes after it


class AsPosted(unittest.TestCase):
    """On a KDIR tree without the package."""
    installed = False

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = Path(tmp.name)
        self.base = pristine_mini_tree(self.dir / 'linux')
        self.series = changes.load_series()
        self.stock = (self.base.path / DRIVER).read_bytes()
        self.assertNotIn(SEAM_INCLUDE.encode(), self.stock)
        if self.installed:
            carry(self.base.path, self.base.version)
        self.installed_driver = planning.plan(self.base.path, self.base.version,
                                              self.series).final[DRIVER]
        self.cache = self.dir / 'cache'

    def patch(self, text: str, name: str = 'x.patch') -> patch_input.PatchInfo:
        p = self.dir / name
        p.write_text(text)
        return patch_input.load(p)

    def on_stock(self, old: str, new: str, name: str = 'x.patch') -> patch_input.PatchInfo:
        text = self.stock.decode()
        self.assertEqual(text.count(old), 1, old)
        return self.patch(diff(DRIVER, self.stock, text.replace(old, new)), name)

    def snapshot(self) -> dict[str, str]:
        out = {}
        for dirpath, dirs, names in os.walk(self.base.path):
            for n in names + dirs:
                p = Path(dirpath) / n
                out[str(p.relative_to(self.base.path))] = \
                    hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else 'dir'
        return out

    def test_a_patch_to_the_allocation_code_applies_to_stock_and_the_package_on_top(
            self) -> None:
        p = self.on_stock(ALLOC, NO_NODE, 'numa-no-node.patch')
        before = self.snapshot()
        checked = review.check(self.base, p)
        self.assertEqual(self.snapshot(), before, 'the tree was written')
        self.assertEqual(checked.package, ())
        applied = checked.applied
        assert applied is not None
        self.assertEqual(applied.found[DRIVER], self.stock, 'not applied to the stock driver')
        out = (applied.contents[DRIVER] or b'').decode()
        self.assertIn(NO_NODE, out)
        self.assertNotIn(ALLOC, out)
        self.assertIn(SEAM_INCLUDE, out)
        self.assertIn(SUITE_INCLUDE, out)
        # exactly the stock driver, patched, with the series installed on top
        patched = self.stock.decode().replace(ALLOC, NO_NODE).encode()
        _, read = planning.pristine_reader(self.base.path, self.series)
        want = planning.plan_from(lambda rel: patched if rel == DRIVER else read(rel),
                                  self.base.path, self.base.version, self.series).final[DRIVER]
        self.assertEqual(applied.contents[DRIVER], want)
        carry(self.base.path, self.base.version)
        tree, reused = patched_tree(self.base, p, self.cache, applied)
        self.assertFalse(reused)
        self.assertEqual((tree.path / DRIVER).read_bytes(), want)
        self.assertEqual((self.base.path / DRIVER).read_bytes(), self.installed_driver)
        # made again from the installed tree alone (fixcheck's way): the same copy
        again, reused = patched_tree(self.base, p, self.cache)
        self.assertTrue(reused)
        self.assertEqual(again.path, tree.path)

    def test_a_change_where_the_package_puts_its_lines_is_refused_by_name(self) -> None:
        p = self.on_stock(LAST_INCLUDE, '#include "irq-msi-lib-v2.h"\n', 'last-include.patch')
        before = self.snapshot()
        with self.assertRaises(ReviewError) as c:
            review.check(self.base, p)
        msg = str(c.exception)
        self.assertEqual(self.snapshot(), before, 'the tree was written')
        self.assertNotIn('\n', msg)
        self.assertNotIn('does not apply', msg)
        self.assertNotIn('hunk #', msg)
        self.assertIn(f'PATCH=last-include.patch changes {DRIVER} around line 42, where the '
                      'package\'s change kunit/its/0001-seam (irqchip/gic-v3-its: Include a '
                      'KUnit seam header after the includes) adds its lines: the package '
                      'cannot be installed on top of it', msg)
        with self.assertRaisesRegex(ReviewError, 'kunit/its/0001-seam'):
            patched_tree(self.base, p, self.cache) if self.installed else \
                review.run(self.base, p, review.ReviewOptions(
                    ('arm64_2n_its1',), 'x86_64_2n', 2, 1.0, 0.05, 60, 1, self.dir / 'out'),
                    self.cache)
        self.assertEqual(self.snapshot(), before, 'the tree was written')
        self.assertFalse((self.cache / 'review').exists())

    def test_a_line_added_where_the_suite_goes_is_refused_by_name(self) -> None:
        """The driver's last lines: the suite's include goes after them (0002-kunit)."""
        text = self.stock.decode()
        self.assertTrue(text.endswith('\treturn 0;\n}\n'))
        p = self.patch(diff(DRIVER, self.stock, text + '\n/* the end */\n'), 'end.patch')
        after = text.count('\n') + 1       # where the suite's include goes: after the last
        with self.assertRaisesRegex(ReviewError, rf'^PATCH=end.patch changes {DRIVER} '
                                    rf'around line {after}, where the package\'s change '
                                    r'kunit/its/0002-kunit \(.*\) adds its lines: the package '
                                    'cannot be installed on top of it'):
            review.check(self.base, p)

    def test_a_patch_made_against_the_installed_driver_does_not_apply_to_stock(self) -> None:
        data = self.installed_driver
        assert data is not None
        text = data.decode()
        old = '#define ITS_FLAGS_CMDQ_NEEDS_FLUSHING\t\t(1ULL << 0)\n'
        self.assertIn(SEAM_INCLUDE + '\n\n' + old, text)     # the seam line is in its context
        p = self.patch(diff(DRIVER, data, text.replace(old, old.replace('0)', '7)'))),
                       'on-installed.patch')
        before = self.snapshot()
        with self.assertRaisesRegex(HunkError, rf'{DRIVER}: hunk #1 \(at line \d+\) does not '
                                    'apply.*to the stock files.*made against a tree with the '
                                    'package installed'):
            review.check(self.base, p)
        self.assertEqual(self.snapshot(), before, 'the tree was written')

    def test_a_patch_that_applies_nowhere_names_the_hunk_and_the_stock_file(self) -> None:
        text = self.stock.decode().replace(ALLOC, NO_NODE)
        p = self.patch(diff(DRIVER, self.stock, text).replace(' \tif (!page)\n',
                                                              ' \tif (page == NULL)\n', 1))
        with self.assertRaisesRegex(HunkError, rf'{DRIVER}: hunk #1 \(at line \d+\) does not '
                                    'apply.*to the stock files') as c:
            review.check(self.base, p)
        self.assertNotIn('made against a tree with the package installed', str(c.exception))


class AsPostedInstalled(AsPosted):
    """The same on a tree that carries the package (its stock files saved in .kloc/)."""
    installed = True

    def test_hand_edits_kept_in_the_base(self) -> None:
        """The base is the tree as it is; the patch applies to the edited driver with the
        package's lines taken out, and the package goes on top again."""
        drv = self.base.path / DRIVER
        old = 'pr_err_ratelimited("Unable to get SGI status\\n");'
        new = 'pr_err_ratelimited("Unable to read the SGI status\\n");'
        drv.write_text(drv.read_text().replace(old, new))
        self.assertEqual(planning.dirty_files(self.base.path), [DRIVER])
        p = self.on_stock(ALLOC, NO_NODE)
        checked = review.check(self.base, p)
        assert checked.applied is not None
        self.assertEqual(checked.applied.found[DRIVER],
                         self.stock.decode().replace(old, new).encode())
        out = (checked.applied.contents[DRIVER] or b'').decode()
        for want in (new, NO_NODE, SEAM_INCLUDE, SUITE_INCLUDE):
            self.assertIn(want, out)
        tree, _ = patched_tree(self.base, p, self.cache, checked.applied)
        self.assertEqual((tree.path / DRIVER).read_text(), out)
        self.assertIn(ALLOC, drv.read_text(), 'the base was written')

    def test_hand_edits_to_the_packages_lines_are_refused_in_one_line(self) -> None:
        drv = self.base.path / DRIVER
        drv.write_text(drv.read_text().replace(SEAM_INCLUDE, SEAM_INCLUDE + ' /* mine */'))
        p = self.on_stock(ALLOC, NO_NODE)
        with self.assertRaises(ReviewError) as c:
            review.check(self.base, p)
        msg = str(c.exception)
        self.assertNotIn('\n', msg)
        self.assertIn(f'{DRIVER}, which carries your uncommitted edits', msg)
        self.assertIn('git stash', msg)


if __name__ == '__main__':
    unittest.main()
