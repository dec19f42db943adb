# SPDX-License-Identifier: GPL-2.0
"""make compare/review LAVA_URL=: the jobs a lab is sent, the ledger, the server's errors.

The lab itself (tools/lava-lab.sh: lava-server, its scheduler and a worker)
takes two minutes to set up and 20 s a job, so make test does not run one
(docs/lava.md shows a compare fanned out through it). What it sends is
checked here as the lab would check it: the job definitions of a real
comparison's plan (the built 6.12 guest) go through lava-server's schema
(lava_common) and lava-run --validate with the device lava-server would
render; a rebuilt initramfs must not change a file that queued jobs fetch;
the ledger of submitted jobs counts only its own comparison's; and a
server that is not there, or a bad LAVA_URL, is a clear error.
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import unittest
from pathlib import Path

from kloc.digest import sha256_file
from kloc.bench import interleave
from kloc.bench.store import BenchRun, open_store
from kloc.guests import guest
from kloc.lava import device, export, jobs, lab, local, remote, yamlio
from kloc.paths import cache_dir
from kloc.qemu import topology

from .helpers import debian_tree, installed_tree
from .test_lava import _lava_common_validate as lava_common_validate


def _free_port() -> int:
    """A local port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port: int = s.getsockname()[1]
        return port


class ServerTest(unittest.TestCase):
    def test_bad_url(self) -> None:
        for url in ('127.0.0.1:8042', 'ftp://lab', 'http://'):
            with self.subTest(url=url), self.assertRaises(remote.RemoteError) as e:
                remote.server(url, 'token')
            self.assertIn('LAVA_URL', str(e.exception))

    def test_no_token(self) -> None:
        with self.assertRaises(remote.RemoteError) as e:
            remote.server('http://127.0.0.1:8042')
        self.assertIn('LAVA_TOKEN_FILE', str(e.exception))
        with tempfile.TemporaryDirectory() as d, self.assertRaises(remote.RemoteError) as e:
            remote.server('http://127.0.0.1:8042', token_file=f'{d}/none')
        self.assertIn('No such file', str(e.exception))

    def test_token_file_and_url(self) -> None:
        with tempfile.NamedTemporaryFile('w') as f:
            f.write('secret\n')
            f.flush()
            s = remote.server('http://127.0.0.1:8042/', token_file=f.name)
        self.assertEqual(s, remote.Server('http://127.0.0.1:8042', 'secret'))
        self.assertEqual(s.job_url(7), 'http://127.0.0.1:8042/scheduler/job/7')

    def test_no_server_there(self) -> None:
        s = remote.Server(f'http://127.0.0.1:{_free_port()}', 'token', timeout=5)
        with self.assertRaises(remote.RemoteError) as e:
            remote.version(s)
        self.assertIn('cannot reach the LAVA server', str(e.exception))
        self.assertIn('tools/lava-lab.sh status', str(e.exception))


