"""Checks on the arguments' shape before any operation sees them (MCP-AQL §4.7.1, §4.7.5).

Invalid UTF-8 never gets here (the transport answers -32700); what can survive JSON parsing is
a NUL character, a lone surrogate (`"\\ud800"`) or a non-character, and those are refused with
`VALIDATION_INVALID_ENCODING`. Sizes are checked in one walk: string length (UTF-8 bytes),
array elements and nesting depth, the root object counting as level 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from aql_mcp.operations.results import VALIDATION_INVALID_ENCODING, VALIDATION_PAYLOAD_TOO_LARGE, OperationError

# NUL, lone surrogates and the non-characters U+FFFE/U+FFFF are not clean text.
UNCLEAN = re.compile("[\x00\ud800-\udfff\ufffe\uffff]")


@dataclass(frozen=True, slots=True)
class Limits:
    max_string_length: int
    max_array_elements: int
    max_nesting_depth: int


def check_payload(value: Any, limits: Limits) -> None:
    """Raise `OperationError` at the first unclean string or exceeded limit."""
    _walk(value, limits, "arguments", 1)


def _walk(value: Any, limits: Limits, location: str, depth: int) -> None:
    if isinstance(value, str):
        _check_string(value, limits, location)
    elif isinstance(value, dict):
        _check_depth(depth, limits)
        for key, item in value.items():
            _check_string(key, limits, location)
            _walk(item, limits, f"{location}.{key}", depth + 1)
    elif isinstance(value, list):
        _check_depth(depth, limits)
        if len(value) > limits.max_array_elements:
            raise too_large("array_elements", limits.max_array_elements, len(value), "elements", location)
        for index, item in enumerate(value):
            _walk(item, limits, f"{location}[{index}]", depth + 1)


def _check_string(value: str, limits: Limits, location: str) -> None:
    match = UNCLEAN.search(value)
    if match is not None:
        raise OperationError(
            VALIDATION_INVALID_ENCODING,
            "Invalid character encoding in request",
            {"location": location, "char_offset": match.start()},
        )
    # A character takes at most 4 bytes in UTF-8: only long strings are measured.
    if len(value) * 4 > limits.max_string_length:
        size = len(value.encode("utf-8"))
        if size > limits.max_string_length:
            raise too_large("string_length", limits.max_string_length, size, "bytes", location)


def _check_depth(depth: int, limits: Limits) -> None:
    if depth > limits.max_nesting_depth:
        raise too_large("nesting_depth", limits.max_nesting_depth, depth, "levels", None)


def too_large(kind: str, limit: int, actual: int, unit: str, location: str | None) -> OperationError:
    details: dict[str, Any] = {"limit_type": kind, "limit_value": limit, "actual_value": actual, "unit": unit}
    if location:
        details["location"] = location
    return OperationError(VALIDATION_PAYLOAD_TOO_LARGE, f"Payload exceeds {kind} limit of {limit}", details)
