"""Executions of the `executions` plugin as the end-to-end tests drive them: imports, rows, waiting."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import orjson

from tests.support.aql import LEAKS, Session
from tests.support.wait import until

EXECUTE, READ, CREATE = "mcp_aql_execute", "mcp_aql_read", "mcp_aql_create"
TERMINAL = ("completed", "failed", "cancelled")
BIG = {
    # An import of 100,000 rows needs room in the body, the string limit and the record quota.
    "AQL_MCP_HTTP__MAX_BODY_BYTES": str(16 * 1024 * 1024),
    "AQL_MCP_AQL__MAX_STRING_LENGTH": str(16 * 1024 * 1024),
    "AQL_MCP_RECORDS__MAX_RECORDS": "1000000",
    "AQL_MCP_RECORDS__MAX_BYTES": str(512 * 1024 * 1024),
    "AQL_MCP_EXECUTIONS__BATCH_SIZE": "1000",
    # Paced so a cancellation lands midway whatever the machine's speed.
    "AQL_MCP_EXECUTIONS__BATCH_PAUSE_SECONDS": "0.03",
    "AQL_MCP_EXECUTIONS__MAX_LIVE_PER_PRINCIPAL": "3",
    "AQL_MCP_EXECUTIONS__MAX_EXPORT_BYTES": "200000",
}


def ndjson(rows: list[Any]) -> str:
    return base64.b64encode(b"".join(orjson.dumps(row) + b"\n" for row in rows)).decode()


def rows(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"n": i, "name": f"row-{i}"} for i in range(start, start + count)]


def import_params(collection: str, content: str, mime: str = "application/x-ndjson") -> dict[str, Any]:
    return {"collection": collection, "file_content": content, "file_encoding": "base64", "file_mime_type": mime}


def settled(caller: Session, execution_id: str, seconds: float = 60.0) -> dict[str, Any]:
    """The execution once it reached a terminal state."""
    found: dict[str, Any] = {}

    def ended() -> bool:
        found.update(caller.call(READ, "get_execution", execution_id=execution_id)["data"])
        return found["status"] in TERMINAL

    until(ended, f"execution {execution_id} did not end", seconds)
    return found


def record_count(caller: Session, collection: str) -> int:
    listed = caller.call(READ, "list_collections")["data"]["items"]
    return next(int(c["record_count"]) for c in listed if c["name"] == collection)


def follow(caller: Session, arguments: dict[str, Any], token: str, request_id: int = 7) -> Iterator[dict[str, Any]]:
    """A tools/call of the execute tool with `_meta.progressToken`: the messages of its SSE stream."""
    params = {"name": EXECUTE, "arguments": arguments, "_meta": {"progressToken": token}}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    with caller.http.stream("POST", "/mcp", json=body, headers=caller.headers, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data:") and line.removeprefix("data:").strip():
                message = json.loads(line.removeprefix("data:").strip())
                assert not any(leak in json.dumps(message) for leak in LEAKS)
                yield message


def read_resource(caller: Session, uri: str) -> httpx.Response:
    """A `resources/read` of `uri` on the caller's session, checked for leaks."""
    body = {"jsonrpc": "2.0", "id": 9, "method": "resources/read", "params": {"uri": uri}}
    response = caller.http.post("/mcp", json=body, headers=caller.headers)
    assert not any(leak in response.text for leak in LEAKS)
    return response
