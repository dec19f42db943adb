# SPDX-License-Identifier: GPL-2.0
"""The store of counted boots (bench/countstore.py): its key names every input by its
bytes and nothing else, and an entry kloc did not write as it writes them is not used.

These use the installed qemu-system-x86_64 (make deps installs it) as the binary the
key resolves, and real files for the images; test_counting.StoredX86 reuses and
checks real boots.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import unittest
from pathlib import Path

from kloc.bench import countstore
from kloc.bench.countstore import CountStore, Stored, boot_key, differs


def command(d: Path, seed: int = 0, counts: str = 'counts.json') -> list[str]:
    return ['qemu-system-x86_64', '-m', '1024', '-kernel', str(d / 'bzImage'),
            '-initrd', str(d / 'initramfs.gz'),
            '-plugin', f'{d / "kloc-count.so"},node=0:0x0-0x1,out={d / counts}',
            '-seed', str(seed)]


CONSOLE = 'boot\nKLOC-RESULT-BEGIN\n{"sent": 5}\nKLOC-RESULT-END\n'


class Key(unittest.TestCase):
    def setUp(self) -> None:
        t = tempfile.TemporaryDirectory()
        self.addCleanup(t.cleanup)
        self.d = Path(t.name)
        for name in ('bzImage', 'initramfs.gz', 'kloc-count.so'):
            (self.d / name).write_bytes(name.encode() * 1000)

    def key(self, **kw: object) -> dict[str, str]:
        cmd = command(self.d, **kw)    # type: ignore[arg-type]
        return boot_key(cmd, self.d / str(kw.get('counts', 'counts.json')))

    def test_files_by_their_bytes(self) -> None:
        before = self.key()
        args = json.loads(before['args'])
        self.assertNotIn(str(self.d), before['args'])
        self.assertIn('out=<counts>', args[7])
        self.assertTrue(args[3].startswith('<sha256:'))
        self.assertTrue(before['qemu'] and before['qemu_data'])
        for name in ('bzImage', 'initramfs.gz', 'kloc-count.so'):
            p = self.d / name
            data = p.read_bytes()
            st = p.stat()
            p.write_bytes(data[:-1] + b'!')       # one byte, same size and times
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
            self.assertNotEqual(self.key(), before, name)
            p.write_bytes(data)
            self.assertEqual(self.key(), before, name)

    def test_not_where_things_are(self) -> None:
        before = self.key()
        self.assertEqual(self.key(counts='elsewhere.counts.json'), before)
        moved = self.d / 'moved'
        moved.mkdir()
        for name in ('bzImage', 'initramfs.gz', 'kloc-count.so'):
            os.link(self.d / name, moved / name)
        self.assertEqual(boot_key(command(moved), moved / 'counts.json'), before)

    def test_seed_and_arguments(self) -> None:
        before = self.key()
        self.assertNotEqual(self.key(seed=1), before)
        cmd = command(self.d)
        cmd[2] = '2048'
        self.assertNotEqual(boot_key(cmd, self.d / 'counts.json'), before)


class Entries(unittest.TestCase):
    def setUp(self) -> None:
        t = tempfile.TemporaryDirectory()
        self.addCleanup(t.cleanup)
        self.root = Path(t.name) / 'store'
        self.store = CountStore(self.root)
        self.key = {'format': countstore.FORMAT, 'args': '["-seed", "0"]', 'qemu': 'q'}

    def lookup(self) -> tuple[Stored | None, str]:
        said = io.StringIO()
        with contextlib.redirect_stderr(said):
            got = self.store.lookup(self.key)
        return got, said.getvalue()

    def entry(self) -> Path:
        return next(self.root.rglob('*.json'))

    def test_saved_then_found(self) -> None:
        self.assertEqual(self.lookup(), (None, ''))
        self.store.save(self.key, CONSOLE, '{"a": 1}', 17.25)
        got, said = self.lookup()
        assert got is not None
        self.assertEqual((got.console, got.counts, got.seconds), (CONSOLE, '{"a": 1}', 17.25))
        self.assertEqual(said, '')
        self.assertEqual(self.entry().parent.stat().st_mode & 0o077, 0)

    def test_untrusted_entries_are_not_used(self) -> None:
        self.store.save(self.key, CONSOLE, '{"a": 1}', 1.0)
        good = self.entry().read_text()
        d = json.loads(good)
        bad = {
            'another key': json.dumps(dict(d, key=dict(self.key, qemu='r'))),
            'counts not JSON': json.dumps(dict(d, counts='{')),
            'a field more': json.dumps(dict(d, extra=1)),
            'seconds a string': json.dumps(dict(d, seconds='1')),
            'not JSON': good[:-3],
        }
        for what, text in bad.items():
            self.entry().write_text(text)
            got, said = self.lookup()
            self.assertIsNone(got, what)
            self.assertIn('not used', said, what)
            self.assertIn('the boot runs', said, what)
        self.entry().unlink()
        target = self.root / 'elsewhere.json'
        target.write_text(good)
        os.symlink(target, self.root / countstore.key_digest(self.key)[:2] /
                   f'{countstore.key_digest(self.key)}.json')
        got, said = self.lookup()
        self.assertIsNone(got)
        self.assertIn('not a regular file', said)

    def test_drop_removes_all_and_reuses_nothing(self) -> None:
        self.store.save(self.key, CONSOLE, '{"a": 1}', 1.0)
        with contextlib.redirect_stderr(io.StringIO()) as said:
            self.store.drop('the check differed')
        self.assertIn('stored counts dropped: the check differed', said.getvalue())
        self.assertFalse(self.root.exists())
        self.store.save(self.key, CONSOLE, '{"a": 1}', 1.0)      # stores still
        self.assertEqual(self.lookup(), (None, ''))             # but reuses nothing

    def test_off(self) -> None:
        self.store.save(self.key, CONSOLE, '{"a": 1}', 1.0)
        self.store.reuse = False
        self.assertEqual(self.lookup(), (None, ''))


class Differs(unittest.TestCase):
    def test_same_and_otherwise(self) -> None:
        s = Stored('d' * 64, CONSOLE, '{"a": 1, "b": [1, 2]}', 1.0)
        self.assertEqual(differs(s, CONSOLE, '{"b": [1, 2], "a": 1}'), '')
        self.assertEqual(differs(s, CONSOLE, '{"a": 1, "b": [1, 3]}'),
                         "the plugin counted otherwise (first in 'b')")
        self.assertEqual(differs(s, CONSOLE.replace('5', '6'), '{"a": 1, "b": [1, 2]}'),
                         'the selftest reported otherwise')


if __name__ == '__main__':
    unittest.main()