class LedgerTest(unittest.TestCase):
    def test_only_this_comparisons_whole_lines(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / lab.LEDGER
            lab._append(path, lab.Submitted(3, 'a'), 'k1')
            lab._append(path, lab.Submitted(4, 'b'), 'k2')      # another comparison's
            lab._append(path, lab.Submitted(5, 'b'), 'k1')
            with path.open('a') as f:
                f.write('{"job": 6, "side": "a", "ke')           # cut short by a kill
            self.assertEqual(lab.read_ledger(path, 'k1'),
                             [lab.Submitted(3, 'a'), lab.Submitted(5, 'b')])
            self.assertEqual(lab.read_ledger(Path(d) / 'none', 'k1'), [])

    def test_a_lab_run_names_its_job(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            store = open_store(Path(d) / 'runs.jsonl', {'k': 'v'})
            store.append(BenchRun('a', True, 8.0, {'pps_single': 1}, job='http://lab/job/3'))
            again = open_store(Path(d) / 'runs.jsonl', {'k': 'v'})
            self.assertEqual(again.runs[0].job, 'http://lab/job/3')
            self.assertEqual(again.runs, store.runs)


class DefinitionsTest(unittest.TestCase):
    """The jobs lab.run() submits for an A/A plan of the built 6.12 guest."""

    tmp: Path
    plan: interleave.AbPlan

    @classmethod
    def setUpClass(cls) -> None:
        if not shutil.which('lava-run'):
            raise unittest.SkipTest(local.INSTALL_HINT)
        tree = debian_tree('6.12')
        built = [g for g in export.guests(tree) if g.arch == 'x86_64']
        if not built:
            raise unittest.SkipTest('no x86_64 guest of 6.12 is built (make guest)')
        installed_tree('6.12')
        cls.tmp = Path(tempfile.mkdtemp(prefix='kloc-test-lab-'))
        initrd = export.selftest_initramfs(tree, 'x86_64', 1.0, cls.tmp / 'work')
        g = built[0]
        cls.plan = interleave.AbPlan(interleave.AbSide('base', g, initrd),
                                     interleave.AbSide('patched', g, initrd),
                                     topology.get('x86_64_2n'), 2, 180, cls.tmp / 'review',
                                     {'what': 'test'})

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def definitions(self) -> dict[str, str]:
        return lab._definitions(self.plan, lab.Lab(remote.Server('http://127.0.0.1:1', 't')))

    def test_lava_validates_them(self) -> None:
        defs = self.definitions()
        self.assertEqual(set(defs), {'a', 'b'})
        lava_dir = self.tmp / 'lava'
        files = []
        for side, text in defs.items():
            d = yamlio.load(text)
            assert isinstance(d, dict)
            lava_common_validate(d)
            self.assertEqual(d['metadata']['kloc.side'], side)
            self.assertEqual(d['context']['extra_options'],
                             jobs.split(guest.qemu_command(self.plan.a.guest, self.plan.a.initrd,
                                                           self.plan.topology),
                                        'x86_64').context['extra_options'])
            path = lava_dir / export.JOBS / f'lab-{side}.yaml'
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            files.append(local.JobFile(path, d))
        (lava_dir / export.DEVICE).mkdir(parents=True)
        (lava_dir / export.DEVICE / f'{device.HOSTNAME}.jinja2').write_text(device.DICTIONARY)
        local.validate_all(files, lava_dir, device.templates(cache_dir()))

    def test_a_rebuilt_initramfs_leaves_queued_jobs_their_file(self) -> None:
        """The bug: a resumed comparison rebuilt the initramfs into the same name, and the
        jobs still queued from before failed their checksum."""
        first = yamlio.load(self.definitions()['a'])
        # rebuilt under the same name, as a resumed comparison rebuilds it
        changed = self.tmp / 'rebuilt' / self.plan.a.initrd.name
        changed.parent.mkdir(exist_ok=True)
        changed.write_bytes(self.plan.a.initrd.read_bytes() + b'\0')
        try:
            side = interleave.AbSide('base', self.plan.a.guest, changed)
            plan = interleave.AbPlan(side, side, self.plan.topology, 2, 180, self.plan.out,
                                     {'what': 'test'})
            second = yamlio.load(lab._definitions(
                plan, lab.Lab(remote.Server('http://127.0.0.1:1', 't')))['a'])
        finally:
            changed.unlink()
        assert isinstance(first, dict) and isinstance(second, dict)
        old = first['actions'][0]['deploy']['images']['initrd']
        new = second['actions'][0]['deploy']['images']['initrd']
        self.assertNotEqual(old['url'], new['url'])
        for im in (old, new):
            path = Path(im['url'].removeprefix('file://'))
            self.assertEqual(sha256_file(path), im['sha256sum'], path)

    def test_the_key_says_where_the_runs_came_from(self) -> None:
        k = lab.key(self.plan, lab.Lab(remote.Server('http://lab:80', 't')))
        self.assertEqual(k['runner'], 'LAVA http://lab:80')
        self.assertNotEqual(lab.key_digest(k), lab.key_digest(self.plan.key))
        json.dumps(k)
