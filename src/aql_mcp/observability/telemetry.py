"""What one call leaves behind: a log line, metrics and span attributes (corporate §15).

The protocol layer reports each tool call here once, with its outcome class; nothing here sees
argument values, so nothing marked sensitive can reach a log line, a label or a span attribute.
Each MCP request has one SERVER span (observability/mcp_request.py); a tools/call names its tool
there, and each MCP-AQL operation inside it is a child span. A call on a delegated token (RFC 8693
`act`) names its actor chain as digests, current actor first: `actors` on the `tool_call` line and
`mcp.actors` on the request's span (docs/identity.md, "Delegation").
"""

from __future__ import annotations

import contextlib
import time
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any

import anyio
import structlog

from aql_mcp.exceptions import InputRequired, WireError
from aql_mcp.observability.logging import info_line
from aql_mcp.observability.mcp_metrics import McpMetrics
from aql_mcp.observability.mcp_request import Context, McpRequest, current_request
from aql_mcp.observability.metrics import OUTCOMES, Metrics
from aql_mcp.observability.tracing import NO_SPAN, Tracing, set_outcome

log = structlog.get_logger("aql_mcp.calls")

# The outcome classes are the metrics' label values, named here for the code that sets them.
OK, CLIENT_ERROR, AUTH_ERROR, RATE_LIMITED, TIMEOUT, INTERNAL, INPUT_REQUIRED, CANCELLED = OUTCOMES
# MCP-AQL error codes by the outcome class they count as; every other failure is a client error.
OPERATION_OUTCOMES = {
    "INTERNAL_ERROR": INTERNAL,
    "RATE_LIMIT_QUOTA_EXHAUSTED": RATE_LIMITED,
    "PERMISSION_DENIED": AUTH_ERROR,
    "PERMISSION_DANGER_LEVEL_DENIED": AUTH_ERROR,
}
BATCH = "batch"
# The most distinct MCP-AQL error codes one batch's `tool_call` line names (a batch holds up to
# `aql.max_batch_size` items; the registry has a few dozen codes, so ten tells the story).
MAX_LOGGED_CODES = 10


# The tools/call running in this task, so an MCP-AQL operation inside it can name itself there.
_CURRENT_CALL: ContextVar[CallRecord | None] = ContextVar("aql_mcp_current_call", default=None)


class CallRecord:
    """One tools/call while it runs: the handler sets `outcome`; leaving it writes what the call leaves behind.

    A plain class rather than a generator context manager: it is entered on every call.
    """

    __slots__ = (
        "_ctx",
        "_current",
        "_request",
        "_started",
        "_telemetry",
        "code",
        "codes",
        "operation",
        "outcome",
        "tool",
    )

    def __init__(self, telemetry: Telemetry, tool: str, ctx: Context, *, known: bool) -> None:
        self._telemetry = telemetry
        self._ctx = ctx
        self.tool = tool
        self.operation = ""
        self.outcome = OK
        # The MCP-AQL error code of a failed operation, or the distinct codes of a batch's failed items.
        self.code: str | None = None
        self.codes: list[str] | None = None
        self._current: Token[CallRecord | None] | None = None
        self._started = 0.0
        self._request = current_request()
        # Only a registered tool names the request's span: an unknown name is caller input.
        if known and self._request is not None:
            self._request.name_tool(tool)

    def __enter__(self) -> CallRecord:
        self._current = _CURRENT_CALL.set(self)
        self._started = time.perf_counter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool | None:
        seconds = time.perf_counter() - self._started
        if self._current is not None:
            _CURRENT_CALL.reset(self._current)
        if exc is not None and self.outcome == OK:
            self.outcome = _outcome_of(exc)
        if self._request is not None:
            # MCP-AQL's own outcome class; the status is the request's, set from `error.type`.
            self._request.set_attribute("aql.outcome", self.outcome)
            if self.operation:
                self._request.set_attribute("aql.operation", self.operation)
        self._telemetry.metrics.call(tool=self.tool, operation=self.operation, outcome=self.outcome, seconds=seconds)
        ctx = self._ctx
        info_line(
            log,
            "tool_call",
            tool=self.tool,
            operation=self.operation or None,
            outcome=self.outcome,
            code=self.code,
            codes=self.codes,
            duration_ms=round(seconds * 1000, 2),
            session_id=(ctx.session_id or "")[:8] or None,
            subject=ctx.principal.digest if ctx.principal else None,
            actors=list(ctx.principal.actor_digests) or None if ctx.principal else None,
            jsonrpc_id=ctx.message_id,
        )
        return None

    def operation_failed(self, code: str) -> None:
        """The MCP-AQL call as a whole failed with `code` (an operation, or a batch refused whole)."""
        self.code = code

    def items_failed(self, codes: list[str]) -> None:
        """Batch items failed with `codes` (none: every item succeeded)."""
        self.codes = distinct_codes(codes)


