# SPDX-License-Identifier: GPL-2.0
"""What every kloc KCIDB v5.3 submission shares: ids, test paths, statuses, records.

review/kcidb.py (a review's checkouts) and lava/kcidb.py (a LAVA run's) make
their submissions of these; schema.py checks them.

- Every id is "kloc:<run id>:<checkout>", its builds' "<checkout>:<kind>-<arch>",
  their tests' "<build>:<topology>:<path>" (a review's A/A side before the
  topology); the run id is new for each report (new_run_id), so no two
  reports share one.
- A path component is a KUnit name as it is when that is a valid one, and
  otherwise encoded reversibly (path_component, component_name). KUnit
  cases are kunit.<suite>.<case>, the harness's own checks (the topology
  check) kloc.harness.<...>; each run is a boot test.
- A case's status: PASS, FAIL and SKIP as kloc's; a crashed case FAILs, and
  one the crash cut off (ktap's "never ran") is MISS; any other ERROR.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import time
import urllib.parse
from pathlib import Path

from kloc.guests import guest
from kloc.kcidb.schema import LOG_EXCERPT_MAX, MAJOR, MINOR, SHA1_RE
from kloc.qemu import topology
from kloc.trees.sources import Tree

ORIGIN = 'kloc'
# Suites the harness adds to a run's results (runner.check_topology): checks of
# the machine the kernel saw, not KUnit cases.
HARNESS_SUITES = ('kloc_topology',)
# The names ktap gives the cases and suites a crash cut off.
NEVER_RAN = re.compile(r'\((?:case|suite) \d+ of \d+: never ran\)')
# Each run's boot test: FAIL, with this comment, when the kernel printed no KTAP.
BOOT = 'boot'
NO_KTAP_COMMENT = 'the kernel printed no KTAP: it did not boot, or hung before KUnit'
KUNIT_CONFIG = 'kunit'      # a KUnit kernel's config_name

_KEPT = re.compile(r'[A-Za-z0-9_][A-Za-z0-9_-]*')
_STATUS = {'PASS': 'PASS', 'FAIL': 'FAIL', 'SKIP': 'SKIP', 'CRASHED': 'FAIL'}
# The root compatible of QEMU's arm64 virt machine's device tree.
_COMPATIBLE = {'arm64': ['linux,dummy-virt']}

Record = dict[str, object]


def new_run_id() -> str:
    """This report's part of every id: the time, and 32 random bits."""
    return time.strftime('%Y%m%dT%H%M%SZ', time.gmtime()) + '-' + secrets.token_hex(4)


def checkout_id(run_id: str, name: str) -> str:
    return f'{ORIGIN}:{run_id}:{name}'


def build_id(checkout: str, kind: str, arch: str) -> str:
    return f'{checkout}:{kind}-{arch}'


def test_id(build: str, topo: str, path: str, side: str = '') -> str:
    """side: where two sides share a build (an A/A review), the one that ran it."""
    return f'{build}:{side + ":" if side else ""}{topo}:{path}'


def _escape(c: str) -> str:
    if c.isascii() and c.isalnum():
        return c
    return {' ': '-', '_': '__'}.get(c) or \
        ''.join(f'_{b:02x}' for b in c.encode('utf-8', 'surrogatepass'))


def path_component(name: str) -> str:
    """One name as a path component: itself if it is a valid one not starting with
    "-"; else "-" and its characters, [A-Za-z0-9] as they are, a space as "-", "_" as
    "__" and any other as "_" and two hex digits per UTF-8 byte ("64K flat on node 0":
    "-64K-flat-on-node-0"). Injective: component_name undoes it."""
    if _KEPT.fullmatch(name):
        return name
    return '-' + ''.join(map(_escape, name))


def component_name(component: str) -> str:
    """The name path_component made component of."""
    if not component.startswith('-'):
        return component
    out, i = bytearray(), 1
    while i < len(component):
        c = component[i]
        if c == '_' and component[i + 1:i + 2] == '_':
            out += b'_'
            i += 2
        elif c == '_':
            out.append(int(component[i + 1:i + 3], 16))
            i += 3
        else:
            out += b' ' if c == '-' else c.encode()
            i += 1
    return out.decode('utf-8', 'surrogatepass')


def test_path(*names: str) -> str:
    return '.'.join(path_component(n) for n in names)


def case_path(case: str) -> str:
    """A kloc case path (suite.case[.param]) as a KCIDB test path."""
    names = case.split('.')
    root = ('kloc', 'harness') if names[0] in HARNESS_SUITES else ('kunit',)
    return test_path(*root, *names)


def status_of(kloc_status: str) -> str:
    """A case's KCIDB status from kloc's (PASS, FAIL, SKIP, CRASHED): ERROR for any other."""
    return _STATUS.get(kloc_status, 'ERROR')


def case_status(kloc_status: str, case: str) -> str:
    """A KUnit case's KCIDB status (case: its kloc path): MISS where a crash cut it off."""
    if kloc_status == 'CRASHED' and NEVER_RAN.fullmatch(case.rsplit('.', 1)[-1]):
        return 'MISS'
    return status_of(kloc_status)


