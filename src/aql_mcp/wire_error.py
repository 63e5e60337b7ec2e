"""The base of every error that reaches the wire, `WireError` (under the root of the error tree,
`AqlMcpError`), and the JSON-RPC codes the errors carry: corporate standard Appendix B, and the
protocol errors of MCP 2026-07-28. The tree itself, and what re-exports these, is aql_mcp.exceptions."""

from __future__ import annotations

from typing import Any, ClassVar

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000
SESSION_NOT_FOUND = -32001
RESOURCE_NOT_FOUND = -32002
RATE_LIMITED = -32003
TIMEOUT = -32004
PAYLOAD_TOO_LARGE = -32005
UPSTREAM_UNAVAILABLE = -32006
CONFLICT = -32007
# MCP 2026-07-28 protocol errors (basic, "Error Codes"); served only in the modern era.
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022


class AqlMcpError(Exception):
    """Base of every error the service raises on purpose."""


class WireError(AqlMcpError):
    """An error with a safe message that may be sent to the client as is."""

    status: ClassVar[int] = 500
    code: ClassVar[int] = INTERNAL_ERROR
    message: ClassVar[str] = "Internal error"
    # Whether the status is sent even for an error answering a request inside a session.
    keeps_status: ClassVar[bool] = False

    def __init__(self, detail: str | None = None, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(detail or self.message)
        self.detail = detail or self.message
        self.data = data or {}
        self.headers: dict[str, str] = {}
