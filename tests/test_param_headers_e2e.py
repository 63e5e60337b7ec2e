"""`Mcp-Param-{Name}` headers against a real `aql-mcp serve` with `mcp.modern_era` on.

The conformance plugin's `test_custom_headers` mirrors `region` (string), `priority` (integer) and
`verbose` (boolean) into `Mcp-Param-Region`, `-Priority` and `-Verbose`; `query` is not mirrored
(MCP 2026-07-28 Streamable HTTP, "Custom Headers from Tool Parameters"). Every rejection is 400
with -32020 `HeaderMismatch` naming the header, the request's own id, and nothing else of the
request or the server in it ("Server Behavior for Custom Headers", "Server Validation").
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from aql_mcp.protocol.primitives import Registry, Tool
from tests.support.asgi import CONFORMANCE, open_session, rpc
from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.rawhttp import connect, read_response
from tests.support.server import ServerProcess, free_port, start_server

DEADLINE = 20.0
TOOL = "test_custom_headers"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "param-headers-e2e", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
ARGUMENTS = {"region": "secret-region", "priority": 5, "verbose": True, "query": "select 1"}
HEADERS = {"mcp-param-region": "secret-region", "mcp-param-priority": "5", "mcp-param-verbose": "true"}


@pytest.fixture(scope="module")
def modern_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("params"), env={"AQL_MCP_MCP__MODERN_ERA": "true"}) as process:
        yield process


def call(
    server: ServerProcess,
    arguments: dict[str, Any],
    headers: dict[str, str] | list[tuple[str, bytes]],
    *,
    tool: str = TOOL,
    meta: dict[str, Any] | None = None,
    message_id: int | str = "call-7",
) -> httpx.Response:
    """A modern `tools/call`; `headers` are the `Mcp-Param-*` ones (a list sends raw bytes or repeats)."""
    base = list(modern_headers(server.token(), "tools/call", tool).items())
    extra = list(headers.items()) if isinstance(headers, dict) else headers
    body = modern_body("tools/call", {"name": tool, "arguments": arguments}, META if meta is None else meta, message_id)
    return httpx.post(server.url, json=body, headers=[*base, *extra], timeout=DEADLINE)


def assert_mismatch(response: httpx.Response, header: str, message_id: int | str = "call-7") -> None:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["id"] == message_id
    assert body["error"]["code"] == -32020
    assert body["error"]["data"]["header"] == header
    assert set(body["error"]["data"]) == {"header", "requestId"}
    text = response.text.lower()
    for leak in ("traceback", "secret-region", "select 1", "bearer", "/tmp", ".py"):
        assert leak not in text
    assert "result" not in body


def text_of(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert "isError" not in result
    text: str = result["content"][0]["text"]
    return text


# --- accepted ----------------------------------------------------------------------------------------


def test_plain_headers_equal_to_the_arguments_reach_the_tool(modern_server: ServerProcess) -> None:
    """ "Value Encoding": a string as-is, an integer in decimal, a boolean as `true`/`false`."""
    assert '"region": "secret-region"' in text_of(call(modern_server, ARGUMENTS, HEADERS))


def test_base64_headers_are_decoded_before_comparing(modern_server: ServerProcess) -> None:
    """ "Value Encoding": non-ASCII and leading/trailing whitespace travel in `=?base64?...?=`."""
    arguments = {"region": " Zürich ", "priority": -7, "verbose": False}
    headers = {
        "mcp-param-region": "=?base64?IFrDvHJpY2gg?=",
        "mcp-param-priority": "-7",
        "mcp-param-verbose": "=?base64?ZmFsc2U=?=",
    }
    assert "Z\\u00fcrich" in text_of(call(modern_server, arguments, headers))


def test_header_names_are_case_insensitive_and_whitespace_around_values_is_dropped(
    modern_server: ServerProcess,
) -> None:
    """ "Case Sensitivity" and RFC 9110 §5.5 (optional whitespace is not part of a field value); raw
    bytes, since well-behaved clients never send that whitespace."""
    params = {"name": TOOL, "arguments": ARGUMENTS}
    body = orjson.dumps(modern_body("tools/call", params, META, "call-7"))
    heads = {**modern_headers(modern_server.token(), "tools/call", TOOL), "host": "127.0.0.1"}
    lines = [f"{k}: {v}" for k, v in heads.items()]
    lines += ["MCP-PARAM-REGION:   secret-region\t", "Mcp-Param-Priority: 5.0", "mcp-param-verbose:true  "]
    head = "\r\n".join(["POST /mcp HTTP/1.1", *lines, f"content-length: {len(body)}", "", ""])
    with connect(modern_server.port) as sock:
        sock.sendall(head.encode("latin-1") + body)
        response = read_response(sock)
    assert response.status == 200, response.body
    assert "isError" not in response.json()["result"]


def test_a_value_missing_one_sentinel_marker_is_literal(modern_server: ServerProcess) -> None:
    arguments = {**ARGUMENTS, "region": "=?base64?SGVsbG8="}
    text_of(call(modern_server, arguments, {**HEADERS, "mcp-param-region": "=?base64?SGVsbG8="}))


def test_a_null_or_absent_optional_argument_needs_no_header(modern_server: ServerProcess) -> None:
    """ "Server Behavior for Custom Headers": no header is expected for a null or absent value; the
    schema check that follows answers the call as the tool's own error."""
    headers = {"mcp-param-priority": "5", "mcp-param-verbose": "true"}
    response = call(modern_server, {"region": None, "priority": 5, "verbose": True}, headers)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["isError"] is True


