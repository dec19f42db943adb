# SPDX-License-Identifier: GPL-2.0
"""The LAVA token and the lab's files: where the token may go, and what lava-lab.sh trusts.

remote.py (make compare/review LAVA_URL=): plain http to a host that is not
this machine is refused before any connection unless LAVA_INSECURE_HTTP=1
(read strictly: 0 or 1); a redirect to another scheme, host or port is
refused and the token never reaches it (two real servers on loopback); a
URL's user:password@ never shows in a message.

tools/lava-lab.sh, without lava-server (fake commands first in PATH, a
KLOC_CACHE of the test's): stop signals nothing for a pid file holding 1
(run in a PID namespace of its own, so that even a broken stop cannot
signal this machine's processes), another process's pid, a pid file that is
a link, or a lab directory with a link in it or writable by others; start
and stop manage exactly the process groups start made, with files of mode
600; the token step makes a user that is no superuser, never puts the token
on a command line, and trusts an existing token file only as it makes one.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
import unittest
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from kloc.lava import remote, yamlio

from .helpers import root_only

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / 'tools' / 'lava-lab.sh'
PASSWORD = 'hunter2-not-shown'
VAR = 'LAVA_INSECURE_HTTP'
TOKEN = 'sekrit-token-0123456789abcdefghijklmnopqrstuvwxyz'


# remote.py

class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers GET with the server's `answer` (status, Location or JSON body), and
    records each request's path and Authorization header in the server's `seen`."""

    server: _Server

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get('Authorization')))
        status, location = self.server.answer(self.path)
        self.send_response(status)
        body = b''
        if location:
            self.send_header('Location', location)
        else:
            body = json.dumps({'version': '2023.01'}).encode()
            self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    seen: list[tuple[str, str | None]]

    def __init__(self, host: str) -> None:
        super().__init__((host, 0), _Recorder)
        self.seen = []
        self.redirect_to = ''

    def answer(self, path: str) -> tuple[int, str]:
        if self.redirect_to and not path.startswith('/moved'):
            return 302, self.redirect_to
        return 200, ''

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f'http://{host!s}:{port}'


@contextmanager
def _serving(host: str) -> Iterator[_Server]:
    s = _Server(host)
    t = threading.Thread(target=s.serve_forever, daemon=True)
    t.start()
    try:
        yield s
    finally:
        s.shutdown()
        s.server_close()
        t.join()


def _other_loopback() -> str:
    """127.0.0.2 where it can be bound (Linux routes 127.0.0.0/8 to lo), else 127.0.0.1:
    another port is another origin too."""
    try:
        with socket.socket() as s:
            s.bind(('127.0.0.2', 0))
        return '127.0.0.2'
    except OSError:
        return '127.0.0.1'


def _no_connection(*args: object, **kwargs: object) -> object:
    raise AssertionError(f'a connection was attempted: {args}')


class InsecureHttpTest(unittest.TestCase):
    """The finding: LAVA_URL=http://<another host> sent the token in clear, silently."""

    def setUp(self) -> None:
        env = mock.patch.dict(os.environ)
        env.start()
        self.addCleanup(env.stop)
        os.environ.pop(VAR, None)

    def test_http_to_another_host_is_refused_before_any_connection(self) -> None:
        with mock.patch('socket.getaddrinfo', _no_connection), \
                mock.patch('socket.create_connection', _no_connection):
            with self.assertRaises(remote.RemoteError) as e:
                remote.server('http://lava.example.org:8042', TOKEN)
            self.assertIn('LAVA_INSECURE_HTTP=1', str(e.exception))
            self.assertIn('https://', str(e.exception))
            self.assertNotIn('\n', str(e.exception))
            # a Server made by hand is refused at the request too
            with self.assertRaises(remote.RemoteError) as e:
                remote.version(remote.Server('http://lava.example.org', TOKEN))
            self.assertIn('LAVA_INSECURE_HTTP=1', str(e.exception))

    def test_loopback_and_https_and_the_opt_in_pass(self) -> None:
        for url in ('http://127.0.0.1:8042', 'http://127.1.2.3', 'http://[::1]:8042',
                    'http://localhost:8042/', 'http://LOCALHOST', 'https://lava.example.org'):
            with self.subTest(url=url):
                self.assertEqual(remote.server(url, TOKEN).url, url.rstrip('/'))
        os.environ[VAR] = '1'
        self.assertTrue(remote.server('http://lava.example.org', TOKEN).insecure_http)
        self.assertEqual(remote.server('http://lava.example.org', TOKEN, insecure_http=True).url,
                         'http://lava.example.org')

    def test_the_variable_is_read_strictly(self) -> None:
        for value, allowed in (('1', True), ('0', False), ('', False)):
            with self.subTest(value=value):
                self.assertIs(remote.insecure_http_allowed({VAR: value}), allowed)
        self.assertFalse(remote.insecure_http_allowed({}))
        for value in ('yes', 'true', ' 1', '1\n', '2', 'on'):
            with self.subTest(value=value), self.assertRaises(remote.RemoteError) as e:
                remote.insecure_http_allowed({VAR: value})
            self.assertIn('LAVA_INSECURE_HTTP=', str(e.exception))
            self.assertNotIn('\n', str(e.exception))
        os.environ[VAR] = 'yes'
        with self.assertRaises(remote.RemoteError):
            remote.server('https://lava.example.org', TOKEN)


