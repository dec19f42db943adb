# SPDX-License-Identifier: GPL-2.0
"""tools/deps.sh: a missing package is named, with the command that installs it."""

from __future__ import annotations

import os
import subprocess
import unittest
from pathlib import Path

DEPS = Path(__file__).resolve().parents[1] / 'deps.sh'


class DepsTest(unittest.TestCase):
    def run_deps(self, *args: str, extra: str = '',
                 path: str | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, KLOC_DEPS_EXTRA=extra)
        if path is not None:
            env['PATH'] = path
        return subprocess.run([str(DEPS)] + list(args), capture_output=True, text=True,
                              env=env)

    def test_all_present(self) -> None:
        r = self.run_deps('--check-only')
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_all_present_on_an_ordinary_users_path(self) -> None:
        # Debian's PATH for a user (/etc/profile, /etc/login.defs) has no sbin: a probe
        # that is a command living only there (depmod was one) is missing to every
        # ordinary user, and make run stopped at deps for them.
        r = self.run_deps('--check-only', path='/usr/local/bin:/usr/bin:/bin:/usr/games')
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_missing_is_listed_with_the_command(self) -> None:
        r = self.run_deps('--check-only', extra='kloc-no-such-package /nonexistent/file')
        self.assertEqual(r.returncode, 1)
        self.assertIn('missing: kloc-no-such-package', r.stderr)
        self.assertIn('apt-get install -y --no-install-recommends kloc-no-such-package',
                      r.stderr)
