"""`initialize` with hostile client info (issue 12): deep nesting anywhere in a message is a clear 400,
never a 500; `clientInfo` and `capabilities` are bounded (`sessions.max_client_info_bytes`,
`sessions.max_client_info_depth`) and a session keeps only what the server uses of them.

MCP 2025-11-25 lifecycle, "Initialization": the client sends its capabilities and implementation
info; JSON-RPC 2.0 §5.1: -32600 for a message that is not an acceptable request, -32602 for bad params.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from aql_mcp.auth.principal import subject_digest
from aql_mcp.jsonrpc.messages import MAX_DEPTH
from aql_mcp.settings import Settings, StoreSettings
from aql_mcp.store.base import SessionRecord
from aql_mcp.store.factory import SQLITE_FILE, open_store
from tests.support.asgi import MCP_HEADERS
from tests.support.server import ServerProcess, start_server

DEFAULT_BYTES = 16_384
DEFAULT_DEPTH = 10
# Every capability and implementation field of the MCP 2025-11-25 schema, as a full-featured client sends them.
FULL_CAPABILITIES: dict[str, Any] = {
    "roots": {"listChanged": True},
    "sampling": {"context": {}, "tools": {}},
    "elicitation": {"form": {}, "url": {}},
    "tasks": {
        "list": {},
        "cancel": {},
        "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
    },
    "experimental": {"vendor.feature": {"enabled": True, "modes": ["a", "b"]}},
    "extensions": {"io.example/ui": {"version": "1"}},
}
FULL_INFO: dict[str, Any] = {
    "name": "full-client",
    "version": "1.2.3",
    "title": "A Full Client",
    "description": "Declares every field of Implementation",
    "websiteUrl": "https://client.example/",
    "icons": [{"src": "data:image/png;base64," + "A" * 4000, "mimeType": "image/png", "sizes": ["48x48"]}],
}


def nested(levels: int) -> dict[str, Any]:
    """An object `levels` deep (`{}` is one level)."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def nested_text(levels: int) -> str:
    """The JSON of `nested(levels)`, built as text: Python's own JSON writer recurses."""
    return '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)


def initialize(info: Any = None, caps: Any = None, **extra: Any) -> dict[str, Any]:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {} if caps is None else caps,
        "clientInfo": {"name": "hostile", "version": "1"} if info is None else info,
        **extra,
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
    with httpx.Client(base_url=server.base, headers=headers, timeout=30.0) as client:
        yield client


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"jsonrpc", "id", "error"}, body
    error: dict[str, Any] = body["error"]
    assert "Traceback" not in response.text
    assert "/src/" not in response.text
    return error


# Where a deep value can hide in an initialize message; the placeholder is replaced by the deep JSON.
DEEP_PLACES = [
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    '"capabilities":DEEP,"clientInfo":{"name":"x","version":"1"}}}',
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    '"capabilities":{},"clientInfo":DEEP}}',
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    '"capabilities":{"experimental":DEEP},"clientInfo":{"name":"x","version":"1"}}}',
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    '"capabilities":{},"clientInfo":{"name":DEEP,"version":"1"}}}',
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":DEEP,'
    '"capabilities":{},"clientInfo":{"name":"x","version":"1"}}}',
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    '"capabilities":{},"clientInfo":{"name":"x","version":"1"},"_meta":DEEP}}',
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    '"capabilities":{},"clientInfo":{"name":"x","version":"1"}},"extra":DEEP}',
]


@pytest.mark.parametrize("levels", [255, 256, 300, 1000, 1024, 1025, 5000])
@pytest.mark.parametrize("place", range(len(DEEP_PLACES)))
def test_initialize_nested_past_the_message_limit_anywhere_is_400_invalid_request(
    http: httpx.Client, place: int, levels: int
) -> None:
    body = DEEP_PLACES[place].replace("DEEP", nested_text(levels))
    response = http.post("/mcp", content=body)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32600
    assert error["data"]["reason"] == "nesting_depth"
    assert error["data"]["limit"] == MAX_DEPTH


@pytest.mark.parametrize("field", ["capabilities", "clientInfo"])
def test_initialize_nested_past_the_handshake_limit_is_invalid_params_naming_the_field(
    http: httpx.Client, field: str
) -> None:
    deep = nested(DEFAULT_DEPTH + 1)
    message = initialize(caps=deep) if field == "capabilities" else initialize(info={"name": "x", "icons": deep})
    response = http.post("/mcp", json=message)
    # A malformed initialize is answered in-band with 200, as every other -32602 of the handshake.
    assert response.status_code == 200
    assert "mcp-session-id" not in response.headers
    error = error_of(response)
    assert error["code"] == -32602
    assert error["data"]["field"] == field
    assert error["data"]["reason"] == "depth"
    assert error["data"]["limit"] == DEFAULT_DEPTH


@pytest.mark.parametrize("field", ["capabilities", "clientInfo"])
def test_initialize_larger_than_the_handshake_limit_is_invalid_params_naming_the_field(
    http: httpx.Client, field: str
) -> None:
    big = {"name": "x", "version": "1", "description": "d" * DEFAULT_BYTES}
    message = initialize(caps={"experimental": big}) if field == "capabilities" else initialize(info=big)
    response = http.post("/mcp", json=message)
    assert response.status_code == 200
    error = error_of(response)
    assert error["code"] == -32602
    assert error["data"]["field"] == field
    assert error["data"]["reason"] == "size"
    assert error["data"]["limit"] == DEFAULT_BYTES
    assert error["data"]["actual"] > DEFAULT_BYTES


