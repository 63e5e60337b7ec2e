"""Which sessions MCP 2025-11-25 tasks exist for, and the task of an execution."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from aql_mcp.exceptions import InvalidParams
from aql_mcp.executions.tasks import _offset, negotiated
from aql_mcp.protocol.context import Context


@dataclass
class Peer:
    protocol_version: str
    client_capabilities: Mapping[str, Any] = field(default_factory=dict)


def _ctx(peer: Peer | None) -> Context:
    return Context(request_id="r", message_id=1, peer=peer, principal=None, outbound=None, hub=None)  # type: ignore[arg-type]


def test_tasks_exist_only_for_a_legacy_session_whose_client_declared_them() -> None:
    assert negotiated(_ctx(Peer("2025-11-25", {"tasks": {}})))
    assert not negotiated(_ctx(Peer("2025-11-25", {})))
    assert not negotiated(_ctx(Peer("2026-07-28", {"tasks": {}})))
    assert not negotiated(_ctx(None))


def test_a_list_cursor_is_opaque_and_a_forged_one_is_invalid_params() -> None:
    assert _offset(None) == 0
    assert _offset(base64.urlsafe_b64encode(b"50").decode()) == 50
    for forged in ("!!", base64.urlsafe_b64encode(b"-1").decode(), base64.urlsafe_b64encode(b"99999").decode()):
        with pytest.raises(InvalidParams):
            _offset(forged)
