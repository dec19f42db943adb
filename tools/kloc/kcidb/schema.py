# SPDX-License-Identifier: GPL-2.0
"""KCIDB v5.3 submissions checked against the published schema's rules.

Written from kcidb_io/schema/v05_03.py of github.com/kernelci/kcidb-io (the
latest version there), without jsonschema: every object's properties and
no others, the required ones, their types, the patterns of ids, origins,
hashes, architectures and test paths, status and prefix values, the
formats of times and URLs, log excerpts of at most 16384 characters, no
NUL outside misc, and the version (major 5, minor 0 to 3).

Beyond the JSON schema, what its descriptions say: an object's id starts
with its origin and a colon, and is unique among the objects of its type.
With complete=True (kloc's own submissions, which carry everything), every
build's checkout and every test's build must be in the submission too; the
schema lets a partial submission refer to objects sent elsewhere.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Callable, Iterable
from datetime import datetime

from kloc.errors import KlocError

MAJOR, MINOR = 5, 3

STATUSES = ('FAIL', 'ERROR', 'MISS', 'PASS', 'DONE', 'SKIP')   # in priority order
PREFIXES = ('metric', 'binary')
LOG_EXCERPT_MAX = 16384

ORIGIN_RE = re.compile(r'[a-z0-9_]+')
ID_RE = re.compile(r'([a-z0-9_]+):[^\0]*')
PATH_RE = re.compile(r'([a-zA-Z0-9_-]+(\.[a-zA-Z0-9_-]+)*)?')
SHA1_RE = re.compile(r'[0-9a-f]{40}')
SHA256_OR_EMPTY_RE = re.compile(r'|[0-9a-f]{64}')
ARCH_RE = re.compile(r'[a-z0-9_]*')
NO_NUL_RE = re.compile(r'[^\0]*')
RESOURCE_NAME_RE = re.compile(r'[^/\0]+')
COMPATIBLE_RE = re.compile(r'[^ \0]+(,[^ \0]+)*')
GIT_URL_RE = re.compile(r'https://[^\0]*')
_DATE_TIME = re.compile(r'\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(\.\d+)?([Zz]|[+-]\d\d:\d\d)')
_SCHEME = re.compile(r'[A-Za-z][A-Za-z0-9+.-]*')


class SchemaError(KlocError):
    """A KCIDB submission breaks the schema; the message lists every problem."""


# A check of one value: the problems found, each prefixed with where.
Check = Callable[[object, str], list[str]]


def _string(pattern: re.Pattern[str] | None = NO_NUL_RE, max_len: int | None = None,
            fmt: str = '') -> Check:
    def check(v: object, where: str) -> list[str]:
        if not isinstance(v, str):
            return [f'{where}: {v!r} is not a string']
        if pattern is not None and not pattern.fullmatch(v):
            return [f'{where}: {v!r} does not match {pattern.pattern}']
        if max_len is not None and len(v) > max_len:
            return [f'{where}: {len(v)} characters, more than {max_len}']
        if fmt and not _FORMATS[fmt](v):
            return [f'{where}: {v!r} is not a {fmt}']
        return []
    return check


def _date_time(v: str) -> bool:
    if not _DATE_TIME.fullmatch(v):
        return False
    try:
        datetime.fromisoformat(v.upper().replace('Z', '+00:00'))
    except ValueError:
        return False
    return True


def _uri(v: str) -> bool:
    scheme, colon, rest = v.partition(':')
    if not colon or not _SCHEME.fullmatch(scheme) or any(c.isspace() for c in v):
        return False
    try:
        urllib.parse.urlsplit(v)
    except ValueError:
        return False
    return True


def _email(v: str) -> bool:
    local, at, domain = v.rpartition('@')
    return bool(at and local and domain) and not any(c.isspace() for c in v)


_FORMATS: dict[str, Callable[[str], bool]] = {'date-time': _date_time, 'uri': _uri,
                                              'email': _email}


def _enum(values: Iterable[str]) -> Check:
    allowed = tuple(values)

    def check(v: object, where: str) -> list[str]:
        return [] if isinstance(v, str) and v in allowed else \
            [f'{where}: {v!r} is not one of {", ".join(allowed)}']
    return check


def _boolean(v: object, where: str) -> list[str]:
    return [] if isinstance(v, bool) else [f'{where}: {v!r} is not a boolean']


def _number(v: object, where: str) -> list[str]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return [f'{where}: {v!r} is not a number']
    return [] if math.isfinite(v) else [f'{where}: {v!r} is not a finite number (JSON)']


def _integer(minimum: int | None = None) -> Check:
    def check(v: object, where: str) -> list[str]:
        if isinstance(v, bool) or not isinstance(v, int):
            return [f'{where}: {v!r} is not an integer']
        if minimum is not None and v < minimum:
            return [f'{where}: {v} is under {minimum}']
        return []
    return check


def _misc(v: object, where: str) -> list[str]:
    """Free-form: any JSON object (NUL allowed)."""
    return [] if isinstance(v, dict) else [f'{where}: {v!r} is not an object']


def _array(item: Check) -> Check:
    def check(v: object, where: str) -> list[str]:
        if not isinstance(v, list):
            return [f'{where}: {v!r} is not an array']
        return [p for i, x in enumerate(v) for p in item(x, f'{where}[{i}]')]
    return check


def _object(props: dict[str, Check], required: tuple[str, ...] = ()) -> Check:
    """An object with these properties and no others (additionalProperties: false)."""
    def check(v: object, where: str) -> list[str]:
        if not isinstance(v, dict):
            return [f'{where}: {v!r} is not an object']
        out = [f'{where}: {k!r} is required and missing' for k in required if k not in v]
        for k, x in v.items():
            if k not in props:
                out.append(f'{where}: {k!r} is not a property the schema has')
            else:
                out += props[k](x, f'{where}.{k}')
        return out
    return check


TEXT = _string()
TIME = _string(None, fmt='date-time')
URI = _string(None, fmt='uri')
ID = _string(ID_RE)
ORIGIN = _string(ORIGIN_RE)
EXCERPT = _string(NO_NUL_RE, LOG_EXCERPT_MAX)
RESOURCES = _array(_object({'name': _string(RESOURCE_NAME_RE), 'url': URI}, ('name', 'url')))

CHECKOUT = _object({
    '_timestamp': TIME, 'id': ID, 'origin': ORIGIN, 'tree_name': TEXT,
    'git_repository_url': _string(GIT_URL_RE, fmt='uri'),
    'git_commit_hash': _string(SHA1_RE), 'git_commit_name': TEXT,
    'git_commit_tags': _array(TEXT), 'git_commit_message': TEXT,
    'git_repository_branch': TEXT, 'git_repository_branch_tip': _boolean,
    'patchset_files': RESOURCES, 'patchset_hash': _string(SHA256_OR_EMPTY_RE),
    'message_id': _string(None, fmt='email'), 'comment': TEXT, 'start_time': TIME,
    'origin_builds_finish_time': TIME, 'origin_tests_finish_time': TIME,
    'log_url': URI, 'log_excerpt': EXCERPT, 'valid': _boolean, 'misc': _misc,
}, ('id', 'origin'))

BUILD = _object({
    '_timestamp': TIME, 'checkout_id': ID, 'id': ID, 'origin': ORIGIN, 'comment': TEXT,
    'start_time': TIME, 'duration': _number, 'architecture': _string(ARCH_RE),
    'command': TEXT, 'compiler': TEXT, 'input_files': RESOURCES, 'output_files': RESOURCES,
    'config_name': TEXT, 'config_url': URI, 'log_url': URI, 'log_excerpt': EXCERPT,
    'status': _enum(STATUSES), 'misc': _misc,
}, ('checkout_id', 'id', 'origin'))

ENVIRONMENT = _object({'compatible': _array(_string(COMPATIBLE_RE)), 'comment': TEXT,
                       'misc': _misc})
NUMBER = _object({'value': _number, 'unit': TEXT, 'prefix': _enum(PREFIXES)}, ('value',))

TEST = _object({
    '_timestamp': TIME, 'build_id': ID, 'id': ID, 'origin': ORIGIN,
    'environment': ENVIRONMENT, 'path': _string(PATH_RE), 'comment': TEXT, 'log_url': URI,
    'log_excerpt': EXCERPT, 'status': _enum(STATUSES), 'number': NUMBER, 'start_time': TIME,
    'duration': _number, 'input_files': RESOURCES, 'output_files': RESOURCES, 'misc': _misc,
}, ('build_id', 'id', 'origin'))

ISSUE = _object({
    '_timestamp': TIME, 'id': ID, 'version': _integer(0), 'origin': ORIGIN,
    'categories': _array(_string(PATH_RE)), 'report_url': URI, 'report_subject': TEXT,
    'culprit': _object({'code': _boolean, 'tool': _boolean, 'harness': _boolean}),
    'comment': TEXT, 'misc': _misc,
}, ('id', 'version', 'origin'))

INCIDENT = _object({
    '_timestamp': TIME, 'id': ID, 'origin': ORIGIN, 'issue_id': ID,
    'issue_version': _integer(0), 'build_id': ID, 'test_id': ID, 'present': _boolean,
    'comment': TEXT, 'misc': _misc,
}, ('id', 'origin', 'issue_id', 'issue_version'))

KINDS: dict[str, Check] = {'checkouts': CHECKOUT, 'builds': BUILD, 'tests': TEST,
                           'issues': ISSUE, 'incidents': INCIDENT}


def _version(v: object, where: str) -> list[str]:
    out = _object({'major': _integer(), 'minor': _integer(0)}, ('major',))(v, where)
    if out or not isinstance(v, dict):
        return out
    if v['major'] != MAJOR:
        out.append(f'{where}.major: {v["major"]}, this schema is major {MAJOR}')
    if v.get('minor', 0) > MINOR:
        out.append(f'{where}.minor: {v["minor"]}, this schema goes up to {MINOR}')
    return out


def _strings(v: object, where: str) -> list[str]:
    """No NUL in any string outside misc (as v5.0 made it)."""
    if isinstance(v, str):
        return [f'{where}: holds a NUL character'] if '\0' in v else []
    if isinstance(v, list):
        return [p for i, x in enumerate(v) for p in _strings(x, f'{where}[{i}]')]
    if isinstance(v, dict):
        return [p for k, x in v.items() if k != 'misc' for p in _strings(x, f'{where}.{k}')]
    return []


def _identities(data: dict[str, object], complete: bool) -> list[str]:
    """Ids that start with their origin and are unique; references that resolve."""
    out: list[str] = []
    ids: dict[str, set[str]] = {}
    for kind in KINDS:
        objs = data.get(kind, [])
        seen = ids.setdefault(kind, set())
        for i, obj in enumerate(objs if isinstance(objs, list) else []):
            if not isinstance(obj, dict) or not isinstance(obj.get('id'), str):
                continue
            where, oid = f'{kind}[{i}]', obj['id']
            if oid in seen:
                out.append(f'{where}.id: {oid!r} is used by another of the {kind}')
            seen.add(oid)
            m = ID_RE.fullmatch(oid)
            if m and isinstance(obj.get('origin'), str) and m.group(1) != obj['origin']:
                out.append(f'{where}.id: {oid!r} does not start with its origin '
                           f'{obj["origin"]!r} and a colon')
    if complete:
        for kind, field, target in (('builds', 'checkout_id', 'checkouts'),
                                    ('tests', 'build_id', 'builds')):
            objs = data.get(kind, [])
            for i, obj in enumerate(objs if isinstance(objs, list) else []):
                ref = obj.get(field) if isinstance(obj, dict) else None
                if isinstance(ref, str) and ref not in ids[target]:
                    out.append(f'{kind}[{i}].{field}: {ref!r} is none of the {target}')
    return out


def problems(data: object, complete: bool = True) -> list[str]:
    """Everything in data that breaks the v5.3 schema's rules; [] if nothing does."""
    if not isinstance(data, dict):
        return [f'the submission {data!r} is not an object']
    props: dict[str, Check] = {'version': _version, **{k: _array(c) for k, c in KINDS.items()}}
    out = _object(props, ('version',))(data, '')
    return [p.lstrip('.') for p in out + _strings(data, '') + _identities(data, complete)]


def validate(data: object, complete: bool = True) -> None:
    """SchemaError, listing every problem, unless data is a valid submission."""
    found = problems(data, complete)
    if found:
        raise SchemaError('not a valid KCIDB v5.3 submission:\n  ' + '\n  '.join(found))
