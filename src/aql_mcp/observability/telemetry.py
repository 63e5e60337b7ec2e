"""What one call leaves behind: a log line, metrics and a span (corporate §15).

The protocol layer reports each tool call here once, with its outcome class; nothing here sees
argument values, so nothing marked sensitive can reach a log line, a label or a span attribute.
A call on a delegated token (RFC 8693 `act`) names its actor chain as digests, current actor first:
`actors` on the `tool_call` line and `mcp.actors` on the call's span (docs/identity.md, "Delegation").
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any, Protocol

import anyio
import structlog

from aql_mcp.auth.principal import Principal
from aql_mcp.exceptions import InputRequired, WireError
from aql_mcp.observability.metrics import OUTCOMES, Metrics
from aql_mcp.observability.tracing import Tracing, set_outcome

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


class Context(Protocol):
    """What telemetry reads of a call's context. `protocol.context.Context` has it; a protocol of its
    own keeps observability below the protocol layer that imports it."""

    @property
    def session_id(self) -> str | None: ...

    @property
    def principal(self) -> Principal | None: ...

    @property
    def message_id(self) -> str | int | None: ...


# The tools/call running in this task, so an MCP-AQL operation inside it can name itself there.
_CURRENT_CALL: ContextVar[CallRecord | None] = ContextVar("aql_mcp_current_call", default=None)
# Reusable: entering it does nothing, so one serves every call when tracing is off.
NO_SPAN: AbstractContextManager[None] = nullcontext()


class CallRecord:
    """One tools/call while it runs: the handler sets `outcome`; leaving it writes what the call leaves behind.

    A plain class rather than a generator context manager: it is entered on every call.
    """

    __slots__ = (
        "_ctx",
        "_current",
        "_span_scope",
        "_started",
        "_telemetry",
        "code",
        "codes",
        "operation",
        "outcome",
        "span",
        "tool",
    )

    def __init__(self, telemetry: Telemetry, tool: str, ctx: Context, meta: Any) -> None:
        self._telemetry = telemetry
        self._ctx = ctx
        self.tool = tool
        self.operation = ""
        self.outcome = OK
        # The MCP-AQL error code of a failed operation, or the distinct codes of a batch's failed items.
        self.code: str | None = None
        self.codes: list[str] | None = None
        self._current: Token[CallRecord | None] | None = None
        self.span: Any = None
        self._span_scope: AbstractContextManager[Any] = NO_SPAN
        self._started = 0.0
        if telemetry.tracing.enabled:
            attributes: dict[str, Any] = {
                "mcp.method": "tools/call",
                "mcp.tool": tool,
                "mcp.session": (ctx.session_id or "")[:8],
            }
            if ctx.principal is not None and ctx.principal.actors:
                # The delegation chain as digests, current actor first (docs/identity.md, "Delegation").
                attributes["mcp.actors"] = list(ctx.principal.actor_digests)
            self._span_scope = telemetry.tracing.span(f"tools/call {tool}", attributes, meta)

    def __enter__(self) -> CallRecord:
        self.span = self._span_scope.__enter__()
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
        set_outcome(self.span, self.outcome)
        self._telemetry.metrics.call(tool=self.tool, operation=self.operation, outcome=self.outcome, seconds=seconds)
        ctx = self._ctx
        log.info(
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
        return self._span_scope.__exit__(exc_type, exc, traceback)

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
    def __init__(self, *, metrics: Metrics, tracing: Tracing) -> None:
        self.metrics = metrics
        self.tracing = tracing

    def tool_call(self, tool: str, ctx: Context, meta: Any) -> CallRecord:
        """Span, duration, outcome, one log line and the call metrics of one tools/call."""
        return CallRecord(self, tool, ctx, meta)

    def method(self, method: str, ctx: Context, meta: Any) -> AbstractContextManager[Any]:
        """The span of a JSON-RPC method other than tools/call."""
        if not self.tracing.enabled:
            return NO_SPAN
        attributes = {"mcp.method": method, "mcp.session": (ctx.session_id or "")[:8]}
        return self.tracing.span(method, attributes, meta)

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
            attributes = {
                "mcp.operation": name,
                "mcp.tool": self._call.tool if self._call is not None else "",
                "mcp.session": (ctx.session_id or "")[:8],
            }
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
