# SPDX-License-Identifier: GPL-2.0
"""The device: a LAVA device dictionary, rendered with lava-server's qemu.jinja2.

lava-server renders a device's dictionary (which extends its device-type
template) with the job's context each time it schedules a job
(lava_scheduler_app.models.Device.load_configuration): a Jinja2
SandboxedEnvironment over the dictionaries and the device-type templates,
autoescape off, trim_blocks on. This does the same, with the templates of
Debian's lava-server package of the installed lava-dispatcher's version,
downloaded and unpacked into $KLOC_CACHE/lava-server/<version> without
installing it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from kloc import filelock, progress
from kloc.trees import archive
from kloc.errors import KlocError

DISPATCHER = 'lava-dispatcher'
SERVER = 'lava-server'
TEMPLATES = Path('usr/share/lava-server/device-types')
DEVICE_TYPE_TEMPLATE = 'qemu.jinja2'
HOSTNAME = 'qemu-kloc01'

# The device dictionary of one QEMU device of a worker. Everything the jobs
# need comes from their context (arch, memory, no_kvm, extra_options): a
# dictionary must not set those, or it would override every job's.
DICTIONARY = """\
{# kloc: one QEMU device of a worker, for the jobs of make lava (docs/lava.md). #}
{# Its jobs bring the machine in their context: arch, memory, machine, cpu, no_kvm #}
{# and extra_options (the topology's -smp, -object and -numa options, and the rest). #}
{% extends 'qemu.jinja2' %}
"""


class DeviceError(KlocError):
    """The device-type template cannot be had, or does not render."""


def installed_version(package: str = DISPATCHER) -> str:
    """The installed version of a Debian package; DeviceError if it is not installed."""
    try:
        r = subprocess.run(['dpkg-query', '-W', '-f', '${Version}', package],
                           capture_output=True, text=True)
    except FileNotFoundError:
        raise DeviceError('dpkg-query not found: the LAVA jobs run with Debian\'s '
                          f'{package}') from None
    if r.returncode or not r.stdout.strip():
        raise DeviceError(f'{package} is not installed: lava-run comes with it; install it '
                          f'with make deps (apt-get install {package})')
    return r.stdout.strip()


def templates(cache: Path, version: str | None = None) -> Path:
    """lava-server's device-type templates of the version of the installed lava-dispatcher,
    unpacked once from the Debian package (apt-get download, dpkg-deb -x)."""
    version = version or installed_version()
    dest = cache / SERVER / version
    if (dest / TEMPLATES / DEVICE_TYPE_TEMPLATE).is_file():
        return dest / TEMPLATES
    # Two commands at once download it once: the second waits, then finds it.
    with filelock.exclusive(dest.parent / '.lock'):
        if not (dest / TEMPLATES / DEVICE_TYPE_TEMPLATE).is_file():
            _download(version, dest)
    return dest / TEMPLATES


def _download(version: str, dest: Path) -> None:
    pkg = f'{SERVER}={version}'
    progress.say(f'downloading {pkg} for its {DEVICE_TYPE_TEMPLATE} (unpacked, not '
                 f'installed, into {dest})')
    with tempfile.TemporaryDirectory(prefix='kloc-lava-server-', dir=dest.parent) as tmp:
        r = subprocess.run(['apt-get', 'download', pkg], cwd=tmp, capture_output=True,
                           text=True)
        debs = list(Path(tmp).glob(f'{SERVER}_*.deb'))
        if r.returncode or not debs:
            raise DeviceError(f'cannot download {pkg} (apt-get download: '
                              f'{r.stderr.strip() or "no .deb"}); its {DEVICE_TYPE_TEMPLATE} '
                              'renders the device dictionary. Check the apt sources, or '
                              f'unpack the package into {dest} by hand (dpkg-deb -x)')
        unpacked = Path(tmp) / 'x'
        archive.unpack_deb(debs[0], unpacked)
        if not (unpacked / TEMPLATES / DEVICE_TYPE_TEMPLATE).is_file():
            raise DeviceError(f'{debs[0].name} has no {TEMPLATES / DEVICE_TYPE_TEMPLATE}')
        shutil.rmtree(dest, ignore_errors=True)
        unpacked.rename(dest)


def render(dictionary: Path, types: Path, context: dict[str, object]) -> str:
    """The device configuration lava-run takes, for a job with this context."""
    from jinja2 import FileSystemLoader, TemplateError
    from jinja2.sandbox import SandboxedEnvironment
    env = SandboxedEnvironment(loader=FileSystemLoader([str(dictionary.parent), str(types)]),
                               autoescape=False, trim_blocks=True, cache_size=-1)
    try:
        return env.get_template(dictionary.name).render(**context)
    except TemplateError as e:
        raise DeviceError(f'{dictionary} does not render with {types}: {e}') from e
