"""`endpoint/modern/reply.py`: a -32021 raised once the answer streams is logged for the plugin author."""

from __future__ import annotations

import pytest
from starlette.types import Message
from structlog.testing import capture_logs

from aql_mcp.endpoint.modern.reply import Reply
from aql_mcp.endpoint.modern.request_state import RoundState
from aql_mcp.endpoint.modern.rounds import InputRound
from aql_mcp.exceptions import MissingClientCapability

pytestmark = pytest.mark.anyio


async def test_a_missing_capability_after_the_stream_started_is_logged_before_it_is_not() -> None:
    """2026-07-28 basic: -32021 MUST be a 400; once a progress event sent the 200 it cannot be, so
    the edge logs which method and capability did it (docs/eras.md, "Asking the client")."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    reply = Reply(send, method="tools/call", inputs=InputRound(RoundState(), {}), keepalive_seconds=0)
    with capture_logs() as quiet:
        assert isinstance(reply.missing_capability("sampling"), MissingClientCapability)
    await reply.notify("notifications/progress", {"progressToken": 1, "progress": 0})
    with capture_logs() as logged:
        assert isinstance(reply.missing_capability("sampling"), MissingClientCapability)
    assert quiet == []
    assert logged == [
        {
            "event": "capability_missing_after_streaming",
            "method": "tools/call",
            "capability": "sampling",
            "log_level": "warning",
        }
    ]
    assert sent[0]["status"] == 200
