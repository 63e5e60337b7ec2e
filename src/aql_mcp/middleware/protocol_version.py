"""MCP-Protocol-Version: a version no edge serves is 400 (2025-11-25 transports).

Which versions an edge serves is `protocol/versions.py`'s decision (`request_era`): with
`mcp.modern_era` off, a 2026-07-28 request ends here exactly as before the modern era existed.
"""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.types import ASGIApp, Receive, Scope, Send

from aql_mcp.exceptions import UnsupportedProtocolVersion
from aql_mcp.protocol.versions import Era, request_era, supported_versions
from aql_mcp.responses import send_error
from aql_mcp.scope import header, request_id_of

VERSION_HEADER = b"mcp-protocol-version"


class ProtocolVersionMiddleware:
    def __init__(self, app: ASGIApp, *, modern_enabled: bool = False) -> None:
        self.app = app
        self.modern_enabled = modern_enabled

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Returns the next app's awaitable: a request let through keeps no frame here (host.py).
        version = header(scope, VERSION_HEADER) if scope["type"] == "http" else None
        if version is not None and request_era(version, modern_enabled=self.modern_enabled) is Era.UNKNOWN:
            # Code -32600, not the modern -32022: a 2026-07-28 client reads it as "legacy server,
            # fall back to initialize" (MCP 2026-07-28, Versioning, "Backward Compatibility").
            error = UnsupportedProtocolVersion(data={"supported": supported_versions(modern_enabled=False)})
            return send_error(send, error, request_id=request_id_of(scope))
        return self.app(scope, receive, send)
