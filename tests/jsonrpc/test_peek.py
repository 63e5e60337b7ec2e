"""`jsonrpc/peek.py`: a request body read ahead of the endpoint and handed on unchanged, and what is
read from it (docs/eras.md, "How the era of a request is decided")."""

from __future__ import annotations

import orjson
import pytest
from starlette.types import Message

from aql_mcp.jsonrpc.peek import HeldBody, meta_text, request_id

pytestmark = pytest.mark.anyio
KEY = "io.modelcontextprotocol/protocolVersion"


def chunks(*parts: bytes) -> list[Message]:
    last = len(parts) - 1
    return [{"type": "http.request", "body": part, "more_body": i < last} for i, part in enumerate(parts)]


class Source:
    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages

    async def __call__(self) -> Message:
        return self.messages.pop(0) if self.messages else {"type": "http.disconnect"}


async def test_the_body_read_ahead_is_handed_on_in_the_same_messages() -> None:
    sent = chunks(b'{"jsonrpc":', b'"2.0"}')
    held = HeldBody(Source(list(sent)))
    assert await held.read() == b'{"jsonrpc":"2.0"}'
    assert [await held.receive(), await held.receive()] == sent
    assert await held.receive() == {"type": "http.disconnect"}


async def test_reading_stops_past_the_limit_and_leaves_the_rest() -> None:
    held = HeldBody(Source(chunks(b"a" * 10, b"b" * 10, b"c")))
    assert await held.read(limit=15) is None
    replayed = [await held.receive() for _ in range(3)]
    assert b"".join(m["body"] for m in replayed) == b"a" * 10 + b"b" * 10 + b"c"


async def test_a_client_that_goes_away_gives_no_body() -> None:
    held = HeldBody(Source([{"type": "http.request", "body": b"{", "more_body": True}]))
    assert await held.read() is None


def test_meta_names_the_version_of_a_request_but_not_of_an_initialize() -> None:
    """MCP 2026-07-28 basic, "Per-request protocol fields"; Versioning, "Backward Compatibility"."""
    meta = {"_meta": {KEY: "2026-07-28"}}
    assert meta_text(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": meta}), KEY) == (
        "2026-07-28"
    )
    assert meta_text(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": meta}), KEY) is None
    assert meta_text(b'{"method": "tools/list", "params": {}}', KEY) is None
    assert meta_text(b"not json " + KEY.encode(), KEY) is None


def test_the_id_is_a_requests_own() -> None:
    assert request_id(b'{"jsonrpc":"2.0","id":"a-1","method":"tools/list"}') == "a-1"
    assert request_id(b'{"jsonrpc":"2.0","id":7,"result":{}}') is None
    assert request_id(b'{"jsonrpc":"2.0","id":true,"method":"x"}') is None
    assert request_id(b"[1, 2]") is None
