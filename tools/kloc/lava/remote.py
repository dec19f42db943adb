# SPDX-License-Identifier: GPL-2.0
"""A LAVA server's REST API (v0.2): submit a job, read its state and its log.

The calls lavacli makes, with the standard library: POST /api/v0.2/jobs/
with the definition, GET /api/v0.2/jobs/<id>/ for its state and health,
GET /api/v0.2/jobs/<id>/logs/ for its log. The token goes in an
"Authorization: Token <token>" header (lava_rest_app's token
authentication). The server's log has the lines lava-run prints, each as an
item of a YAML list ("- {...}"), which results.read_log() reads.

The token is a credential, and goes only where LAVA_URL says:
- plain http only to this machine (127.0.0.0/8, ::1, localhost); to any
  other host it needs https, or LAVA_INSECURE_HTTP=1 said on purpose;
- a redirect is followed only within the server's scheme, host and port
  (the token goes with it); a redirect anywhere else is refused, and
  nothing is sent there;
- a URL with user:password@ is refused (LAVA takes a token), and every
  message shows a URL through redact(), without its user-info.
"""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.client import HTTPMessage
from pathlib import Path
from typing import IO
from urllib.parse import SplitResult, urlsplit

from kloc.errors import KlocError

API = '/api/v0.2'
# A job's states (lava_scheduler_app.models.TestJob.STATE_CHOICES) and healths.
FINISHED = 'Finished'
COMPLETE = 'Complete'
# The opt-in to send the token over plain http to a host that is not this machine.
INSECURE_HTTP = 'LAVA_INSECURE_HTTP'
_PORTS = {'http': 80, 'https': 443}


class RemoteError(KlocError):
    """The LAVA server cannot be reached, refuses the token or the job."""


def redact(url: str) -> str:
    """url as messages show it: its user-info (user:password@) replaced by ***@.

    Everything between the scheme and the last '@' goes, so a password with
    an unquoted '/', '?' or '#' in it is not shown either.
    """
    scheme, sep, rest = url.partition('://')
    if not sep:
        scheme, rest = '', url
    if '@' not in rest:
        return url
    return f'{scheme}{sep}***@{rest.rpartition("@")[2]}'


def insecure_http_allowed(environ: Mapping[str, str] = os.environ) -> bool:
    """LAVA_INSECURE_HTTP: 1 allows plain http to a host that is not this machine;
    0 or unset (or empty, as make passes it) does not; anything else is refused."""
    value = environ.get(INSECURE_HTTP, '')
    if value not in ('', '0', '1'):
        raise RemoteError(f'{INSECURE_HTTP}={value!r} is neither 0 nor 1: set '
                          f'{INSECURE_HTTP}=1 to send the LAVA token over plain http to a '
                          'host that is not this machine, or leave it unset')
    return value == '1'


def is_loopback(host: str) -> bool:
    """host is this machine's loopback: localhost, 127.0.0.0/8 or ::1."""
    if host.lower() == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(url: str) -> SplitResult | None:
    """url's parts, or None where it is no http(s) URL with a host (and a port that is
    a number)."""
    try:
        parts = urlsplit(url)
        parts.port      # raises ValueError on a port that is not a number
    except ValueError:
        return None
    if parts.scheme not in _PORTS or not parts.hostname:
        return None
    return parts


def _origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of url, the default port filled in; None if it has none."""
    parts = _split(url)
    if parts is None:
        return None
    return parts.scheme, parts.hostname or '', parts.port or _PORTS[parts.scheme]


def base_url(url: str, insecure_http: bool) -> str:
    """The server's URL as requests are made to it (scheme://host[:port][/path], no
    trailing slash); refused, before any connection, where the token would leak."""
    shown = redact(url)
    parts = _split(url)
    if parts is None:
        raise RemoteError(f'LAVA_URL={shown!r} is not an http(s) URL of a LAVA server: give '
                          'e.g. LAVA_URL=http://127.0.0.1:8042 (tools/lava-lab.sh setup prints '
                          "a local lab's)")
    host = parts.netloc.rpartition('@')[2]
    if '@' in url:
        raise RemoteError(f'LAVA_URL={shown!r} holds a user name or password (user:password@'
                          f'): LAVA takes a token, not a password: give LAVA_URL={parts.scheme}'
                          f'://{host} and the token in LAVA_TOKEN_FILE=')
    if parts.scheme == 'http' and not is_loopback(parts.hostname or '') and not insecure_http:
        raise RemoteError(f'LAVA_URL={shown} is plain http to {host}, which is not this '
                          'machine: the LAVA token would cross the network in clear; give an '
                          f'https:// URL, or set {INSECURE_HTTP}=1 to send it in clear anyway')
    return f'{parts.scheme}://{parts.netloc}{parts.path.rstrip("/")}'


@dataclass(frozen=True)
class Server:
    url: str            # scheme://host[:port], no trailing slash
    token: str = field(repr=False)
    timeout: float = 60.0
    insecure_http: bool = False     # LAVA_INSECURE_HTTP=1: plain http to another host

    @property
    def shown(self) -> str:
        """The URL as messages and records show it (redact())."""
        return redact(self.url)

    def job_url(self, job_id: int) -> str:
        """The job's page, for people."""
        return f'{self.shown}/scheduler/job/{job_id}'


