"""What a session keeps of `initialize` (protocol/lifecycle.py) and the bounds on what it reads."""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.exceptions import InvalidParams
from aql_mcp.protocol.lifecycle import HandshakeLimits, client_info, kept_capabilities, kept_info


def params(info: Any, caps: Any) -> dict[str, Any]:
    return {"protocolVersion": "2025-11-25", "clientInfo": info, "capabilities": caps}


def test_kept_info_is_name_version_and_title_as_short_strings() -> None:
    info = {"name": "n" * 300, "version": 3, "title": "T", "icons": [{"src": "data:"}], "description": "d"}
    assert kept_info(info) == {"name": "n" * 256, "title": "T"}


def test_kept_capabilities_are_the_known_names_with_first_level_flags() -> None:
    caps = {
        "sampling": {"tools": {"deep": {"x": 1}}},
        "roots": {"listChanged": True, "weird": "text"},
        "elicitation": None,
        "unknown": {"a": {}},
    }
    assert kept_capabilities(caps) == {"sampling": {"tools": {}}, "roots": {"listChanged": True}, "elicitation": {}}


def test_a_capability_with_many_flags_keeps_a_bounded_number() -> None:
    kept = kept_capabilities({"experimental": {f"f{i}" + "x" * 100: {} for i in range(100)}})
    assert len(kept["experimental"]) == 32
    assert all(len(name) == 64 for name in kept["experimental"])


@pytest.mark.parametrize(("field", "reason"), [("clientInfo", "depth"), ("capabilities", "size")])
def test_bounds_are_checked_per_field(field: str, reason: str) -> None:
    limits = HandshakeLimits(max_bytes=1024, max_depth=4)
    value: dict[str, Any] = {"a": {"b": {"c": {"d": {}}}}} if reason == "depth" else {"a": "x" * 2000}
    sent = params(value, {}) if field == "clientInfo" else params({}, value)
    with pytest.raises(InvalidParams) as caught:
        client_info(sent, limits)
    assert caught.value.data["field"] == field
    assert caught.value.data["reason"] == reason


def test_values_at_the_bounds_are_accepted() -> None:
    limits = HandshakeLimits(max_bytes=1024, max_depth=4)
    info, caps = client_info(params({"name": "x", "a": {"b": {"c": {}}}}, {"roots": {"x": "y" * 900}}), limits)
    assert info == {"name": "x"}
    assert caps == {"roots": {}}
