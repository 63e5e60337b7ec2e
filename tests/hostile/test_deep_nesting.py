"""Deep nesting in any member of any message (issue 12: an `initialize` nested 256+ levels was a 500).

orjson reads 1024 levels and writes 254, so every value accepted must be one the server can write back,
and no handler may recurse past Python's limit on one. A message at the limit (`MAX_DEPTH`, the envelope
being level 1) is answered by every method without an internal error; one level deeper is 400 -32600
`nesting_depth`, whatever member holds it (JSON-RPC 2.0 §5.1; corporate Appendix B).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from aql_mcp.jsonrpc.messages import MAX_DEPTH
from tests.support.asgi import CONFORMANCE, MCP_HEADERS
from tests.support.server import ServerProcess, start_server

METHODS = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "no/such/method",
    "notifications/initialized",
    "notifications/cancelled",
]
MEMBERS = ["_meta", "arguments", "name", "uri", "cursor", "ref", "argument", "level", "requestId", "capabilities", "x"]
# Tools that answer at once and read their arguments: a schema validator, an echo of content, MCP-AQL.
TOOLS = ["json_schema_2020_12_tool", "test_simple_text", "test_tool_with_progress", "mcp_aql_read", "mcp_aql_create"]
LEAKS = ("Traceback", 'File "', "RecursionError", "/src/")


def nested(levels: int) -> Any:
    value: Any = {}
    for index in range(levels - 1):
        value = {"a": value} if index % 2 else [value]
    return value


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {"AQL_MCP_LIMITS__RATE_PER_SECOND": "100000", "AQL_MCP_LIMITS__RATE_BURST": "100000"}
    with start_server(tmp_path_factory.mktemp("deep"), env=env, plugins=(CONFORMANCE,)) as server:
        yield server


@pytest.fixture(scope="module")
def http(served: ServerProcess) -> Iterator[httpx.Client]:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {served.token()}"}
    with httpx.Client(base_url=served.base, headers=headers, timeout=30.0) as client:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        response = client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        client.headers["mcp-session-id"] = response.headers["mcp-session-id"]
        client.headers["mcp-protocol-version"] = "2025-11-25"
        yield client


def send(http: httpx.Client, method: str, params: dict[str, Any]) -> httpx.Response:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if not method.startswith("notifications/"):
        message["id"] = 7
    request = http.build_request("POST", "/mcp", content=json.dumps(message))
    if method == "initialize":
        del request.headers["mcp-session-id"]  # initialize opens a session of its own
    return http.send(request)


def assert_answered(response: httpx.Response) -> None:
    assert response.status_code in (200, 202), response.text[:300]
    assert not any(leak in response.text for leak in LEAKS)
    if response.status_code == 200:
        body = response.json()
        assert body.get("error", {}).get("code") != -32603, body


@pytest.mark.parametrize("member", MEMBERS)
@pytest.mark.parametrize("method", METHODS)
def test_a_member_nested_to_the_message_limit_is_answered_by_every_method(
    http: httpx.Client, method: str, member: str
) -> None:
    # The envelope is level 1 and params level 2: the member's value takes the remaining levels.
    params = {"protocolVersion": "2025-11-25", member: nested(MAX_DEPTH - 2)}
    assert_answered(send(http, method, params))


@pytest.mark.parametrize("member", MEMBERS)
@pytest.mark.parametrize("method", METHODS)
def test_a_member_nested_one_level_past_the_limit_is_400_invalid_request(
    http: httpx.Client, method: str, member: str
) -> None:
    response = send(http, method, {member: nested(MAX_DEPTH - 1)})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600
    assert response.json()["error"]["data"]["reason"] == "nesting_depth"


@pytest.mark.parametrize("tool", TOOLS)
def test_tool_arguments_nested_to_the_message_limit_are_answered(http: httpx.Client, tool: str) -> None:
    # params (2) -> arguments (3) -> the value: the message is exactly MAX_DEPTH deep.
    for arguments in ({"v": nested(MAX_DEPTH - 3)}, {"operation": "introspect", "params": nested(MAX_DEPTH - 3)}):
        response = send(http, "tools/call", {"name": tool, "arguments": arguments})
        assert_answered(response)
        result = response.json().get("result")
        assert result is None or isinstance(result.get("content"), list)