@pytest.mark.parametrize("field", ["capabilities", "clientInfo"])
@pytest.mark.parametrize("value", [[], "x", 1, None, True])
def test_initialize_with_client_info_not_an_object_names_that_field(http: httpx.Client, field: str, value: Any) -> None:
    message = initialize()
    message["params"][field] = value
    error = error_of(http.post("/mcp", json=message))
    assert error["code"] == -32602
    assert error["data"] == {**error["data"], "field": field, "reason": "type"}


def test_every_capability_and_info_field_of_the_schema_is_accepted_with_room_to_spare(http: httpx.Client) -> None:
    response = http.post("/mcp", json=initialize(info=FULL_INFO, caps=FULL_CAPABILITIES))
    assert response.status_code == 200, response.text
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"
    # Room to spare: twice as deep an experimental capability and four times the fields still pass.
    roomy = {**FULL_CAPABILITIES, "experimental": {"v": nested(DEFAULT_DEPTH - 2)}}
    assert "result" in http.post("/mcp", json=initialize(info=FULL_INFO, caps=roomy)).json()
    assert len(orjson.dumps(FULL_CAPABILITIES)) * 4 < DEFAULT_BYTES


@pytest.mark.anyio
async def test_the_official_client_with_every_callback_initializes(server: ServerProcess) -> None:
    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=""), model="m")

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[])

    http = create_mcp_http_client(headers={"authorization": f"Bearer {server.token()}"})
    info = types.Implementation(name="official", version="2.3", title="Official client")
    async with (
        http,
        streamable_http_client(server.url, http_client=http) as (read, write),
        ClientSession(
            read,
            write,
            client_info=info,
            sampling_callback=sample,
            elicitation_callback=elicit,
            list_roots_callback=roots,
        ) as session,
    ):
        with anyio.fail_after(20):
            result = await session.initialize()
            assert result.protocol_version == "2025-11-25"
            await session.send_ping()


def stored_sessions(state: Path) -> list[tuple[bytes, bytes, int]]:
    """Each stored session's client info, capabilities and the bytes its row holds."""
    with sqlite3.connect(state / SQLITE_FILE) as db:
        rows = db.execute(
            "SELECT client_info, client_capabilities, "
            "length(id) + length(owner) + length(protocol_version) + length(client_info) "
            "+ length(client_capabilities) + length(log_level) + 16 FROM sessions"
        ).fetchall()
    return [(bytes(info), bytes(caps), int(size)) for info, caps, size in rows]


def test_a_session_keeps_only_the_client_fields_the_server_uses(tmp_path: Path) -> None:
    with start_server(tmp_path) as server:
        headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
        info = {**FULL_INFO, "name": "n" * 1000}
        response = httpx.post(server.url, json=initialize(info=info, caps=FULL_CAPABILITIES), headers=headers)
        assert response.status_code == 200, response.text
        [(stored_info, stored_caps, _)] = stored_sessions(tmp_path)
    assert orjson.loads(stored_info) == {"name": "n" * 256, "version": "1.2.3", "title": "A Full Client"}
    assert orjson.loads(stored_caps) == {
        "elicitation": {"form": {}, "url": {}},
        "experimental": {"vendor.feature": {}},
        "extensions": {"io.example/ui": {}},
        "roots": {"listChanged": True},
        "sampling": {"context": {}, "tools": {}},
        "tasks": {"list": {}, "cancel": {}, "requests": {}},
    }


def test_a_hundred_sessions_of_one_caller_with_large_client_info_add_little_to_the_store(tmp_path: Path) -> None:
    """Issue 12: 100 sessions of one caller added 95 MB. Each now sends almost the allowed maximum
    (about 32 KB of clientInfo and capabilities) and the sessions table holds under 1 KB per session."""
    info = {"name": "big", "version": "1", "description": "d" * (DEFAULT_BYTES - 200)}
    caps = {**FULL_CAPABILITIES, "experimental": {f"x{i}": {"blob": "b" * 400} for i in range(35)}}
    sent = len(orjson.dumps(info)) + len(orjson.dumps(caps))
    assert sent > 30_000
    with start_server(tmp_path) as server:
        headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
        with httpx.Client(headers=headers, timeout=30.0) as http:
            for _ in range(100):
                response = http.post(server.url, json=initialize(info=info, caps=caps))
                assert response.status_code == 200, response.text
        rows = stored_sessions(tmp_path)
    assert len(rows) == 100
    stored = sum(size for _, _, size in rows)
    assert stored < 100 * 1024
    assert stored * 30 < 100 * sent


def test_sessions_stored_before_the_bounds_still_load(tmp_path: Path) -> None:
    """A session written by an earlier version (client info and capabilities kept whole) is still served."""
    state = tmp_path / "state"
    old = SessionRecord(
        id="old-session-" + "a" * 32,
        owner=subject_digest("tester"),
        protocol_version="2025-11-25",
        client_info={**FULL_INFO, "icons": [{"src": "x" * 50_000}]},
        client_capabilities={**FULL_CAPABILITIES, "experimental": {"deep": nested(200)}},
        created_at=time.time(),
        last_seen=time.time(),
    )

    async def write_old() -> None:
        store = open_store(Settings(store=StoreSettings(path=state)))
        await store.open()
        try:
            assert await store.create_session(old, max_open=10, max_per_owner=10) == "created"
        finally:
            await store.close()

    asyncio.run(write_old())
    with start_server(state) as server:
        headers = {
            **MCP_HEADERS,
            "authorization": f"Bearer {server.token()}",
            "mcp-session-id": old.id,
            "mcp-protocol-version": "2025-11-25",
        }
        response = httpx.post(server.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers)
        assert response.status_code == 200, response.text
        assert "tools" in response.json()["result"]
