"""The one error tree of the service.

Every error that can reach the wire carries its HTTP status (used only when the error ends the
HTTP exchange before any JSON-RPC handling, or when `keeps_status` says the status is the signal)
and its JSON-RPC code (corporate standard Appendix B). `responses.error_object` is the one function
that turns any exception into a wire error. Every "retry later" answer is a `RetryableError`: one
construction gives it the `Retry-After` header and `data.retryAfter`.

    AqlMcpError
    ├── ConfigError                     startup only, never on the wire
    │   └── (SchemaTooNew, store/migration.py: the store needs a newer release)
    └── WireError                       status, code, safe message, data
        ├── ParseError                  400  -32700
        ├── InvalidRequest              400  -32600
        │   ├── BatchNotSupported
        │   ├── MissingSession
        │   ├── UnsupportedProtocolVersion
        │   ├── SessionAlreadyInitialized
        │   └── NestingTooDeep          (a message nested past jsonrpc/messages.py MAX_DEPTH)
        ├── MethodNotFound              404  -32601
        ├── MissingClientCapability     400  -32021   (modern: the request's _meta lacks a capability it needs)
        ├── InvalidParams               400  -32602
        │   └── UnknownTool
        ├── InternalError               500  -32603
        ├── ResourceNotFound            404  -32002
        ├── PayloadTooLarge             413  -32005
        │   └── HeadersTooLarge     431   (request line and headers, refused by the connection)
        ├── RequestTimeout              408  -32004   (the client was too slow to send its request)
        ├── RetryableError              (+ Retry-After, data.retryAfter; status kept in a session)
        │   ├── RateLimited             429  -32003
        │   └── RetryLater              503  -32006   (also an UpstreamUnavailable)
        │       ├── StoreError                (a store engine failed; its detail stays in the log)
        │       │   └── (TurnTimedOut, store/fair_share.py: no scan turn within the listing's time)
        │       ├── SessionLimitReached       (the session table is full)
        │       ├── ConnectionLimitReached    (data.limit "connections" or "connections_per_source";
        │       │                              refused before reading anything)
        │       ├── IntrospectionBudgetSpent  (an unknown opaque token while the IdP budget is spent)
        │       ├── ListenLimitReached        (this replica holds `streams.max_listens` listen streams)
        │       └── ShuttingDown              (a wait for the client's answer ended by SIGTERM)
        ├── ToolTimeout                 504  -32004
        ├── InsufficientScope           403  -32000   (WWW-Authenticate error="insufficient_scope")
        ├── UpstreamUnavailable         503  -32006   (no Retry-After: a store that is not open)
        ├── Conflict                    409  -32007
        ├── SessionNotFound             404  -32001   (unknown, expired or deleted session)
        ├── StreamGone                  410  -32600   (resuming a stream that has ended)
        ├── NotAcceptable               406  -32600
        ├── UnsupportedMediaType        415  -32600
        ├── Forbidden                   403  -32600
        │   ├── OriginNotAllowed
        │   ├── HostNotAllowed      421   (Misdirected Request)
        │   └── (the console's CsrfRefused and LoginCodeRefused, plugins/safety/console/refusal.py)
        └── AuthError                   401  -32000   (HTTP 401 is the signal, corporate §7.4)
            ├── MissingToken
            └── InvalidToken
    ToolError                           a tool's own failure: an `isError: true` result, not a wire error
    CapabilityNotDeclared (ToolError)   the client did not declare sampling / elicitation
    InputRequired                       not an error: a modern request's handler needs the client's input
                                        first; the modern edge answers `input_required` (endpoint/modern/rounds.py)
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

# The root, the wire errors' base and their codes live below this module (wire_error.py); the names
# importers take from here are re-exported explicitly (`as`), so those imports stay as they were.
from aql_mcp.wire_error import CONFLICT, INTERNAL_ERROR, PAYLOAD_TOO_LARGE, SERVER_ERROR, SESSION_NOT_FOUND, TIMEOUT
from aql_mcp.wire_error import HEADER_MISMATCH as HEADER_MISMATCH
from aql_mcp.wire_error import INVALID_PARAMS as INVALID_PARAMS
from aql_mcp.wire_error import INVALID_REQUEST as INVALID_REQUEST
from aql_mcp.wire_error import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from aql_mcp.wire_error import MISSING_CLIENT_CAPABILITY as MISSING_CLIENT_CAPABILITY
from aql_mcp.wire_error import PARSE_ERROR as PARSE_ERROR
from aql_mcp.wire_error import RATE_LIMITED as RATE_LIMITED
from aql_mcp.wire_error import RESOURCE_NOT_FOUND as RESOURCE_NOT_FOUND
from aql_mcp.wire_error import UNSUPPORTED_PROTOCOL_VERSION as UNSUPPORTED_PROTOCOL_VERSION
from aql_mcp.wire_error import UPSTREAM_UNAVAILABLE as UPSTREAM_UNAVAILABLE
from aql_mcp.wire_error import AqlMcpError as AqlMcpError
from aql_mcp.wire_error import WireError as WireError


class ConfigError(AqlMcpError):
    """A setting is missing, malformed or unsafe; the message names the setting and its variable."""


class ParseError(WireError):
    status, code, message = 400, PARSE_ERROR, "Parse error: the body is not valid UTF-8 JSON"


class InvalidRequest(WireError):
    status, code, message = 400, INVALID_REQUEST, "Invalid request"


class BatchNotSupported(InvalidRequest):
    message = "Invalid request: JSON-RPC batches are not accepted; send one message per POST"


class MissingSession(InvalidRequest):
    message = "Bad request: MCP-Session-Id header is required; send initialize first"


class UnsupportedProtocolVersion(InvalidRequest):
    message = "Bad request: unsupported MCP-Protocol-Version"


class HeaderMismatch(WireError):
    """A mirrored header (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`) missing,
    malformed or not matching the body (MCP 2026-07-28 Streamable HTTP, "Server Validation");
    `data.header` names it."""

    status, code, message = 400, HEADER_MISMATCH, "Header mismatch"


class MissingClientCapability(WireError):
    """A modern request needs a client capability its `_meta` does not declare: `MissingRequiredClientCapabilityError`,
    `data.requiredCapabilities` a ClientCapabilities object such as `{"sampling": {}}` (2026-07-28 basic)."""

    status, code, message = 400, MISSING_CLIENT_CAPABILITY, "Missing required client capability"

    def __init__(self, capability: str) -> None:
        super().__init__(data={"requiredCapabilities": {capability: {}}})


class MissingClientExtension(MissingClientCapability):
    """A modern request needs an extension its `_meta` capabilities do not declare, such as the Tasks
    extension for a tool that only runs as a task: `data.requiredCapabilities.extensions` names it."""

    def __init__(self, extension: str) -> None:
        WireError.__init__(self, data={"requiredCapabilities": {"extensions": {extension: {}}}})


class UnsupportedModernVersion(WireError):
    """The modern `UnsupportedProtocolVersionError`: `data` names `supported` and `requested`."""

    status, code, message = 400, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version"


class SessionAlreadyInitialized(InvalidRequest):
    message = "Invalid request: initialize must be sent without MCP-Session-Id"


class NestingTooDeep(InvalidRequest):
    message = "Invalid request: the message nests too deeply"


class MethodNotFound(WireError):
    status, code, message = 404, METHOD_NOT_FOUND, "Method not found"


class InvalidParams(WireError):
    status, code, message = 400, INVALID_PARAMS, "Invalid params"


class UnknownTool(InvalidParams):
    message = "Unknown tool"


class InternalError(WireError):
    status, code, message = 500, INTERNAL_ERROR, "Internal error"


class ResourceNotFound(WireError):
    status, code, message = 404, RESOURCE_NOT_FOUND, "Resource not found"


class PayloadTooLarge(WireError):
    status, code, message = 413, PAYLOAD_TOO_LARGE, "Payload too large"


class HeadersTooLarge(PayloadTooLarge):
    """The request head is over `http.max_header_bytes` or `http.max_headers` (RFC 6585 §5)."""

    status, message = 431, "Request header fields too large"


class RequestTimeout(WireError):
    """The head or body did not arrive in time (RFC 9110 §15.5.9); the connection is closed.

    The code is the timeout class of corporate §13.2; the status says it was the client's slowness."""

    status, code, message = 408, TIMEOUT, "Request timeout: the request did not arrive in time"

    def __init__(self, detail: str | None = None, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(detail, data=data)
        self.headers["connection"] = "close"


class RetryableError(WireError):
    """An error that tells the client when to try again: the `Retry-After` header (RFC 9110 §10.2.3)
    and the same seconds in `data.retryAfter`. The status is the signal, so it is kept even for an
    error answering a request inside a session (docs/errors.md)."""

    keeps_status = True

    def __init__(self, detail: str | None = None, *, retry_after: int, data: dict[str, Any] | None = None) -> None:
        super().__init__(detail, data={**(data or {}), "retryAfter": retry_after})
        self.retry_after = retry_after
        self.headers["retry-after"] = str(retry_after)


class RateLimited(RetryableError):
    """Too many calls, concurrent calls or sessions for one principal (corporate §14)."""

    status, code, message = 429, RATE_LIMITED, "Rate limited; retry later"


class TaskLimitReached(RateLimited):
    """The caller already has `mcp.max_tasks_per_principal` tasks working or waiting for input."""

    message = "Too many tasks in progress for this caller; retry when one has finished"


class ToolTimeout(WireError):
    status, code, message = 504, TIMEOUT, "Timeout: the call did not finish within its time limit"
    keeps_status = True


class InsufficientScope(WireError):
    """The token may not use the MCP endpoint at all (HTTP 403 before the body is read)."""

    status, code, message = 403, SERVER_ERROR, "Forbidden: the token lacks a required scope"

    def __init__(self, missing: tuple[str, ...], delegation: str | None = None) -> None:
        data = {"reason": "insufficient_scope", "scope": " ".join(missing)}
        if delegation is not None:
            # The token carries the scope, but the delegation policy withheld it (docs/errors.md).
            data["delegation"] = delegation
        super().__init__(data=data)
        self.missing = missing
        self.delegation = delegation


class UpstreamUnavailable(WireError):
    status, code, message = 503, UPSTREAM_UNAVAILABLE, "Service unavailable"


class RetryLater(RetryableError, UpstreamUnavailable):
    """503 with `Retry-After` and `data.retryAfter` (seconds), even inside a session."""


class StoreError(RetryLater):
    """The engine failed or is out of reach: 503 with `Retry-After`, even inside a session, so a
    client backs off and retries; what the engine did not commit did not happen."""

    message = "Service unavailable: the store could not complete the operation"
    RETRY_AFTER = 2

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail, retry_after=self.RETRY_AFTER)


class SessionLimitReached(RetryLater):
    """The session table is full (`sessions.max_open`); raised by `initialize`, before any session."""

    message = "Too many open sessions; retry later"


class ConnectionLimitReached(RetryLater):
    """Every connection slot of the replica is taken (`http.max_connections`, `data.limit`
    "connections"), or every slot of the client's source address (`http.max_connections_per_source`,
    "connections_per_source"); refused before anything is read, so the connection is closed after
    the answer."""

    message = "Service unavailable: too many open connections; retry later"
    RETRY_AFTER = 1

    def __init__(self, limit: str = "connections") -> None:
        super().__init__(retry_after=self.RETRY_AFTER, data={"limit": limit})
        self.headers["connection"] = "close"


class IntrospectionBudgetSpent(RetryLater):
    """This replica's budget of introspection calls is spent: an opaque token it does not know yet is
    not judged at all. Not a 401: the token may well be valid, and a client told `invalid_token`
    would throw it away and fetch another from the IdP (RFC 6750 §3.1), the load this budget holds off."""

    message = "Service unavailable: the token cannot be checked right now; retry later"


class ListenLimitReached(RetryLater):
    """This replica holds `streams.max_listens` `subscriptions/listen` streams, or is shutting down;
    another replica may have room."""

    message = "Service unavailable: too many open subscription streams; retry later"


class ShuttingDown(RetryLater):
    """The replica is stopping while the call waited for the client's answer (elicitation, sampling);
    that answer could no longer reach it, so the call ends now and the client retries elsewhere.
    `retry_ms` is the SSE reconnection hint (`streams.retry_ms`); `retryAfter` the same in seconds."""

    message = "Service unavailable: the server is shutting down; retry the call"

    def __init__(self, *, retry_ms: int) -> None:
        super().__init__(retry_after=max(1, math.ceil(retry_ms / 1000)))
        self.retry_ms = retry_ms


class ReplicaLost(ShuttingDown):
    """The replica running a task stopped renewing its lease (it died, or lost the store): another
    replica failed the task, which cannot resume an arbitrary handler; the call may be retried."""

    message = "Service unavailable: the replica running this task was lost; retry the call"


class ReplicaGone(RetryLater):
    """The replica answering a request died before it answered: a replica following the request's
    stream ends it with this (docs/connections.md, "A stream whose replica died"). Whether the
    call took effect is unknown; the client decides whether to call again."""

    message = "Service unavailable: the replica answering this request stopped before it answered"
    RETRY_AFTER = 1

    def __init__(self) -> None:
        super().__init__(retry_after=self.RETRY_AFTER, data={"reason": "replica_gone"})


class Conflict(WireError):
    status, code, message = 409, CONFLICT, "Conflict"


class StreamGone(WireError):
    status, code, message = 410, INVALID_REQUEST, "Gone: nothing more will be sent on that stream"


class SessionNotFound(WireError):
    status, code, message = 404, SESSION_NOT_FOUND, "Session not found; start a new session with initialize"


class NotAcceptable(WireError):
    status, code, message = 406, INVALID_REQUEST, "Not acceptable"


class UnsupportedMediaType(WireError):
    status, code, message = (
        415,
        INVALID_REQUEST,
        "Unsupported media type: Content-Type must be application/json",
    )


class Forbidden(WireError):
    status, code, message = 403, INVALID_REQUEST, "Forbidden"


class OriginNotAllowed(Forbidden):
    message = "Forbidden: Origin not allowed"


class HostNotAllowed(Forbidden):
    status = 421
    message = "Misdirected request: Host not allowed"


class AuthError(WireError):
    status, code, message = 401, SERVER_ERROR, "Unauthorized"
    reason: ClassVar[str] = "invalid_token"


class MissingToken(AuthError):
    message = "Unauthorized: a bearer token is required"
    reason = "missing_token"


class InvalidToken(AuthError):
    message = "Unauthorized: the bearer token is invalid or expired"
    reason = "invalid_token"


class ToolError(AqlMcpError):
    """Raised by a tool handler for a failure the model can act on: becomes `isError: true`."""


class CapabilityNotDeclared(ToolError):
    """The handler needs a client capability (sampling, elicitation) the client did not declare."""


class InputRequired(AqlMcpError):
    """Not a failure: a modern request's handler needs answers from the client before it can go on.

    Raised by `Context.ask` (and so by `elicit`, `sample`, `list_roots`) in the modern era; it travels
    through the tool, prompt, resource and MCP-AQL layers untouched, and the modern edge answers it
    with an `InputRequiredResult` whose signed `requestState` lets any replica take up the retry
    (2026-07-28 basic/patterns/mrtr, docs/eras.md "Asking the client").
    """

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__("input required")
        self.requests = requests