class TokenTest(unittest.TestCase):
    def test_a_token_of_two_lines_is_an_error_not_a_traceback(self) -> None:
        with tempfile.NamedTemporaryFile('w') as f:
            f.write(f'{TOKEN}\nsecond line\n')
            f.flush()
            with self.assertRaises(remote.RemoteError) as e:
                remote.version(remote.server(f'http://127.0.0.1:{_free_port()}',
                                             token_file=f.name))
        self.assertIn('one line', str(e.exception))
        self.assertNotIn(TOKEN, str(e.exception))


class RedirectTest(unittest.TestCase):
    """The finding: a 302 to another host got the Authorization header too."""

    def test_a_redirect_to_another_host_gets_no_token(self) -> None:
        with _serving('127.0.0.1') as lab, _serving(_other_loopback()) as other:
            lab.redirect_to = f'{other.url}/api/v0.2/system/version/'
            with self.assertRaises(remote.RemoteError) as e:
                remote.version(remote.Server(lab.url, TOKEN, timeout=10))
            self.assertIn('redirected', str(e.exception))
            self.assertIn(f'LAVA_URL={other.url}', str(e.exception))
            self.assertEqual([a for _, a in lab.seen], [f'Token {TOKEN}'])
            self.assertEqual(other.seen, [])

    def test_nor_to_another_port_with_a_password_in_it(self) -> None:
        with _serving('127.0.0.1') as lab, _serving('127.0.0.1') as other:
            port = other.server_address[1]
            lab.redirect_to = f'http://evil:{PASSWORD}@127.0.0.1:{port}/x'
            with self.assertRaises(remote.RemoteError) as e:
                remote.version(remote.Server(lab.url, TOKEN, timeout=10))
            self.assertNotIn(PASSWORD, str(e.exception))
            self.assertEqual(other.seen, [])

    def test_a_redirect_within_the_server_keeps_working(self) -> None:
        with _serving('127.0.0.1') as lab:
            lab.redirect_to = f'{lab.url}/moved/version/'
            self.assertEqual(remote.version(remote.Server(lab.url, TOKEN, timeout=10)),
                             '2023.01')
            self.assertEqual(lab.seen, [('/api/v0.2/system/version/', f'Token {TOKEN}'),
                                        ('/moved/version/', f'Token {TOKEN}')])