@dataclass(frozen=True)
class JobState:
    id: int
    state: str          # Submitted, Scheduling, Scheduled, Running, Canceling, Finished
    health: str         # Unknown, Complete, Incomplete, Canceled
    device: str
    start: str          # ISO times, '' until known
    end: str

    @property
    def finished(self) -> bool:
        return self.state == FINISHED


def server(url: str, token: str = '', token_file: str = '',
           insecure_http: bool | None = None) -> Server:
    """The server of LAVA_URL, with the token of LAVA_TOKEN or LAVA_TOKEN_FILE;
    insecure_http None: as LAVA_INSECURE_HTTP says."""
    if insecure_http is None:
        insecure_http = insecure_http_allowed()
    base = base_url(url, insecure_http)
    if token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as e:
            raise RemoteError(f'LAVA_TOKEN_FILE={token_file}: {e.strerror}') from None
    if not token:
        raise RemoteError('a LAVA server needs a token: give LAVA_TOKEN_FILE= (a file holding '
                          'it) or LAVA_TOKEN=; lava-server manage tokens add --user <you> '
                          'makes one')
    if not token.isprintable() or ' ' in token:
        where = f'in LAVA_TOKEN_FILE={token_file}' if token_file else 'of LAVA_TOKEN'
        raise RemoteError(f'the LAVA token {where} is not one word on one line: give the '
                          'token alone')
    return Server(base, token, insecure_http=insecure_http)


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect within the server's scheme, host and port only (the token
    goes with it); one to anywhere else is refused, before anything is sent there."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int,
                         msg: str, headers: HTTPMessage, newurl: str
                         ) -> urllib.request.Request | None:
        if _origin(newurl) != _origin(req.full_url):
            fp.close()
            moved = _split(newurl)
            fix = (f'if the server moved there, give LAVA_URL={moved.scheme}://'
                   f'{moved.netloc.rpartition("@")[2]}' if moved else 'check LAVA_URL')
            raise RemoteError(f'the LAVA server at {redact(req.full_url)} redirected to '
                              f'{redact(newurl)}, another scheme, host or port, where the LAVA '
                              f'token is not sent: {fix}')
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener(url: str) -> urllib.request.OpenerDirector:
    """urllib's handlers, with _SameOriginRedirects; no proxy for this machine's loopback
    (a proxy would carry the token off it)."""
    handlers: list[urllib.request.BaseHandler] = [_SameOriginRedirects()]
    parts = _split(url)
    if parts is not None and is_loopback(parts.hostname or ''):
        handlers.append(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener(*handlers)


def _call(s: Server, method: str, path: str, body: dict[str, object] | None = None) -> bytes:
    base = base_url(s.url, s.insecure_http)     # refused here, before any connection
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f'{base}{API}{path}', data=data, method=method, headers={
        'Authorization': f'Token {s.token}', 'Content-Type': 'application/json',
        'Accept': 'application/json, application/yaml'})
    try:
        with _opener(base).open(req, timeout=s.timeout) as r:
            out: bytes = r.read()
            return out
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors='replace').strip()[:500]
        if e.code in (401, 403):
            raise RemoteError(f'{s.shown} refused the token ({e.code}): check LAVA_TOKEN_FILE '
                              f'and that its user may submit jobs; {detail}') from None
        raise RemoteError(f'{method} {s.shown}{API}{path}: HTTP {e.code}: {detail}') from None
    except (urllib.error.URLError, OSError) as e:
        why = getattr(e, 'reason', e)
        raise RemoteError(f'cannot reach the LAVA server at {s.shown} ({why}): is it running? '
                          '(a local lab: tools/lava-lab.sh status)') from None


def _object(raw: bytes, what: str) -> dict[str, object]:
    try:
        d = json.loads(raw)
    except ValueError:
        d = None
    if not isinstance(d, dict):
        raise RemoteError(f'the LAVA server answered {what} with no JSON object: '
                          f'{raw[:200]!r}')
    return d


def version(s: Server) -> str:
    return str(_object(_call(s, 'GET', '/system/version/'), 'its version').get('version', ''))


def submit(s: Server, definition: str) -> int:
    """Submit one job; its id."""
    d = _object(_call(s, 'POST', '/jobs/', {'definition': definition}), 'a submission')
    ids = d.get('job_ids')
    if not isinstance(ids, list) or len(ids) != 1 or not isinstance(ids[0], int):
        raise RemoteError(f'{s.shown} took the job but gave no single job id: {d}')
    return ids[0]


def job(s: Server, job_id: int) -> JobState:
    d = _object(_call(s, 'GET', f'/jobs/{job_id}/'), f'job {job_id}')
    return JobState(job_id, str(d.get('state', '')), str(d.get('health', '')),
                    str(d.get('actual_device') or ''), str(d.get('start_time') or ''),
                    str(d.get('end_time') or ''))


def log(s: Server, job_id: int) -> str:
    """The job's log (results.read_log reads it)."""
    return _call(s, 'GET', f'/jobs/{job_id}/logs/').decode(errors='replace')
