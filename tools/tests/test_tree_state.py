# SPDX-License-Identifier: GPL-2.0
"""A tree's .kloc/ state is untrusted input: it never leads kloc outside the tree.

Every path read from .kloc/manifest.json, .kloc/journal.json and .kloc/orig
must be a file the package's series manages, as a plain relative path inside
the tree with no symlink on the way. A crafted entry (../escape-victim, an
absolute path, "original" pointing outside, a symlinked folder) and a
damaged document (wrong JSON shape or types anywhere) are refused in one
line naming the file, exit 2, before anything is written or deleted; FORCE=1
sets the state aside and rebuilds it from the tree and the series, still
without touching anything outside the tree.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import unittest
from pathlib import Path

from kloc.series import changes, install
from kloc.series.state import JOURNAL, MANIFEST, STATE_DIR, InstallError
from kloc.series.treefiles import Faults

from .helpers import tree_snapshot
from .test_install_safety import cli, pristine_tree

SERIES = changes.load_series()
KCONFIG = 'mm/Kconfig'
VICTIM = 'escape-victim'
ENVS: tuple[dict[str, str], ...] = ({}, {'FORCE': '1'})
JOURNAL_SHAPES = ('{"files":{"mm/Kconfig":1}}', '{"files":{"mm/Kconfig":{"after":null}}}',
                  '[1,2]', 'garbage', '[' * 100000,
                  '{"format":2,"op":"install","manifest":null,'
                  '"files":{"mm/Kconfig":{"before":null,"after":null,"mode":"644"}}}',
                  '{"format":2,"op":"rm -rf","manifest":null,"files":{}}',
                  '{"format":2,"op":"install","manifest":"[]","files":{}}',
                  '{"format":2,"op":"install","manifest":null,'
                  '"files":{"mm/Kconfig":{"before":"abc","after":null,"mode":null}}}')
MANIFEST_SHAPES = ('{"files":{"mm/Kconfig":1}}', '{"files":{"mm/Kconfig":{"after":null}}}',
                   '{"format":2,"version":"6.12","series":[1],"files":{}}',
                   '{"format":2,"version":6,"series":[],"files":{}}',
                   '{"format":2,"version":"6.12","series":[],"files":{},"extra":1}',
                   '{"format":3,"version":"6.12","series":[],"files":{}}',
                   '{"format":2,"version":"6.12","series":[],"files":{"mm/Kconfig":'
                   '{"original":null,"installed":null,"mode":"644"}}}',
                   '{"format":2,"version":"6.12","series":[],"files":{"mm/Kconfig":'
                   '{"original":null,"installed":null,"mode":2541}}}',
                   '{"format":2,"version":"6.12","series":[],"files":{"mm/Kconfig":'
                   '{"original":"abc","installed":null,"mode":420}}}')


class Base(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory(prefix='kloc-state-')
        self.addCleanup(tmp.cleanup)
        self.tmp = Path(tmp.name)
        self.root, self.version = pristine_tree(self.tmp / 'linux')
        self.pristine = tree_snapshot(self.root)
        self.victim = self.tmp / VICTIM
        self.victim.write_text('not the tree\'s\n')
        self.outside = tree_snapshot(self.tmp)

    @property
    def state(self) -> Path:
        return self.root / STATE_DIR

    def outside_now(self) -> dict[str, str]:
        """Everything in tmp except the tree (and the tree itself as a folder)."""
        return {k: v for k, v in tree_snapshot(self.tmp).items()
                if not k.startswith('linux/') and k != 'linux/'}

    def outside_before(self) -> dict[str, str]:
        return {k: v for k, v in self.outside.items()
                if not k.startswith('linux/') and k != 'linux/'}

    def refused(self, cmd: str, expect: list[str], env: dict[str, str] | None = None,
                here: bool = False) -> str:
        """cmd is refused in one line naming each of expect; nothing anywhere changed.
        On the command line (exit 2), or here (in this process: quicker)."""
        before = tree_snapshot(self.root)
        if here:
            with self.assertRaises(InstallError) as cm:
                getattr(install, cmd)(self.root, self.version, SERIES,
                                      force=(env or {}).get('FORCE') == '1')
            lines = [f'kloc {cmd}: error: {cm.exception}']
            self.assertNotIn('\n', lines[0])
        else:
            r = cli(cmd, '--kdir', str(self.root), env=env)
            lines = [ln for ln in r.stderr.splitlines() if not ln.startswith('[kloc ')]
            self.assertNotIn('Traceback', r.stderr)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertEqual(len(lines), 1, r.stderr)
        for e in expect:
            self.assertIn(e, lines[0])
        self.assertEqual(tree_snapshot(self.root), before, f'{cmd} wrote to the tree')
        self.assertEqual(self.outside_now(), self.outside_before(),
                         f'{cmd} wrote outside the tree')
        return lines[0]

    def forced(self, cmd: str) -> None:
        """FORCE=1 recovers from the series; nothing outside the tree changes."""
        r = cli(cmd, '--kdir', str(self.root), env={'FORCE': '1'})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.outside_now(), self.outside_before(),
                         f'FORCE=1 {cmd} wrote outside the tree')
        if cmd == 'uninstall':
            self.assertEqual(tree_snapshot(self.root), self.pristine)


class ManifestPathTest(Base):
    def setUp(self) -> None:
        super().setUp()
        install.install(self.root, self.version, SERIES)
        self.doc = json.loads((self.state / MANIFEST).read_text())

    def plant(self, rel: str, entry: dict[str, object]) -> None:
        doc = json.loads(json.dumps(self.doc))
        doc['files'][rel] = entry
        (self.state / MANIFEST).write_text(json.dumps(doc))

    def check(self, rel: str, entry: dict[str, object]) -> None:
        for cmd in ('uninstall', 'install'):
            with self.subTest(rel=rel, cmd=cmd):
                self.plant(rel, entry)
                msg = self.refused(cmd, [MANIFEST, rel, 'FORCE=1'],
                                   here=cmd == 'install')
                self.assertIn('damaged', msg)
        for cmd in ('install', 'uninstall'):
            with self.subTest(rel=rel, cmd=f'FORCE=1 {cmd}'):
                self.plant(rel, entry)
                self.forced(cmd)
                install.install(self.root, self.version, SERIES)

    def test_an_entry_outside_the_tree(self) -> None:
        self.check(f'../{VICTIM}', {'original': None, 'installed': None, 'mode': None})

    def test_an_absolute_path(self) -> None:
        self.check(str(self.victim), {'original': None, 'installed': None, 'mode': None})

    def test_an_original_saved_outside(self) -> None:
        # .kloc/orig/../escape-written is .kloc/escape-written: written to ../escape-written
        (self.state / 'escape-written').write_text('planted\n')
        self.outside = tree_snapshot(self.tmp)
        self.check('../escape-written', {'original': 'abc', 'installed': None, 'mode': 420})
        self.assertFalse((self.tmp / 'escape-written').exists())

    def test_unnormalised_and_unmanaged_paths(self) -> None:
        entry: dict[str, object] = {'original': None, 'installed': None, 'mode': None}
        for rel in ('mm/./Kconfig', 'mm//Kconfig', './mm/Kconfig', 'mm/tests/../Kconfig',
                    'Makefile', '.kloc/manifest.json', ''):
            with self.subTest(rel=rel):
                self.plant(rel, entry)
                self.refused('uninstall', [MANIFEST, 'FORCE=1'], here=True)

    def test_a_symlinked_folder_in_the_tree(self) -> None:
        # The tree's mm/ is a link to a folder outside: uninstall would write there.
        away = self.tmp / 'mm-elsewhere'
        (self.root / 'mm').rename(away)
        (self.root / 'mm').symlink_to(away)
        self.outside = tree_snapshot(self.tmp)
        for cmd in ('uninstall', 'install'):
            for env in ENVS:
                with self.subTest(cmd=cmd, env=env):
                    self.refused(cmd, [str(self.root / 'mm'), 'symlink'], env)

    def test_a_symlinked_file_in_the_tree(self) -> None:
        (self.root / KCONFIG).unlink()
        (self.root / KCONFIG).symlink_to(self.victim)
        for cmd in ('uninstall', 'install'):
            with self.subTest(cmd=cmd):
                self.refused(cmd, [str(self.root / KCONFIG), 'symlink'], {'FORCE': '1'})

    def test_a_symlinked_folder_in_orig(self) -> None:
        away = self.tmp / 'orig-elsewhere'
        (self.state / 'orig' / 'mm').rename(away)
        (self.state / 'orig' / 'mm').symlink_to(away)
        self.outside = tree_snapshot(self.tmp)
        for cmd in ('uninstall', 'install'):
            with self.subTest(cmd=cmd):
                self.refused(cmd, ['orig/mm', 'symlink', 'FORCE=1'])
        self.forced('uninstall')

    def test_a_stranger_in_orig(self) -> None:
        stranger = self.state / 'orig' / 'etc' / 'passwd'
        stranger.parent.mkdir()
        stranger.write_text('root::0:0::/:/bin/sh\n')
        self.refused('uninstall', ['orig/etc', 'FORCE=1'])
        self.forced('uninstall')


class ManifestShapeTest(Base):
    def test_damaged_shapes(self) -> None:
        install.install(self.root, self.version, SERIES)
        for n, text in enumerate(MANIFEST_SHAPES):
            for cmd in ('install', 'uninstall'):
                with self.subTest(manifest=text, cmd=cmd):
                    (self.state / MANIFEST).write_text(text)
                    self.refused(cmd, [str(self.state / MANIFEST), 'damaged',
                                       'FORCE=1'], here=n > 0)
        self.forced('uninstall')


class JournalTest(Base):
    """A journal left by an interrupted install, then damaged or crafted."""

    def setUp(self) -> None:
        super().setUp()
        with self.assertRaises(OSError):
            install.install(self.root, self.version, SERIES, faults=Faults(8, 'fail'))
        self.jfile = self.state / JOURNAL
        self.doc = json.loads(self.jfile.read_text())
        self.assertTrue(self.doc['files'])

    def test_damaged_shapes(self) -> None:
        for n, text in enumerate(JOURNAL_SHAPES):
            for cmd in ('install', 'uninstall'):
                with self.subTest(journal=text[:60], cmd=cmd):
                    self.jfile.write_text(text)
                    self.refused(cmd, [str(self.jfile), 'FORCE=1'], here=n > 0)
        self.forced('uninstall')

    def plant(self, rel: str, entry: dict[str, object]) -> None:
        doc = json.loads(json.dumps(self.doc))
        doc['files'][rel] = entry
        self.jfile.write_text(json.dumps(doc))

    def test_an_entry_outside_the_tree(self) -> None:
        for rel in (f'../{VICTIM}', str(self.victim)):
            for cmd in ('install', 'uninstall'):
                with self.subTest(rel=rel, cmd=cmd):
                    # recovery would delete it: before null, and the file is there
                    self.plant(rel, {'before': None, 'after': None, 'mode': None})
                    self.refused(cmd, [str(self.jfile), rel, 'FORCE=1'],
                                 here=rel != f'../{VICTIM}')
        self.forced('uninstall')

    def test_a_saved_copy_outside(self) -> None:
        # journal/../escape-written is .kloc/escape-written: restored to ../escape-written
        data = b'planted\n'
        (self.state / 'escape-written').write_bytes(data)
        self.outside = tree_snapshot(self.tmp)
        self.plant('../escape-written', {'before': hashlib.sha256(data).hexdigest(),
                                         'after': None, 'mode': 420})
        self.refused('install', [str(self.jfile), '../escape-written'])
        self.forced('install')
        self.assertFalse((self.tmp / 'escape-written').exists())

    def test_a_symlinked_saved_copy(self) -> None:
        rel = next(r for r, f in sorted(self.doc['files'].items()) if f['before'])
        saved = self.state / 'journal' / rel
        saved.unlink()
        saved.symlink_to(self.victim)
        self.refused('install', ['journal/' + rel, 'symlink'])
        self.forced('uninstall')

    def test_the_journal_is_a_symlink(self) -> None:
        fake = self.tmp / 'fake-journal.json'
        doc = json.loads(json.dumps(self.doc))
        doc['files'] = {f'../{VICTIM}': {'before': None, 'after': None, 'mode': None}}
        fake.write_text(json.dumps(doc))
        self.outside = tree_snapshot(self.tmp)
        self.jfile.unlink()
        self.jfile.symlink_to(fake)
        self.refused('install', [str(self.jfile), 'symlink'])

    def test_a_good_journal_still_rolls_back(self) -> None:
        r = cli('uninstall', '--kdir', str(self.root))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('rolled back', r.stderr)
        self.assertEqual(tree_snapshot(self.root), self.pristine)


class KlocLinkTest(Base):
    def test_kloc_is_a_symlink(self) -> None:
        install.install(self.root, self.version, SERIES)
        away = self.tmp / 'kloc-elsewhere'
        shutil.move(str(self.state), away)
        self.state.symlink_to(away)
        self.outside = tree_snapshot(self.tmp)
        for env in ENVS:
            for cmd in ('uninstall', 'install'):
                with self.subTest(cmd=cmd, env=env):
                    self.refused(cmd, [str(self.state), 'symlink'], env)


if __name__ == '__main__':
    unittest.main()
