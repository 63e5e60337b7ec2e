"""The OperationResult envelope (MCP-AQL §5, the MCP-AQL operation-result schema) and the operation errors.

Handlers raise `OperationError` with a registry code (MCP-AQL error codes); the router turns it
into `{success: false, error: {code, message, details?}}`. Messages are written here or by the
handler, never taken from a foreign exception, so nothing internal reaches the caller.
"""

from __future__ import annotations

from typing import Any

import orjson

from aql_mcp.exceptions import ToolError
from aql_mcp.protocol.content import ToolResult, text

VALIDATION_MISSING_PARAM = "VALIDATION_MISSING_PARAM"
VALIDATION_INVALID_TYPE = "VALIDATION_INVALID_TYPE"
VALIDATION_UNKNOWN_PARAM = "VALIDATION_UNKNOWN_PARAM"
VALIDATION_UNKNOWN_FIELD = "VALIDATION_UNKNOWN_FIELD"
VALIDATION_INVALID_ENCODING = "VALIDATION_INVALID_ENCODING"
VALIDATION_PAYLOAD_TOO_LARGE = "VALIDATION_PAYLOAD_TOO_LARGE"
VALIDATION_ENDPOINT_MISMATCH = "VALIDATION_ENDPOINT_MISMATCH"
VALIDATION_TRUNCATED_WARNING = "VALIDATION_TRUNCATED_WARNING"
NOT_FOUND_OPERATION = "NOT_FOUND_OPERATION"
NOT_FOUND_RESOURCE = "NOT_FOUND_RESOURCE"
PERMISSION_DENIED = "PERMISSION_DENIED"
PERMISSION_DANGER_LEVEL_DENIED = "PERMISSION_DANGER_LEVEL_DENIED"
CONFIRMATION_REQUIRED = "CONFIRMATION_REQUIRED"
CONFLICT_ALREADY_EXISTS = "CONFLICT_ALREADY_EXISTS"
CONFLICT_VERSION_MISMATCH = "CONFLICT_VERSION_MISMATCH"
RATE_LIMIT_QUOTA_EXHAUSTED = "RATE_LIMIT_QUOTA_EXHAUSTED"
RATE_LIMIT_EXCEEDED = "RATE_LIMIT_EXCEEDED"
TOKEN_INVALID = "TOKEN_INVALID"  # noqa: S105
TOKEN_EXPIRED = "TOKEN_EXPIRED"  # noqa: S105
TOKEN_ALREADY_USED = "TOKEN_ALREADY_USED"  # noqa: S105
TOKEN_SCOPE_MISMATCH = "TOKEN_SCOPE_MISMATCH"  # noqa: S105
INTERNAL_ERROR = "INTERNAL_ERROR"

Envelope = dict[str, Any]

# The failures MCP-AQL mcp-integration §4.1.2 calls recoverable (the agent can fix the call, look
# elsewhere, wait or ask), with VALIDATION_UNKNOWN_PARAM, fixed the same way as a wrong type.
# `aql.recoverable_errors: result` answers them with `isError: false` (docs/aql.md).
RECOVERABLE = frozenset(
    {
        NOT_FOUND_RESOURCE,
        NOT_FOUND_OPERATION,
        VALIDATION_MISSING_PARAM,
        VALIDATION_INVALID_TYPE,
        VALIDATION_UNKNOWN_PARAM,
        "VALIDATION_INVALID_VALUE",
        PERMISSION_DENIED,
        RATE_LIMIT_EXCEEDED,
        "RATE_LIMIT_QUOTA_PAUSE",
        CONFIRMATION_REQUIRED,
    }
)


class OperationError(ToolError):
    """A failure the caller can act on, with a registry code and safe details."""

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        confirmation: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        self.confirmation = confirmation

    def envelope(self) -> Envelope:
        return failure(self.code, self.message, self.details, confirmation=self.confirmation)


def success(data: Any, warnings: list[dict[str, Any]] | tuple[dict[str, Any], ...] = ()) -> Envelope:
    out: Envelope = {"success": True, "data": data}
    if warnings:
        out["warnings"] = list(warnings)
    return out


def failure(
    code: str, message: str, details: dict[str, Any] | None = None, *, confirmation: dict[str, Any] | None = None
) -> Envelope:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    out: Envelope = {"success": False, "error": error}
    if confirmation:
        out["confirmation"] = confirmation
    return out


def warning(
    code: str, message: str, details: dict[str, Any] | None = None, severity: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"code": code, "message": message}
    if details:
        out["details"] = details
    if severity:
        out["severity"] = severity
    return out


def to_tool_result(envelope: Envelope, *, recoverable_as_result: bool = False) -> ToolResult:
    """The envelope as JSON text in `content[0]` and as `structuredContent`; `isError` on failure,
    but for a RECOVERABLE one when `recoverable_as_result` (`aql.recoverable_errors: result`)."""
    body = orjson.dumps(envelope).decode("utf-8")
    return ToolResult([text(body)], structured=envelope, is_error=is_error(envelope, recoverable_as_result))


def is_error(envelope: Envelope, recoverable_as_result: bool = False) -> bool:
    """Whether the tool result of `envelope` carries `isError: true` (docs/aql.md, "Recoverable errors")."""
    if envelope.get("success", False):
        return False
    error = envelope.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return not (recoverable_as_result and code in RECOVERABLE)


def wire_size(envelope: Envelope) -> int:
    """Bytes the envelope takes in a tools/call result: once as JSON text, once as structured content.

    From one serialisation (the router measures every candidate page): the envelope, the same
    bytes as a JSON string, and the fixed frame of `to_tool_result` around them.
    """
    body = orjson.dumps(envelope)
    frame = _FRAME[bool(envelope.get("success", False))]
    return frame + len(body) + len(orjson.dumps(body.decode("utf-8")))


def _frame(envelope: Envelope) -> int:
    body = orjson.dumps(envelope)
    return len(orjson.dumps(to_tool_result(envelope).to_wire())) - len(body) - len(orjson.dumps(body.decode("utf-8")))


# The bytes `to_tool_result(...).to_wire()` adds around the envelope, for a failure and a success.
_FRAME = {False: _frame(failure("X", "x")), True: _frame(success(None))}
