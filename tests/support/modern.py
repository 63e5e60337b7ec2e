"""Modern-era (MCP 2026-07-28) requests: the headers that mirror the body and the body with its
per-request `_meta`, shared by the in-process and the end-to-end tests."""

from __future__ import annotations

from typing import Any

from tests.support.asgi import MCP_HEADERS, rpc

MODERN = "2026-07-28"


def modern_headers(token: str, method: str, name: str | None = None, version: str = MODERN) -> dict[str, str]:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}", "mcp-protocol-version": version}
    headers["mcp-method"] = method
    if name is not None:
        headers["mcp-name"] = name
    return headers


def modern_body(method: str, params: dict[str, Any] | None, meta: dict[str, Any], message_id: int | str) -> Any:
    return rpc(method, {**(params or {}), "_meta": meta}, message_id)
