# SPDX-License-Identifier: GPL-2.0
"""A build is reused only when nothing it was made from changed, and the mutants'
variant build dirs rebuild exactly what differs for them: checked with real make."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

from kloc.mutants import mutants
from kloc.trees import buildstamp

MAKEFILE = '$(O)/x.out: x.src\n\tcp x.src $(O)/x.out\n'


def make(src: Path, build_dir: Path, *flags: str) -> int:
    return subprocess.run(['make', '-s', '-C', str(src), f'O={build_dir}', *flags,
                           f'{build_dir}/x.out'], capture_output=True).returncode


class BuildStampTest(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        self.src, self.bdir = self.root / 'src', self.root / 'build'
        (self.src / 'sub').mkdir(parents=True)
        (self.src / 'sub' / 'a.c').write_text('int a;\n')
        self.bdir.mkdir()
        self.image = self.bdir / 'Image'
        self.image.write_text('image')
        (self.bdir / '.config').write_text('CONFIG_NUMA=y\n')

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def recorded(self) -> str:
        digest = buildstamp.tree_digest(self.src)
        buildstamp.record(self.bdir, digest, ['make', 'gcc 12'], self.image)
        return digest

    def test_nothing_changed_is_reused(self) -> None:
        digest = buildstamp.tree_digest(self.src)
        self.assertFalse(buildstamp.unchanged(self.bdir, digest, ['make'], self.image))
        self.recorded()
        self.assertTrue(buildstamp.unchanged(self.bdir, buildstamp.tree_digest(self.src),
                                             ['make', 'gcc 12'], self.image))

    def test_each_input_that_changes_rebuilds(self) -> None:
        digest = self.recorded()
        inputs = ['make', 'gcc 12']
        self.assertFalse(buildstamp.unchanged(self.bdir, digest, ['make', 'gcc 13'],
                                              self.image), 'the compiler')
        a = self.src / 'sub' / 'a.c'
        st = a.stat()
        os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
        self.assertFalse(buildstamp.unchanged(self.bdir, buildstamp.tree_digest(self.src),
                                              inputs, self.image), 'a source file touched')
        digest = self.recorded()
        (self.src / 'new.h').write_text('')
        self.assertFalse(buildstamp.unchanged(self.bdir, buildstamp.tree_digest(self.src),
                                              inputs, self.image), 'a new source file')
        digest = self.recorded()
        (self.bdir / '.config').write_text('CONFIG_NUMA=n\n')
        self.assertFalse(buildstamp.unchanged(self.bdir, digest, inputs, self.image),
                         'the .config edited')
        digest = self.recorded()
        time.sleep(0.01)
        self.image.write_text('image')
        self.assertFalse(buildstamp.unchanged(self.bdir, digest, inputs, self.image),
                         'the image rebuilt by another command')
        digest = self.recorded()
        buildstamp.begin(self.bdir)
        self.assertFalse(buildstamp.unchanged(self.bdir, digest, inputs, self.image),
                         'a build started and not finished')

    def test_a_killed_builds_cmd_files_go_before_the_next(self) -> None:
        # kbuild writes .cmd files in place: a build killed mid-write leaves one cut
        # short, and the next make stops on it (the KDIR proof met it)
        old = self.bdir / 'kernel' / '.fork.o.cmd'
        old.parent.mkdir(parents=True)
        old.write_text('savedcmd_kernel/fork.o := gcc ...\n')
        os.utime(old, (1000, 1000))
        buildstamp.begin(self.bdir)                     # the build that gets killed
        cut = self.bdir / 'arch' / '.cpu_errata.o.cmd'
        cut.parent.mkdir(parents=True)
        cut.write_text('deps_arch/cpu_errata.o := $(wildcard include/con')
        buildstamp.begin(self.bdir)                     # the next build
        self.assertFalse(cut.exists(), 'a .cmd file the killed build wrote was kept')
        self.assertTrue(old.exists(), 'a .cmd file of the finished build before it went')
        buildstamp.record(self.bdir, 'tree', [], self.image)
        buildstamp.begin(self.bdir)                     # after a finished build
        self.assertTrue(old.exists())

    def test_git_objects_are_not_the_tree(self) -> None:
        digest = buildstamp.tree_digest(self.src)
        (self.src / '.git' / 'objects').mkdir(parents=True)
        (self.src / '.git' / 'objects' / 'pack').write_text('')
        self.assertEqual(digest, buildstamp.tree_digest(self.src, leave_out=()))
        (self.src / '.git' / 'HEAD').write_text('ref: refs/heads/main\n')
        self.assertNotEqual(digest, buildstamp.tree_digest(self.src))


class VariantTest(unittest.TestCase):
    """make itself says what is up to date in each variant's build dir."""

    def setUp(self) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        self.src = root / 'src'
        self.src.mkdir()
        (self.src / 'Makefile').write_text(MAKEFILE)
        (self.src / 'x.src').write_text('stock\n')
        self.canon = root / 'build'
        self.base = buildstamp.tree_digest(self.src, leave_out=['x.src'])

    def tearDown(self) -> None:
        self.tmp.cleanup()

    def switch(self, variant: str, data: bytes) -> tuple[Path, str]:
        mutants.occupy(self.canon, variant)
        return self.canon, mutants.write_variant(self.src, {'x.src': data}, self.canon,
                                                 self.base)

    def test_each_variant_rebuilds_what_differs_for_it_and_no_more(self) -> None:
        p, stock1 = self.switch('', b'stock\n')
        self.assertEqual(make(self.src, p), 0)
        a, mut1 = self.switch('numa-unaware', b'mutant\n')
        self.assertEqual(make(self.src, a, '-q'), 1, 'the seeded copy of the stock '
                         'object must not pass for the mutant\'s')
        self.assertEqual(make(self.src, a), 0)
        self.assertEqual((a / 'x.out').read_text(), 'mutant\n')

        p, stock2 = self.switch('', b'stock\n')
        self.assertEqual(make(self.src, p, '-q'), 0, 'back to the stock: nothing to do')
        self.assertEqual((p / 'x.out').read_text(), 'stock\n')
        self.assertEqual(stock1, stock2)
        a, mut2 = self.switch('numa-unaware', b'mutant\n')
        self.assertEqual(make(self.src, a, '-q'), 0, 'the mutant again: nothing to do')
        self.assertEqual(mut1, mut2)
        self.assertNotEqual(stock1, mut1)

        a, mut3 = self.switch('numa-unaware', b'mutant, edited\n')
        self.assertEqual(make(self.src, a, '-q'), 1, 'an edited mutant rebuilds')
        self.assertNotEqual(mut1, mut3)

    def test_the_copy_written_is_a_new_inode(self) -> None:
        shared = self.src / 'x.src'
        link = self.src.parent / 'original'
        os.link(shared, link)
        self.switch('', b'mutant\n')
        self.assertEqual(link.read_text(), 'stock\n', 'the original is never written')

    def test_a_record_not_kloc_wrote_reads_as_empty(self) -> None:
        p, _ = self.switch('', b'stock\n')
        (p / mutants.SOURCES).write_text('{"x.src": "not a pair"}')
        before = time.time_ns()
        self.switch('', b'stock\n')
        self.assertGreaterEqual((self.src / 'x.src').stat().st_mtime_ns, before)

    def test_mutants_gone_from_the_package_lose_their_build_dirs(self) -> None:
        self.switch('', b'stock\n')
        self.switch('kept', b'a\n')
        self.switch('gone', b'b\n')
        self.switch('', b'stock\n')
        mutants.prune(self.canon, {'kept'})
        self.assertTrue(mutants.stored(self.canon, 'kept').is_dir())
        self.assertFalse(mutants.stored(self.canon, 'gone').exists())
        self.assertEqual((self.canon / mutants.WHOSE).read_text(), 'unmutated\n')

    def test_each_variant_builds_at_the_one_path(self) -> None:
        """The build records absolute paths (objtool's dependencies on x86): every
        variant builds at the same path, and its own dir comes back there."""
        p, _ = self.switch('', b'stock\n')
        self.assertEqual(make(self.src, p), 0)
        a, _ = self.switch('lossy', b'mutant\n')
        self.assertEqual(a, p)
        self.assertEqual(make(self.src, a), 0)
        self.assertEqual((a / 'x.out').read_text(), 'mutant\n')
        p, _ = self.switch('', b'stock\n')
        self.assertEqual((p / 'x.out').read_text(), 'stock\n', 'the unmutated dir is back')
        self.assertEqual((mutants.stored(self.canon, 'lossy') / 'x.out').read_text(),
                         'mutant\n', 'the mutant\'s waits beside it')

    def test_a_build_dir_of_no_variant_is_not_taken_for_one(self) -> None:
        self.canon.mkdir()
        (self.canon / mutants.WHOSE).write_text('../../elsewhere\n')
        self.switch('lossy', b'mutant\n')
        self.assertFalse((self.canon.parent.parent / 'elsewhere').exists())
        self.assertEqual((self.canon / mutants.WHOSE).read_text(), 'lossy\n')


if __name__ == '__main__':
    unittest.main()
