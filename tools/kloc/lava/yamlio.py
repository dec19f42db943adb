# SPDX-License-Identifier: GPL-2.0
"""YAML in and out, with Debian's python3-yaml (which has no type stubs)."""

from __future__ import annotations

from typing import Any

import yaml  # type: ignore[import]

from kloc.errors import KlocError


class YamlError(KlocError):
    """A YAML document that cannot be read."""


def dump(data: dict[str, object]) -> str:
    """Block-style YAML in the order given, one line per value; it reads back equal."""
    text = str(yaml.safe_dump(data, sort_keys=False, default_flow_style=False,
                              width=100000, allow_unicode=True))
    if load(text) != data:
        raise YamlError('a document did not survive a YAML round trip')
    return text


def load(text: str) -> Any:
    try:
        return yaml.load(text, Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise YamlError(f'not YAML: {e}') from e
