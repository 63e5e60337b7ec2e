"""The era router in front of `/mcp`'s two edges (docs/eras.md).

Each request goes to the legacy edge (`transport.StreamableHTTPEndpoint`: initialize, sessions,
GET/DELETE, `Last-Event-ID`) or the modern edge (`modern.ModernEndpoint`: stateless 2026-07-28),
as `protocol.versions.request_era` decides from its `MCP-Protocol-Version` header. A modern request's
`Mcp-Session-Id` and `Last-Event-ID` are never looked at: the modern edge does not read them.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from aql_mcp.protocol.versions import Era, request_era
from aql_mcp.scope import header

VERSION_HEADER = b"mcp-protocol-version"


class EraRouter:
    def __init__(self, *, legacy: ASGIApp, modern: ASGIApp, modern_enabled: bool) -> None:
        self.legacy = legacy
        self.modern = modern
        self.modern_enabled = modern_enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        era = request_era(header(scope, VERSION_HEADER), modern_enabled=self.modern_enabled)
        app = self.modern if era is Era.MODERN else self.legacy
        await app(scope, receive, send)