class RedactTest(unittest.TestCase):
    """The finding: LAVA_URL=http://user:password@... printed the password."""

    def test_redact(self) -> None:
        for url, shown in (
                ('http://kloc:pw@127.0.0.1:8042/x', 'http://***@127.0.0.1:8042/x'),
                ('https://kloc@lab', 'https://***@lab'),
                ('kloc:pw@127.0.0.1:8042', '***@127.0.0.1:8042'),
                ('http://u:p/w?x#@lab/', 'http://***@lab/'),
                ('http://127.0.0.1:8042', 'http://127.0.0.1:8042')):
            with self.subTest(url=url):
                self.assertEqual(remote.redact(url), shown)

    def messages(self, url: str) -> list[str]:
        """Every error the URL gives, from server() and (if it made one) a request."""
        out = []
        try:
            s = remote.server(url, TOKEN)
        except remote.RemoteError as e:
            return [str(e)]
        try:
            remote.version(remote.Server(s.url, TOKEN, timeout=5))
        except remote.RemoteError as e:
            out.append(str(e))
        return out

    def test_no_message_shows_the_password(self) -> None:
        port = _free_port()
        for url in (f'http://kloc:{PASSWORD}@127.0.0.1:{port}',
                    f'ftp://kloc:{PASSWORD}@lab/', f'kloc:{PASSWORD}@127.0.0.1:{port}',
                    f'http://kloc:{PASSWORD}@lava.example.org'):
            with self.subTest(url=url):
                messages = self.messages(url)
                self.assertTrue(messages, 'no error')
                for m in messages:
                    self.assertNotIn(PASSWORD, m)
                    self.assertNotIn(TOKEN, m)
                    self.assertNotIn('\n', m)

    def test_a_server_made_by_hand(self) -> None:
        s = remote.Server(f'http://kloc:{PASSWORD}@127.0.0.1:{_free_port()}', TOKEN, timeout=5)
        with self.assertRaises(remote.RemoteError) as e:
            remote.version(s)
        self.assertNotIn(PASSWORD, str(e.exception))
        self.assertNotIn(PASSWORD, s.job_url(3))
        self.assertNotIn(TOKEN, repr(s))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port: int = s.getsockname()[1]
        return port


# tools/lava-lab.sh

FAKE = r'''#!/bin/bash
# A stand-in of {name}: logs its arguments; a service execs a sleep that shows
# them in its command line, as the real one's would (and the log's name, by
# which the test finds what to kill).
echo "{name} $*" >>"$FAKE_LOG"
case "{name} $*" in
*"manage lava-"* | *lava_server.wsgi* | "lava-worker "*) exec -a "{name} $* $FAKE_LOG" sleep 300 ;;
*"users details"*) exit "${{FAKE_USER_EXISTS:-1}}" ;;
*"users add"*) echo random-password ;;
*"tokens add"*) echo "$FAKE_TOKEN" ;;
esac
exit 0
'''


def _alive(pid: int) -> bool:
    """pid runs (and is no zombie)."""
    try:
        return Path(f'/proc/{pid}/stat').read_text().rpartition(')')[2].split()[0] != 'Z'
    except (OSError, IndexError):
        return False


