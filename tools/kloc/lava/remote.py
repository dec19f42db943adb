# SPDX-License-Identifier: GPL-2.0
"""A LAVA server's REST API (v0.2): submit a job, read its state and its log.

The calls lavacli makes, with the standard library: POST /api/v0.2/jobs/
with the definition, GET /api/v0.2/jobs/<id>/ for its state and health,
GET /api/v0.2/jobs/<id>/logs/ for its log. The token goes in an
"Authorization: Token <token>" header (lava_rest_app's token
authentication). The server's log has the lines lava-run prints, each as an
item of a YAML list ("- {...}"), which results.read_log() reads.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kloc.errors import KlocError

API = '/api/v0.2'
# A job's states (lava_scheduler_app.models.TestJob.STATE_CHOICES) and healths.
FINISHED = 'Finished'
COMPLETE = 'Complete'


class RemoteError(KlocError):
    """The LAVA server cannot be reached, refuses the token or the job."""


@dataclass(frozen=True)
class Server:
    url: str            # scheme://host[:port], no trailing slash
    token: str
    timeout: float = 60.0

    def job_url(self, job_id: int) -> str:
        """The job's page, for people."""
        return f'{self.url}/scheduler/job/{job_id}'


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


def server(url: str, token: str = '', token_file: str = '') -> Server:
    """The server of LAVA_URL, with the token of LAVA_TOKEN or LAVA_TOKEN_FILE."""
    parts = urlsplit(url)
    if parts.scheme not in ('http', 'https') or not parts.netloc:
        raise RemoteError(f'LAVA_URL={url!r} is not an http(s) URL of a LAVA server: give '
                          'e.g. LAVA_URL=http://127.0.0.1:8042 (tools/lava-lab.sh setup prints '
                          "a local lab's)")
    if token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as e:
            raise RemoteError(f'LAVA_TOKEN_FILE={token_file}: {e.strerror}') from None
    if not token:
        raise RemoteError('a LAVA server needs a token: give LAVA_TOKEN_FILE= (a file holding '
                          'it) or LAVA_TOKEN=; lava-server manage tokens add --user <you> '
                          'makes one')
    return Server(f'{parts.scheme}://{parts.netloc}{parts.path.rstrip("/")}', token)


def _call(s: Server, method: str, path: str, body: dict[str, object] | None = None) -> bytes:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f'{s.url}{API}{path}', data=data, method=method, headers={
        'Authorization': f'Token {s.token}', 'Content-Type': 'application/json',
        'Accept': 'application/json, application/yaml'})
    try:
        with urllib.request.urlopen(req, timeout=s.timeout) as r:
            out: bytes = r.read()
            return out
    except urllib.error.HTTPError as e:
        detail = e.read().decode(errors='replace').strip()[:500]
        if e.code in (401, 403):
            raise RemoteError(f'{s.url} refused the token ({e.code}): check LAVA_TOKEN_FILE '
                              f'and that its user may submit jobs; {detail}') from None
        raise RemoteError(f'{method} {s.url}{API}{path}: HTTP {e.code}: {detail}') from None
    except (urllib.error.URLError, OSError) as e:
        why = getattr(e, 'reason', e)
        raise RemoteError(f'cannot reach the LAVA server at {s.url} ({why}): is it running? '
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
        raise RemoteError(f'{s.url} took the job but gave no single job id: {d}')
    return ids[0]


def job(s: Server, job_id: int) -> JobState:
    d = _object(_call(s, 'GET', f'/jobs/{job_id}/'), f'job {job_id}')
    return JobState(job_id, str(d.get('state', '')), str(d.get('health', '')),
                    str(d.get('actual_device') or ''), str(d.get('start_time') or ''),
                    str(d.get('end_time') or ''))


def log(s: Server, job_id: int) -> str:
    """The job's log (results.read_log reads it)."""
    return _call(s, 'GET', f'/jobs/{job_id}/logs/').decode(errors='replace')