def test_an_unknown_tool_is_the_dispatchers_answer_not_a_header_mismatch(modern_server: ServerProcess) -> None:
    response = call(modern_server, ARGUMENTS, {"mcp-param-region": "nowhere"}, tool="no_such_tool")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


def test_param_headers_of_a_tool_that_declares_none_are_ignored(modern_server: ServerProcess) -> None:
    response = call(modern_server, {}, {"mcp-param-region": "anything"}, tool="test_simple_text")
    assert response.status_code == 200, response.text


# --- rejected ------------------------------------------------------------------------------------------


def test_a_missing_header_for_a_present_value_is_400_header_mismatch(modern_server: ServerProcess) -> None:
    """ "Server Behavior for Custom Headers": client omits header but value is in body: MUST reject."""
    headers = {k: v for k, v in HEADERS.items() if k != "mcp-param-region"}
    assert_mismatch(call(modern_server, ARGUMENTS, headers), "Mcp-Param-Region")


@pytest.mark.parametrize(
    ("name", "value", "header"),
    [
        ("mcp-param-region", "other-region", "Mcp-Param-Region"),
        ("mcp-param-region", "SECRET-REGION", "Mcp-Param-Region"),
        ("mcp-param-priority", "6", "Mcp-Param-Priority"),
        ("mcp-param-priority", "five", "Mcp-Param-Priority"),
        ("mcp-param-verbose", "True", "Mcp-Param-Verbose"),
        ("mcp-param-verbose", "false", "Mcp-Param-Verbose"),
    ],
)
def test_a_header_not_matching_its_argument_is_400_header_mismatch(
    modern_server: ServerProcess, name: str, value: str, header: str
) -> None:
    """ "Server Validation": header values MUST match the body."""
    assert_mismatch(call(modern_server, ARGUMENTS, {**HEADERS, name: value}), header)


@pytest.mark.parametrize("value", ["=?base64?c2VjcmV0LXJlZ2lvbg?=", "=?base64?c2Vj!!!cmV0LXJlZ2lvbg==?="])
def test_invalid_base64_is_400_header_mismatch(modern_server: ServerProcess, value: str) -> None:
    """ "Value Encoding": bad padding or a character outside the Base64 alphabet is refused."""
    assert_mismatch(call(modern_server, ARGUMENTS, {**HEADERS, "mcp-param-region": value}), "Mcp-Param-Region")


