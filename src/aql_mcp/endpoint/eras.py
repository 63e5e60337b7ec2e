"""The era router in front of `/mcp`'s two edges (docs/eras.md).

Each request goes to the legacy edge (`transport.StreamableHTTPEndpoint`: initialize, sessions,
GET/DELETE, `Last-Event-ID`) or the modern edge (`modern.ModernEndpoint`: stateless 2026-07-28),
as `protocol.versions.request_era` decides from its `MCP-Protocol-Version` header, or, for a POST
whose header names no version or a legacy one, from the version its body's `_meta` names
(docs/eras.md, "How the era of a request is decided"). A modern request's `Mcp-Session-Id` and
`Last-Event-ID` are never looked at: the modern edge does not read them.
"""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.types import ASGIApp, Receive, Scope, Send

from aql_mcp.jsonrpc.peek import HeldBody, meta_text
from aql_mcp.protocol.versions import META_VERSION, Era, request_era
from aql_mcp.scope import header

VERSION_HEADER = b"mcp-protocol-version"


class EraRouter:
    def __init__(self, *, legacy: ASGIApp, modern: ASGIApp, modern_enabled: bool) -> None:
        self.legacy = legacy
        self.modern = modern
        self.modern_enabled = modern_enabled

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Returns the edge's awaitable when the headers decide: a GET stream or a listen stream
        # keeps no frame here (docs/connections.md, "What an open stream costs").
        version = header(scope, VERSION_HEADER)
        era = request_era(version, modern_enabled=self.modern_enabled)
        if era is Era.LEGACY and self.modern_enabled and scope["method"] == "POST":
            return self._by_body(scope, receive, send, version)
        return (self.modern if era is Era.MODERN else self.legacy)(scope, receive, send)

    async def _by_body(self, scope: Scope, receive: Receive, send: Send, version: str | None) -> None:
        # Read here, within the body limits in front, and handed to the edge as it came.
        held = HeldBody(receive)
        body = await held.read()
        named = meta_text(body, META_VERSION) if body is not None else None
        era = request_era(version, modern_enabled=True, meta_version=named)
        app = self.modern if era is Era.MODERN else self.legacy
        await app(scope, held.receive, send)
