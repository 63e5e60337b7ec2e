"""Modern-era (MCP 2026-07-28) requests: the headers that mirror the body and the body with its
per-request `_meta`, shared by the in-process and the end-to-end tests."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.asgi import MCP_HEADERS, rpc

MODERN = "2026-07-28"


def modern_headers(
    token: str, method: str, name: str | None = None, version: str = MODERN, *, arguments: Any = None
) -> dict[str, str]:
    """The headers mirroring a request's body; with the `arguments` of a `tools/call`, the
    `Mcp-Param-Operation` an MCP-AQL endpoint tool declares (SEP-2243), as a modern client sends it."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}", "mcp-protocol-version": version}
    headers["mcp-method"] = method
    if name is not None:
        headers["mcp-name"] = name
    return {**headers, **operation_header(arguments)}


def operation_header(arguments: Any) -> dict[str, str]:
    """`Mcp-Param-Operation` for a single MCP-AQL operation; nothing for a batch or another tool's
    arguments (a value the endpoint tools' schema would not mirror, such as a number, is left out too)."""
    operation = arguments.get("operation") if isinstance(arguments, dict) else None
    return {"mcp-param-operation": operation} if isinstance(operation, str) else {}


def modern_body(method: str, params: dict[str, Any] | None, meta: dict[str, Any], message_id: int | str) -> Any:
    return rpc(method, {**(params or {}), "_meta": meta}, message_id)


def modern_error(response: httpx.Response, status: int, code: int, message_id: int | str = 41) -> dict[str, Any]:
    """The JSON-RPC error of a refused modern request: its status, its code, the request's own id
    echoed, and no trace of internals."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["id"] == message_id
    assert body["error"]["code"] == code
    assert "traceback" not in response.text.lower()
    error: dict[str, Any] = body["error"]
    return error
