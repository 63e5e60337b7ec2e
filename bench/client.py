"""A minimal MCP client for the benchmark: one keep-alive HTTP/1.1 connection, stdlib only.

It speaks just enough Streamable HTTP (2025-11-25) to open sessions and check one tool call;
answers may come as JSON or as SSE. For the modern era (2026-07-28: no handshake, no session) it
builds the one stateless `tools/call` that wrk also sends (`modern_echo`) and checks its answer.
Only loopback URLs are accepted.
"""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

PROTOCOL_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
TEXT = "bench-echo"
# What a 2026-07-28 request carries instead of a handshake (2026-07-28 basic, "Per-request protocol
# fields"): its version, the client's identity and its capabilities, in every request's `_meta`.
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


class BadAnswer(Exception):
    """The server answered something a correct MCP server would not."""


class McpClient:
    def __init__(self, url: str, *, headers: dict[str, str], timeout: float = 10.0) -> None:
        parts = urlsplit(url)
        if parts.hostname not in LOOPBACK:
            raise ValueError(f"refusing a non-loopback target: {url}")
        self.path = parts.path or "/"
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
        self.next_id = 0

    def close(self) -> None:
        self.connection.close()

    def post(
        self, message: dict[str, Any], *, session: str | None, extra: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        headers = dict(self.headers)
        if extra is not None:
            headers.update(extra)
        elif message.get("method") != "initialize":
            # As a client does once the version is negotiated (2025-11-25 transports).
            headers["MCP-Protocol-Version"] = PROTOCOL_VERSION
        if session is not None:
            headers["Mcp-Session-Id"] = session
        self.connection.request("POST", self.path, body=json.dumps(message), headers=headers)
        response = self.connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()

    def call(self, method: str, params: dict[str, Any], *, session: str | None) -> tuple[dict[str, str], Any]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        status, headers, body = self.post(message, session=session)
        if status != 200:
            raise BadAnswer(f"{method}: HTTP {status} {body[:300]!r}")
        answer = answer_in(headers.get("content-type", ""), body, self.next_id)
        if "result" not in answer:
            raise BadAnswer(f"{method}: {answer}")
        return headers, answer["result"]

    def handshake(self) -> str | None:
        """initialize + notifications/initialized; the session id (None from a stateless server)."""
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        }
        headers, _ = self.call("initialize", params, session=None)
        session = headers.get("mcp-session-id")
        status, _, body = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session=session)
        if status != 202:
            raise BadAnswer(f"notifications/initialized: HTTP {status} {body[:300]!r}")
        return session

    def check_echo(self, session: str | None) -> None:
        _, result = self.call("tools/call", {"name": "echo", "arguments": {"text": TEXT}}, session=session)
        if result.get("isError") or result["content"][0].get("text") != TEXT:
            raise BadAnswer(f"tools/call echo: {result}")

    def check_modern_echo(self) -> None:
        """One stateless 2026-07-28 `tools/call echo`: a JSON answer to its id, complete, no session."""
        self.next_id += 1
        headers, message = modern_echo(self.next_id)
        status, answer_headers, body = self.post(message, session=None, extra=headers)
        if status != 200 or not answer_headers.get("content-type", "").startswith("application/json"):
            raise BadAnswer(f"modern tools/call: HTTP {status} {answer_headers.get('content-type')} {body[:300]!r}")
        if "mcp-session-id" in answer_headers:
            raise BadAnswer("modern tools/call: the answer names a session; 2026-07-28 has none")
        answer = json.loads(body)
        result = answer.get("result") or {}
        if answer.get("id") != self.next_id or result.get("resultType") != "complete":
            raise BadAnswer(f"modern tools/call: {answer}")
        if result.get("isError") or result["content"][0].get("text") != TEXT:
            raise BadAnswer(f"modern tools/call echo: {result}")


def modern_echo(message_id: int) -> tuple[dict[str, str], dict[str, Any]]:
    """The headers and body of a stateless 2026-07-28 `tools/call echo`, as wrk sends it under load.

    No `initialize` comes first and no `Mcp-Session-Id` is sent. The version, method and tool name
    are mirrored into headers (2026-07-28 Streamable HTTP, "Standard Request Headers"), which the
    server checks against the body.
    """
    headers = {"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
    params = {"name": "echo", "arguments": {"text": TEXT}, "_meta": MODERN_META}
    return headers, {"jsonrpc": "2.0", "id": message_id, "method": "tools/call", "params": params}


def answer_in(content_type: str, body: bytes, message_id: int) -> dict[str, Any]:
    """The JSON-RPC answer to `message_id` in a JSON body or an SSE stream."""
    if content_type.startswith("application/json"):
        answer: dict[str, Any] = json.loads(body)
        return answer
    if not content_type.startswith("text/event-stream"):
        raise BadAnswer(f"unexpected content-type {content_type!r}")
    for line in body.decode().splitlines():
        data = line[5:].strip() if line.startswith("data:") else ""
        if data:
            message = json.loads(data)
            if message.get("id") == message_id:
                return dict(message)
    raise BadAnswer(f"no answer to {message_id} in the SSE stream: {body[:300]!r}")
