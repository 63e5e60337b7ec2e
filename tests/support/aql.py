"""An MCP-AQL caller over real HTTP: one session with a real `aql-mcp serve`, every answer checked
for leaks and against the MCP-AQL envelope schemas (tests.operations.envelope)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from tests.operations.envelope import check_batch, check_introspection, check_result
from tests.support.server import ServerProcess

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
VERSION = "2025-11-25"
LEAKS = ("Traceback", 'File "', ".py", "SELECT ", "Bearer ")


@dataclass
class Session:
    http: httpx.Client
    headers: dict[str, str]

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The `tools/call` result, checked for leaks; HTTP 200 whatever the outcome."""
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        response = self.http.post("/mcp", json=body, headers=self.headers)
        assert response.status_code == 200, response.text
        assert not any(leak in response.text for leak in LEAKS), response.text
        return dict(response.json()["result"])

    def call(self, tool: str, operation: str, **params: Any) -> dict[str, Any]:
        result = self.tool(tool, {"operation": operation, "params": params})
        envelope = result["structuredContent"]
        assert json.loads(result["content"][0]["text"]) == envelope
        assert result.get("isError", False) is (envelope["success"] is False)
        return check_introspection(envelope) if operation == "introspect" else check_result(envelope)

    def batch(self, tool: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        return check_batch(self.tool(tool, {"operations": operations})["structuredContent"])

    def details(self, operation: str) -> dict[str, Any]:
        found = self.call("mcp_aql_read", "introspect", query="operations", name=operation)["data"]["operation"]
        return dict(found)


@contextmanager
def session(
    server: ServerProcess, scopes: tuple[str, ...] = ("mcp",), subject: str = "mallory", token: str | None = None
) -> Iterator[Session]:
    """A session on `server` with a token of its own issuer, or with `token` (a replica's shared issuer)."""
    token = token or server.token(subject=subject, scopes=scopes)
    with httpx.Client(base_url=server.base, timeout=20) as http:
        headers = {**HEADERS, "authorization": f"Bearer {token}"}
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}},
        }
        answer = http.post("/mcp", json=init, headers=headers)
        assert answer.status_code == 200, answer.text
        headers |= {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
        assert http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        yield Session(http, headers)
