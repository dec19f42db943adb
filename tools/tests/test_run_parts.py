# SPDX-License-Identifier: GPL-2.0
"""make run's orchestration (kloc/run/): the plan names every part of the mission with
the command that reproduces it; a part that fails is recorded and the next one still
runs; run.json and the screen say what each did. The parts here are real kloc
commands that finish at once: one that succeeds, one that is refused (RUNS=1)."""

from __future__ import annotations

import json
import os
import tempfile
import unittest
import unittest.mock
from pathlib import Path

from kloc.run import main, parts
from kloc.trees import buildstamp, kernels

WHERE = parts.Where(kernel='6.12', kdir='', jobs=2, timeout=None, topologies=())


class Plan(unittest.TestCase):
    def test_the_whole_mission(self) -> None:
        plan = parts.plan(WHERE)
        names = [p.name for p in plan]
        self.assertEqual(names[:4], ['kunit', 'mutants', 'kselftest', 'compare'])
        self.assertEqual(names[4:], ['its-arm64_2n_its1', 'its-arm64_2n_its0'])
        by = {p.name: p for p in plan}
        slab = kernels.with_slab()
        self.assertEqual(slab, '6.1')
        self.assertEqual(by['compare'].argv, ('compare', '--kernel', slab))
        self.assertEqual(by['compare'].make, 'make compare KERNEL=6.1')
        self.assertIn('KERNEL=6.12', by['kunit'].make)
        self.assertIn('--topology', by['its-arm64_2n_its0'].argv)
        kdir = parts.plan(parts.Where('6.12', '/src/linux', 2, 60, ('arm64_2n_its0',)))
        self.assertEqual([p.name for p in kdir][4:], ['its-arm64_2n_its0'])
        self.assertIn('KDIR=/src/linux', kdir[0].make)
        self.assertIn('--timeout', kdir[0].argv)


class Rebuilt(unittest.TestCase):
    def test_a_part_is_credited_with_its_own_builds(self) -> None:
        """Issue 48, item 9: what a part built is what its own commands recorded
        (buildstamp.BUILT_LOG), once a build dir, not every image of the cache that
        changed while it ran (a review's copy, a KDIR copy other commands built)."""
        with tempfile.TemporaryDirectory() as d:
            cache, log = Path(d) / 'cache', Path(d) / 'part.built'

            def build(rel: str, own: bool) -> None:
                image = cache / rel
                image.parent.mkdir(parents=True, exist_ok=True)
                image.write_bytes(b'image')
                with unittest.mock.patch.dict(os.environ):
                    os.environ.pop(buildstamp.BUILT_LOG, None)
                    if own:
                        os.environ[buildstamp.BUILT_LOG] = str(log)
                    buildstamp.record(image.parents[3], 'tree', ['in'], image)
            build('mutants/linux-6.12.118/guest-x86_64-slub/arch/x86/boot/bzImage', True)
            build('trees/linux-6.12/build-arm64/arch/arm64/boot/Image', True)
            build('trees/linux-6.12/build-arm64/arch/arm64/boot/Image', True)
            build('review/linux-7.2-abc/guest-x86_64-slub/arch/x86/boot/bzImage', False)
            with log.open('a') as f:        # not an image of the cache
                f.write('/elsewhere/trees/x/y/arch/arm64/boot/Image\n')
            self.assertEqual(buildstamp.built(log, cache),
                             ('linux-6.12 build-arm64', 'linux-6.12.118 guest-x86_64-slub'))
            self.assertEqual(buildstamp.built(Path(d) / 'none.built', cache), ())


class Orchestration(unittest.TestCase):
    def test_a_failed_part_is_recorded_and_the_next_runs(self) -> None:
        ok = parts.Part('out', 'a command that succeeds', ('out',), 'kloc out', '',
                        parts._last(r'/out$'))
        refused = parts.Part('compare', 'a command that is refused',
                             ('compare', '--kernel', '6.1', '--counted', '1'),
                             'make compare COUNTED=1', 'compare/',
                             parts._last(r'error: '))
        with tempfile.TemporaryDirectory() as d:
            out, cache = Path(d) / 'out', Path(d) / 'cache'
            cache.mkdir()
            env = main.environment(WHERE, out)
            outcomes = [main.run_part(p, out, cache, env) for p in (refused, ok)]
            main.write_json(out, WHERE, outcomes)
            doc = json.loads((out / 'run.json').read_text())
            screen = main.screen(outcomes, out)
            log = (out / 'run' / 'compare.log').read_text()
        self.assertEqual([o.ok for o in outcomes], [False, True])
        self.assertEqual(outcomes[0].exit, 2)
        self.assertIn('COUNTED=1', outcomes[0].verdict)
        self.assertIn('COUNTED=1', log)
        self.assertEqual(outcomes[1].verdict, str(out))
        self.assertEqual(doc['format'], main.FORMAT)
        self.assertFalse(doc['ok'])
        self.assertEqual([p['name'] for p in doc['parts']], ['compare', 'out'])
        self.assertEqual(doc['parts'][0]['command'], 'make compare COUNTED=1')
        self.assertIn('make run: 1 of 2 parts passed', screen)
        self.assertIn('FAIL  compare', screen)
        self.assertIn('PASS  out', screen)
        self.assertIn('kernels reused', screen)


if __name__ == '__main__':
    unittest.main()
