"""Field selection (MCP-AQL field selection): presets and dot paths.

`fields` is a preset name (`minimal`, `standard`, `full`, or one the operation declares) or a
list of dot paths; nested paths keep their structure, missing fields are skipped silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aql_mcp.operations.results import VALIDATION_INVALID_TYPE, OperationError

Selection = tuple[str, ...] | None  # None: every field


def resolve_selection(fields: str | list[str] | None, presets: Mapping[str, Selection], default: str) -> Selection:
    """The dot paths to keep, from a preset name or an explicit list."""
    if fields is None:
        fields = default
    if isinstance(fields, str):
        if fields not in presets:
            raise OperationError(
                VALIDATION_INVALID_TYPE,
                f"Parameter 'fields' expected one of the presets {sorted(presets)} or a list of field paths",
                {
                    "param_name": "fields",
                    "expected_type": "preset or array",
                    "actual_type": "string",
                    "presets": sorted(presets),
                },
            )
        return presets[fields]
    return tuple(fields)


def select(item: Mapping[str, Any], paths: Selection) -> dict[str, Any]:
    """The parts of `item` named by `paths`, keeping the nesting of dot paths."""
    if paths is None:
        return dict(item)
    out: dict[str, Any] = {}
    for path in paths:
        _copy(item, out, path.split("."))
    return out


def _copy(source: Mapping[str, Any], target: dict[str, Any], parts: list[str]) -> None:
    head, rest = parts[0], parts[1:]
    if head not in source:
        return
    value = source[head]
    if not rest:
        target[head] = value
        return
    if isinstance(value, Mapping):
        branch = target.setdefault(head, {})
        if isinstance(branch, dict):
            _copy(value, branch, rest)
