"""MCP-Protocol-Version: a version the server does not serve is 400 (2025-11-25 transports)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from aql_mcp.exceptions import UnsupportedProtocolVersion
from aql_mcp.protocol.lifecycle import LEGACY_VERSIONS, is_supported
from aql_mcp.responses import send_error
from aql_mcp.scope import header, request_id_of

VERSION_HEADER = b"mcp-protocol-version"


class ProtocolVersionMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        version = header(scope, VERSION_HEADER) if scope["type"] == "http" else None
        if version is not None and not is_supported(version):
            # Code -32600, not the modern -32022: a 2026-07-28 client reads it as "legacy server,
            # fall back to initialize" (MCP 2026-07-28, Versioning, "Backward Compatibility").
            error = UnsupportedProtocolVersion(data={"supported": list(LEGACY_VERSIONS)})
            await send_error(send, error, request_id=request_id_of(scope))
            return
        await self.app(scope, receive, send)