def test_a_header_for_an_absent_argument_is_400_header_mismatch(modern_server: ServerProcess) -> None:
    """ "Server Validation": a header claiming a value the body does not carry does not match it."""
    arguments = {"region": "secret-region", "priority": 5}
    assert_mismatch(call(modern_server, arguments, HEADERS), "Mcp-Param-Verbose")


def test_a_header_with_characters_outside_visible_ascii_is_400_header_mismatch(modern_server: ServerProcess) -> None:
    """ "Server Behavior for Custom Headers": a recognized header with invalid characters MUST be rejected."""
    arguments = {**ARGUMENTS, "region": "zürich"}
    headers = [(k, v.encode()) for k, v in HEADERS.items() if k != "mcp-param-region"]
    response = call(modern_server, arguments, [*headers, ("mcp-param-region", "zürich".encode())])
    assert_mismatch(response, "Mcp-Param-Region")


def test_a_repeated_header_is_400_header_mismatch(modern_server: ServerProcess) -> None:
    """A gateway may route on another copy than the one the server would compare."""
    headers = [*((k, v.encode()) for k, v in HEADERS.items()), ("mcp-param-region", b"secret-region")]
    assert_mismatch(call(modern_server, ARGUMENTS, headers), "Mcp-Param-Region")


def test_malformed_meta_is_reported_before_a_param_header_mismatch(modern_server: ServerProcess) -> None:
    """2026-07-28 Streamable HTTP: -32602 (`_meta`) comes before -32020."""
    response = call(modern_server, ARGUMENTS, {}, meta={"io.modelcontextprotocol/protocolVersion": MODERN})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


def test_a_numeric_request_id_is_echoed_on_a_mismatch(modern_server: ServerProcess) -> None:
    assert_mismatch(call(modern_server, ARGUMENTS, {}, message_id=41), "Mcp-Param-Region", message_id=41)


# --- the legacy era ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_legacy_era_ignores_param_headers(modern_server: ServerProcess) -> None:
    """2025-11-25 has no `Mcp-Param-*` headers: a stale one changes nothing."""
    async with httpx.AsyncClient(base_url=modern_server.base, timeout=DEADLINE) as http:
        session = await open_session(http, modern_server.token())
        body = rpc("tools/call", {"name": TOOL, "arguments": ARGUMENTS}, 3)
        response = await http.post("/mcp", json=body, headers={**session, "mcp-param-region": "elsewhere"})
    assert response.status_code == 200, response.text
    assert '"result"' in response.text
    assert "-32020" not in response.text


# --- registration ----------------------------------------------------------------------------------------


class BadAnnotationPlugin:
    """Registers a tool whose `x-mcp-header` sits on a `number` parameter (not permitted)."""

    name = "bad_annotation"

    def register(self, registry: Registry) -> None:
        schema = {"type": "object", "properties": {"ratio": {"type": "number", "x-mcp-header": "Ratio"}}}
        registry.add_tool(Tool("ratio_tool", "Has an invalid annotation", _never, input_schema=schema))


async def _never(_arguments: dict[str, Any], _ctx: Any) -> str:
    return "never called"


bad_annotation = BadAnnotationPlugin()


def test_a_plugin_with_an_invalid_annotation_stops_the_server_at_start(tmp_path: Path) -> None:
    """MCP 2026-07-28 server/tools, "x-mcp-header": such a tool definition is invalid; the pod must
    not come up serving it, and the message names the tool and the property."""
    env = {
        **os.environ,
        "AQL_MCP_STORE__PATH": str(tmp_path),
        "AQL_MCP_SERVER__PLUGINS": f'["{CONFORMANCE}", "{__name__}:bad_annotation"]',
        "AQL_MCP_MCP__MODERN_ERA": "true",
    }
    command = [sys.executable, "-m", "aql_mcp.main", "serve", "--dev", "--port", str(free_port())]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=DEADLINE)
    assert done.returncode != 0
    assert "ratio_tool" in done.stderr
    assert "/properties/ratio" in done.stderr