def distinct_codes(codes: list[str]) -> list[str] | None:
    """Each distinct code once, in order of first failure, at most MAX_LOGGED_CODES; None if none."""
    return list(dict.fromkeys(codes))[:MAX_LOGGED_CODES] or None


def current_call() -> CallRecord | None:
    """The tools/call running in this task, if any: an MCP-AQL endpoint reports its codes there."""
    return _CURRENT_CALL.get()


class Telemetry:
    """Metrics (the service's own and the MCP conventions' histograms) and tracing of one app."""

    def __init__(self, *, metrics: Metrics, tracing: Tracing, mcp_metrics: McpMetrics) -> None:
        self.metrics = metrics
        self.tracing = tracing
        self.mcp_metrics = mcp_metrics

    def tool_call(self, tool: str, ctx: Context, *, known: bool = True) -> CallRecord:
        """Duration, outcome, one log line and the call metrics of one tools/call; a `known` tool
        names the request's span."""
        return CallRecord(self, tool, ctx, known=known)

    def request(self, method: str, ctx: Context, params: dict[str, Any]) -> McpRequest:
        """The SERVER span and `mcp.server.operation.duration` of one MCP request (any method)."""
        return McpRequest(self.tracing, self.mcp_metrics, method, ctx, params)

    def refused(self, method: str, ctx: Context, params: dict[str, Any], exc: BaseException) -> None:
        """The span and duration of a request refused before dispatch, with the error it is answered with."""
        with contextlib.suppress(type(exc)), self.request(method[:128], ctx, params):
            raise exc

    def operation(self, name: str, ctx: Context, *, batch: bool) -> OperationRecord:
        """An MCP-AQL operation inside the current tools/call: a child span, and the call's
        `operation` label (`batch` for a batch, whose items each get a log line of their own)."""
        return OperationRecord(self, name, ctx, batch=batch)


class OperationRecord:
    """One MCP-AQL operation while it runs; the router sets the error code it ended with.

    A plain context manager, like `CallRecord`: it is entered for every operation.
    """

    __slots__ = ("_batch", "_call", "_ctx", "_name", "_span_scope", "_started", "code", "outcome", "span")

    def __init__(self, telemetry: Telemetry, name: str, ctx: Context, *, batch: bool) -> None:
        self._name = name
        self._ctx = ctx
        self._batch = batch
        self._call = _CURRENT_CALL.get()
        self.outcome = OK
        self.code: str | None = None
        self.span: Any = None
        self._started = 0.0
        self._span_scope: AbstractContextManager[Any] = NO_SPAN
        if self._call is not None:
            self._call.operation = BATCH if batch else name
        if telemetry.tracing.enabled:
            attributes = {"aql.operation": name}
            if self._call is not None:
                attributes["gen_ai.tool.name"] = self._call.tool
            self._span_scope = telemetry.tracing.span(f"aql {name}", attributes)

    def __enter__(self) -> OperationRecord:
        self.span = self._span_scope.__enter__()
        if self._batch:
            self._started = time.perf_counter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool | None:
        if exc is not None and self.outcome == OK:
            self.outcome = _outcome_of(exc)
        set_outcome(self.span, self.outcome)
        if self._batch:
            log.info(
                "operation",
                tool=self._call.tool if self._call is not None else None,
                operation=self._name,
                outcome=self.outcome,
                code=self.code,
                duration_ms=round((time.perf_counter() - self._started) * 1000, 2),
                jsonrpc_id=self._ctx.message_id,
            )
        return self._span_scope.__exit__(exc_type, exc, traceback)

    def failed(self, code: str) -> None:
        self.code = code
        self.outcome = OPERATION_OUTCOMES.get(code, CLIENT_ERROR)


def _outcome_of(exc: BaseException) -> str:
    """The outcome of a call its handler left with an exception: a question for the client
    (modern era), a cancellation (the client's, or its connection closing), the caller's mistake
    (a 4xx wire error such as -32021), or an internal failure."""
    if isinstance(exc, InputRequired):
        return INPUT_REQUIRED
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return CANCELLED
    if isinstance(exc, WireError) and exc.status < 500:
        return CLIENT_ERROR
    return INTERNAL
