"""A typed tool (`Tool.from_function`) against a real `aql-mcp serve`: the listed schema, a call
with converted values, and the documented answer to a wrong argument: an `isError` result starting
"Invalid arguments" that names the argument and never echoes its value (corporate §9.4; MCP tools,
"Error Handling"), in both protocol eras."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.server import ServerProcess, start_server
from tests.support.sse import answer
from tests.support.wait import until

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


TYPED = "tests.support.typed_tools:plugin"
BOOKING = {"on": "2026-02-03", "color": "red", "ref": "0f8fad5b-d9cb-469f-a165-70867728950e"}


@pytest.fixture(scope="module")
def typed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("typed-values"), plugins=(TYPED,)) as process:
        yield process


def call_tool(server: ServerProcess, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return result_of(legacy_call(server, "tools/call", {"name": name, "arguments": arguments}))


@pytest.mark.parametrize("tool", ["book_tool", "tint"])
def test_a_typed_tool_takes_dates_enums_and_uuids_as_their_json_strings(typed_server: ServerProcess, tool: str) -> None:
    """A strict `Params` model (book_tool) and plain parameters (tint) alike: JSON has no other way
    to send a date, an enum member or a UUID than its string."""
    result = call_tool(typed_server, tool, BOOKING)
    assert result.get("isError", False) is False, result
    assert result["structuredContent"] == BOOKING


def test_an_operation_takes_dates_enums_and_uuids_as_their_json_strings(typed_server: ServerProcess) -> None:
    arguments = {"operation": "book_day", "params": BOOKING}
    result = call_tool(typed_server, "mcp_aql_read", arguments)
    envelope = json.loads(result["content"][0]["text"])
    assert envelope == {"success": True, "data": BOOKING}


@pytest.mark.parametrize(
    ("params", "param_name"),
    [
        ({**BOOKING, "on": "not-a-day"}, "on"),
        ({**BOOKING, "ref": "not-a-uuid"}, "ref"),
        ({**BOOKING, "color": "green"}, "color"),
        ({**BOOKING, "on": 20260203}, "on"),
    ],
)
def test_an_operation_still_refuses_a_wrong_value_with_the_invalid_type_code_naming_the_param(
    typed_server: ServerProcess, params: dict[str, Any], param_name: str
) -> None:
    """MCP-AQL error codes §4: VALIDATION_INVALID_TYPE with `param_name`, never a Python class name."""
    result = call_tool(typed_server, "mcp_aql_read", {"operation": "book_day", "params": params})
    envelope = json.loads(result["content"][0]["text"])
    assert envelope["success"] is False
    assert envelope["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert envelope["error"]["details"]["param_name"] == param_name
    assert "instance of" not in envelope["error"]["message"]


def test_structured_content_uses_the_aliases_of_the_output_schema(typed_server: ServerProcess) -> None:
    """MCP 2025-11-25 server/tools, "Output Schema": structured content MUST conform to the schema."""
    listed = result_of(legacy_call(typed_server, "tools/list", {}))["tools"]
    [tool] = [t for t in listed if t["name"] == "booked"]
    result = call_tool(typed_server, "booked", {"on": "2026-02-03"})
    assert set(result["structuredContent"]) == set(tool["outputSchema"]["properties"]) == {"dayOfWeek", "color"}
    assert result["structuredContent"] == {"dayOfWeek": "Tuesday", "color": "red"}
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_a_result_its_output_schema_refuses_is_an_internal_error_logged_with_the_request_id(
    typed_server: ServerProcess,
) -> None:
    """MCP 2025-11-25 server/tools, "Output Schema": a server MUST NOT send non-conforming
    structured content; the mismatch is the tool's bug, answered without its values."""
    response = legacy_call(typed_server, "tools/call", {"name": "broken", "arguments": {}})
    result = result_of(response)
    assert result["isError"] is True
    assert "structuredContent" not in result
    assert "hunter2" not in response.text
    assert "Traceback" not in response.text
    request_id = result["content"][0]["text"].rsplit(" ", 1)[-1].rstrip(")")
    until(lambda: request_id in typed_server.log_text(), "the mismatch is logged with the request id")
    assert "hunter2" not in typed_server.log_text()


def test_a_list_of_dicts_with_a_type_field_is_data_and_an_empty_list_is_json_text(typed_server: ServerProcess) -> None:
    """Only MCP content block types (text, image, audio, resource, resource_link) are content."""
    assert call_tool(typed_server, "rows", {})["content"] == [{"type": "text", "text": '[{"type":"user","id":1}]'}]
    assert call_tool(typed_server, "nothing", {})["content"] == [{"type": "text", "text": "[]"}]


@pytest.mark.parametrize(
    ("tool", "arguments", "hidden"),
    [("check", {"coded": {"code": "TOPSECRET"}}, "TOPSECRET"), ("secret", {"key": "k-9731"}, "9731")],
)
def test_a_validator_message_or_a_sensitive_parameter_is_only_said_to_be_invalid(
    typed_server: ServerProcess, tool: str, arguments: dict[str, Any], hidden: str
) -> None:
    """Corporate §9.4: the refusal names the argument and never echoes its value."""
    response = legacy_call(typed_server, "tools/call", {"name": tool, "arguments": arguments})
    result = result_of(response)
    assert result["isError"] is True
    message = result["content"][0]["text"]
    assert message.startswith("Invalid arguments: arguments.")
    assert message.endswith("is invalid")
    assert hidden not in message
