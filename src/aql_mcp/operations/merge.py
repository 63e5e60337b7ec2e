"""Deep merge of an UPDATE `input` object (MCP-AQL §4.5.1, §4.5.2).

Objects merge key by key, recursively; arrays and scalars replace; `null` removes the key.
"""

from __future__ import annotations

from typing import Any


def deep_merge(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A new object: `current` with `patch` merged in; neither argument is changed."""
    merged = dict(current)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        elif isinstance(value, dict):
            merged[key] = deep_merge({}, value)
        else:
            merged[key] = value
    return merged