@root_only('lava-lab.sh stop, start and token refuse anyone but root')
class LabScriptTest(unittest.TestCase):
    tmp: Path
    state: Path

    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix='kloc-test-lab-creds-'))
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.state = self.tmp / 'cache' / 'lava-lab'
        self.state.mkdir(parents=True, mode=0o700)
        self.bin = self.tmp / 'bin'
        self.bin.mkdir()
        for name in ('gunicorn3', 'lava-server', 'lava-worker', 'lavacli', 'pg_isready',
                     'curl', 'apt-get', 'pg_ctlcluster', 'psql', 'dpkg-query'):
            f = self.bin / name
            f.write_text(FAKE.format(name=name))
            f.chmod(0o755)
        self.log = self.tmp / 'argv.log'
        self.addCleanup(_kill_fakes, self.log)

    def lab(self, *args: str, env: dict[str, str] | None = None,
            prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        e = dict(os.environ, KLOC_CACHE=str(self.tmp / 'cache'), HOME=str(self.tmp),
                 XDG_CONFIG_HOME=str(self.tmp / 'config'), FAKE_LOG=str(self.log),
                 FAKE_TOKEN='a' * 128, PATH=f'{self.bin}:{os.environ["PATH"]}')
        e.update(env or {})
        return subprocess.run([*prefix, 'bash', str(SCRIPT), *args], env=e, text=True,
                              capture_output=True, timeout=60, check=False)

    def victim(self, argv0: str = 'sleep') -> int:
        """A sleep leading a process group of its own (setsid), as the lab's services do,
        with argv0 as its command line; killed at the end."""
        p = subprocess.Popen(['bash', '-c', f'exec -a "{argv0}" sleep 300'],
                             start_new_session=True)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        time.sleep(0.3)     # bash has exec'd the sleep
        return p.pid

    def assertRefused(self, r: subprocess.CompletedProcess[str], *words: str) -> None:
        self.assertEqual(r.returncode, 2, r.stderr)
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith('kloc lava-lab: error: '), r.stderr)
        for w in words:
            self.assertIn(w, lines[0])

    def test_stop_with_pid_1_signals_nothing(self) -> None:
        """The finding: a pid file holding 1 made stop signal every process (kill -- -1).
        Run where that harms nothing: a PID namespace whose pid 1 is the test's shell and
        whose only other process is a sleep, which must survive."""
        unshare = shutil.which('unshare')
        if not unshare or subprocess.run([unshare, '-pf', '--mount-proc', 'true'],
                                         capture_output=True, check=False).returncode:
            self.skipTest('unshare -pf --mount-proc does not work here (a PID namespace '
                          'keeps this test from signalling the machine)')
        (self.state / 'publisher.pid').write_text('1\n')
        inner = (f'sleep 300 & s=$!; bash {SCRIPT} stop; rc=$?; sleep 0.3; '
                 'state=$(cut -d" " -f3 /proc/$s/stat 2>/dev/null); '
                 'if [ -n "$state" ] && [ "$state" != Z ]; then echo SLEEP-ALIVE; fi; '
                 'kill $s; exit $rc')
        r = subprocess.run([unshare, '-pf', '--mount-proc', 'bash', '-c', inner], text=True,
                           capture_output=True, timeout=60, check=False,
                           env=dict(os.environ, KLOC_CACHE=str(self.tmp / 'cache')))
        self.assertIn('SLEEP-ALIVE', r.stdout, r.stderr)
        self.assertRefused(r, 'publisher.pid', 'holds 1', 'rm ')

    def test_stop_with_another_process_pid_signals_nothing(self) -> None:
        pid = self.victim()
        (self.state / 'scheduler.pid').write_text(f'{pid}\n')
        self.assertRefused(self.lab('stop'), 'scheduler.pid', f'process {pid}',
                           "not the lab's scheduler")
        self.assertTrue(_alive(pid))

    def test_stop_with_a_reused_pid_signals_nothing(self) -> None:
        """Another process with the publisher's command line, but not started when the
        pid file says (a pid reused)."""
        pid = self.victim('lava-server manage lava-publisher --level INFO')
        (self.state / 'publisher.pid').write_text(f'{pid} 12\n')
        self.assertRefused(self.lab('stop'), 'publisher.pid', 'started after')
        self.assertTrue(_alive(pid))

    def test_a_linked_pid_file_is_refused(self) -> None:
        pid = self.victim()
        (self.tmp / 'elsewhere').write_text(f'{pid}\n')
        (self.state / 'worker.pid').symlink_to(self.tmp / 'elsewhere')
        self.assertRefused(self.lab('stop'), 'worker.pid', 'symlink')
        self.assertTrue(_alive(pid))

    def test_a_linked_log_is_refused(self) -> None:
        target = self.tmp / 'victim'
        target.write_text('not the lab\'s\n')
        (self.state / 'gunicorn.out').symlink_to(target)
        for command in ('stop', 'start', 'status'):
            with self.subTest(command=command):
                self.assertRefused(self.lab(command), 'gunicorn.out', 'symlink')
        self.assertEqual(target.read_text(), 'not the lab\'s\n')
        self.assertFalse(self.log.exists(), 'a command ran')

    def test_a_lab_directory_others_may_write_is_refused(self) -> None:
        self.state.chmod(0o777)
        self.assertRefused(self.lab('stop'), 'chmod -R go-w')
        self.state.chmod(0o700)
        link = self.tmp / 'cache2'
        link.mkdir()
        (link / 'lava-lab').symlink_to(self.state)
        self.assertRefused(self.lab('stop', env={'KLOC_CACHE': str(link)}), 'symlink')

    def test_start_and_stop_their_own_process_groups(self) -> None:
        r = self.lab('start')
        pids = {}
        for f in self.state.glob('*.pid'):
            pids[f.stem] = int(f.read_text().split()[0])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(set(pids), {'gunicorn', 'publisher', 'scheduler', 'worker'})
        for f in self.state.iterdir():
            with self.subTest(file=f.name):
                self.assertEqual(stat.S_IMODE(f.lstat().st_mode), 0o600)
                self.assertTrue(stat.S_ISREG(f.lstat().st_mode))
        self.assertEqual(self.lab('start').returncode, 0)   # running: started once only
        self.assertEqual({f.stem: int(f.read_text().split()[0])
                          for f in self.state.glob('*.pid')}, pids)
        status = self.lab('status')
        for name, pid in pids.items():
            self.assertIn(f'{name}: running ({pid})', status.stdout)
        r = self.lab('stop')
        self.assertEqual(r.returncode, 0, r.stderr)
        time.sleep(0.3)
        for name, pid in pids.items():
            self.assertFalse(_alive(pid), name)
        self.assertEqual(list(self.state.glob('*.pid')), [])

    def test_token_step(self) -> None:
        """The lab's user is no superuser, the token is never an argument, lavacli's
        identity file is mode 600 and keeps the others; a token file is trusted only as
        the step makes it."""
        config = self.tmp / 'config'
        config.mkdir(mode=0o700)
        (config / 'lavacli.yaml').write_text('other:\n  uri: https://lab.example/RPC2\n')
        token = 'b' * 128
        r = self.lab('token', env={'FAKE_TOKEN': token})
        self.assertEqual(r.returncode, 0, r.stderr)
        calls = self.log.read_text()
        self.assertNotIn(token, calls)
        self.assertNotIn('--superuser', calls.replace('--not-superuser', ''))
        self.assertNotIn('--staff', calls.replace('--not-staff', ''))
        self.assertIn('lava-server manage users update kloc --not-superuser --not-staff', calls)
        self.assertNotIn('lavacli', calls)
        file = self.state / 'token'
        self.assertEqual(file.read_text(), token + '\n')
        self.assertEqual(stat.S_IMODE(file.stat().st_mode), 0o600)
        identities = config / 'lavacli.yaml'
        self.assertEqual(stat.S_IMODE(identities.stat().st_mode), 0o600)
        self.assertEqual(yamlio.load(identities.read_text()), {
            'other': {'uri': 'https://lab.example/RPC2'},
            'kloc-lab': {'uri': 'http://127.0.0.1:8042/RPC2', 'username': 'kloc',
                         'token': token}})
        # again, with the user there: the same token, kept
        self.assertEqual(self.lab('token', env={'FAKE_USER_EXISTS': '0'}).returncode, 0)
        self.assertEqual(file.read_text(), token + '\n')

    def test_an_untrusted_token_file_is_refused(self) -> None:
        file = self.state / 'token'
        self.addCleanup(file.unlink, missing_ok=True)
        cases = {'mode 644': ('b' * 128 + '\n', 0o644, 'mode 644'),
                 'not a token': ('hello\n', 0o600, 'does not hold a LAVA token'),
                 'two lines': ('b' * 128 + '\n' + 'c' * 128 + '\n', 0o600, 'does not hold')}
        for case, (text, mode, words) in cases.items():
            with self.subTest(case=case):
                file.write_text(text)
                file.chmod(mode)
                try:
                    self.assertRefused(self.lab('token'), str(file), words)
                    self.assertEqual(file.read_text(), text)
                finally:
                    file.unlink()
        (self.tmp / 'planted').write_text('b' * 128 + '\n')
        (self.tmp / 'planted').chmod(0o600)
        file.symlink_to(self.tmp / 'planted')
        self.assertRefused(self.lab('token'), 'symlink')
        self.assertFalse(self.log.exists(), 'lava-server ran')


def _kill_fakes(log: Path) -> None:
    """Kill the fake services a test started (their command lines name its log)."""
    for p in Path('/proc').iterdir():
        try:
            if p.name.isdigit() and str(log).encode() in (p / 'cmdline').read_bytes():
                os.kill(int(p.name), 9)
        except OSError:
            pass


if __name__ == '__main__':
    unittest.main()
