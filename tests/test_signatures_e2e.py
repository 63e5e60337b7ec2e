"""A typed tool (`Tool.from_function`) against a real `aql-mcp serve`: the listed schema, a call
with converted values, and the documented answer to a wrong argument: an `isError` result starting
"Invalid arguments" that names the argument and never echoes its value (corporate §9.4; MCP tools,
"Error Handling"), in both protocol eras."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.server import ServerProcess, start_server
from tests.support.sse import answer

GREETER = "tests.support.greeter:plugin"
DEADLINE = 20.0
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "signatures-e2e", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def greeter_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {"AQL_MCP_MCP__MODERN_ERA": "true"}
    with start_server(tmp_path_factory.mktemp("typed"), env=env, plugins=(GREETER,)) as process:
        yield process


def legacy_call(server: ServerProcess, method: str, params: dict[str, Any]) -> httpx.Response:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
    opened = httpx.post(server.url, json=rpc("initialize", initialize_params()), headers=headers, timeout=DEADLINE)
    headers = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    httpx.post(server.url, json=rpc("notifications/initialized", message_id=None), headers=headers, timeout=DEADLINE)
    return httpx.post(server.url, json=rpc(method, params), headers=headers, timeout=DEADLINE)


def modern_call(server: ServerProcess, arguments: dict[str, Any]) -> httpx.Response:
    headers = modern_headers(server.token(), "tools/call", "shout")
    body = modern_body("tools/call", {"name": "shout", "arguments": arguments}, META, 7)
    return httpx.post(server.url, json=body, headers=headers, timeout=DEADLINE)


def result_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body = answer(response)
    assert "error" not in body, body
    result: dict[str, Any] = body["result"]
    return result


def test_the_typed_tool_is_listed_with_the_schema_of_its_signature(greeter_server: ServerProcess) -> None:
    tools = result_of(legacy_call(greeter_server, "tools/list", {}))["tools"]
    [shout] = [tool for tool in tools if tool["name"] == "shout"]
    schema = shout["inputSchema"]
    assert schema["required"] == ["words"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["times"]["type"] == "integer"
    assert all(prop.get("description") for prop in schema["properties"].values())
    assert shout["outputSchema"]["type"] == "object"


def test_the_typed_tool_gets_converted_values(greeter_server: ServerProcess) -> None:
    arguments = {"words": "hi", "times": 3, "on": "2026-02-03"}
    result = result_of(legacy_call(greeter_server, "tools/call", {"name": "shout", "arguments": arguments}))
    assert result.get("isError", False) is False
    assert result["structuredContent"] == {"text": "HI HI HI", "on": "2026-02-03"}


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"words": "hi", "times": "two"}, "arguments.times"),  # the JSON Schema check
        ({"words": "hi", "times": 9}, "arguments.times"),  # a pydantic constraint (le=5)
        ({"words": "hi", "on": "hidden-value"}, "arguments.on"),  # a pydantic conversion (a date)
        ({"words": "hi", "extra": 1}, "arguments"),
        ({}, "arguments"),
    ],
)
def test_a_wrong_argument_is_an_invalid_arguments_result_in_both_eras(
    greeter_server: ServerProcess, arguments: dict[str, Any], field: str
) -> None:
    legacy = legacy_call(greeter_server, "tools/call", {"name": "shout", "arguments": arguments})
    modern = modern_call(greeter_server, arguments)
    for response in (legacy, modern):
        result = result_of(response)
        assert result["isError"] is True
        message = result["content"][0]["text"]
        assert message.startswith("Invalid arguments: arguments")
        assert field in message
        assert "hidden-value" not in response.text
        assert "Traceback" not in response.text
        assert "structuredContent" not in result
