"""Which sessions MCP 2025-11-25 tasks exist for, and the task of an execution."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from aql_mcp.exceptions import InvalidParams
from aql_mcp.plugins.executions.legacy_tasks import _cursor, negotiated
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


def test_a_list_cursor_is_an_opaque_key_and_a_forged_one_is_invalid_params() -> None:
    assert _cursor(None) is None
    assert _cursor(base64.urlsafe_b64encode(b'[1.5, "exec_a"]').decode()) == (1.5, "exec_a")
    forged = [b"50", b"[1]", b'["x", "y"]', b'[true, "y"]', b"not json", b"{}"]
    for cursor in ["!!", *(base64.urlsafe_b64encode(raw).decode() for raw in forged)]:
        with pytest.raises(InvalidParams):
            _cursor(cursor)