def guest_config(allocator: str, arch: str) -> str:
    """A guest kernel's config_name: tinyconfig and its fragments (guests/guest.py)."""
    return 'tinyconfig+' + '+'.join(p.stem for p in guest.fragments(allocator, arch))


def _git(path: Path, *args: str) -> str:
    try:
        r = subprocess.run(['git', '-C', str(path), *args], capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ''
    return r.stdout.strip() if r.returncode == 0 else ''


def _public_url(url: str) -> str:
    """An https remote without any user or password in it; '' for any other."""
    try:
        u = urllib.parse.urlsplit(url)
        host = u.hostname
        port = u.port
    except ValueError:
        return ''
    if u.scheme != 'https' or not host:
        return ''
    return urllib.parse.urlunsplit(('https', host + (f':{port}' if port else ''), u.path,
                                    '', ''))


def tree_name(url: str) -> str:
    """The tree's usual name from its remote: torvalds/linux is mainline, any other the
    repository's name (net-next, linux-stable)."""
    parts = [p for p in urllib.parse.urlsplit(url).path.split('/') if p]
    if not parts:
        return ''
    name = parts[-1].removesuffix('.git')
    return 'mainline' if parts[-2:-1] == ['torvalds'] and name == 'linux' else name


def source_identity(tree: Tree) -> Record:
    """A git tree's commit, its name, branch, remote and tree name; nothing for a tree
    that is not one (a Debian linux-source tree)."""
    if not (tree.path / '.git').exists():
        return {}
    commit = _git(tree.path, 'rev-parse', 'HEAD')
    if not SHA1_RE.fullmatch(commit):
        return {}
    out: Record = {'git_commit_hash': commit}
    name = _git(tree.path, 'describe', '--tags', '--always')
    branch = _git(tree.path, 'symbolic-ref', '--short', '-q', 'HEAD')
    url = _public_url(_git(tree.path, 'config', '--get', 'remote.origin.url'))
    for key, value in (('git_commit_name', name), ('git_repository_branch', branch),
                       ('git_repository_url', url), ('tree_name', url and tree_name(url))):
        if value:
            out[key] = value
    return out


def excerpt(lines: list[str]) -> str:
    """Log lines as a log_excerpt: no NUL, the last LOG_EXCERPT_MAX characters."""
    text = '\n'.join(lines).replace('\0', '')
    cut = '[...]\n'
    return text if len(text) <= LOG_EXCERPT_MAX else cut + text[-(LOG_EXCERPT_MAX - len(cut)):]


def environment(topo_name: str, **extra: object) -> Record:
    """The QEMU machine a test ran on."""
    t = topology.get(topo_name)
    misc: Record = {'topology': t.name, 'arch': t.arch, 'qemu': f'qemu-system-{t.qemu_arch}',
                    'machine_args': t.machine_args(),
                    'nodes': [{'cpus': n.cpus, 'mem_mb': n.mem_mb} for n in t.nodes],
                    'its_node': t.its_node}
    env: Record = {'comment': f'QEMU {t.qemu_arch} {t.name}: {t.about}',
                   'misc': misc | extra}
    if t.arch in _COMPATIBLE:
        env['compatible'] = list(_COMPATIBLE[t.arch])
    return env


def number(value: float, unit: str) -> Record:
    """A test's number: its unit, none for a ratio (the schema: dimensionless); packets/s
    with the metric prefix."""
    n: Record = {'value': value}
    if unit and unit != 'ratio':
        n['unit'] = unit
    if unit == 'packets/s':
        n['prefix'] = 'metric'
    return n


def checkout_record(cid: str, comment: str, identity: Record, misc: Record,
                    patchset_hash: str = '') -> Record:
    """A checkout: identity is source_identity's; patchset_hash '' for the tree alone."""
    return {'id': cid, 'origin': ORIGIN, 'patchset_hash': patchset_hash, 'comment': comment,
            'valid': True, **identity, 'misc': misc}


def build_record(checkout: str, tree: Tree, kind: str, arch: str, config: str,
                 misc: Record) -> Record:
    """A kernel kloc built (kind: kunit, guest...) of tree, for arch."""
    return {'id': build_id(checkout, kind, arch), 'checkout_id': checkout,
            'origin': ORIGIN, 'architecture': arch, 'config_name': config, 'status': 'PASS',
            'comment': f'Linux {tree.version} {kind} kernel, {arch}', 'misc': misc}


def test_record(build: str, topo: str, path: str, status: str, env: Record, side: str = '',
                **fields: object) -> Record:
    """A test of build on topology topo; side as test_id's."""
    return {'id': test_id(build, topo, path, side), 'build_id': build, 'origin': ORIGIN,
            'path': path, 'status': status, 'environment': env, **fields}


def submission(checkouts: list[Record], builds: list[Record], tests: list[Record]) -> Record:
    """One KCIDB v5.3 submission of these."""
    return {'version': {'major': MAJOR, 'minor': MINOR}, 'checkouts': checkouts,
            'builds': builds, 'tests': tests}
