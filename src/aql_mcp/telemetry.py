"""What one call leaves behind: a log line, metrics and a span (corporate §15).

The protocol layer reports each tool call here once, with its outcome class; nothing here sees
argument values, so nothing marked sensitive can reach a log line, a label or a span attribute.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from aql_mcp.metrics import Metrics
from aql_mcp.protocol.context import Context
from aql_mcp.tracing import Tracing, set_outcome

log = structlog.get_logger("aql_mcp.calls")

OK, CLIENT_ERROR, AUTH_ERROR, RATE_LIMITED, TIMEOUT, INTERNAL = (
    "ok",
    "client_error",
    "auth_error",
    "rate_limited",
    "timeout",
    "internal",
)


class CallRecord:
    """Filled in while a call runs; read when it ends."""

    __slots__ = ("outcome", "span")

    def __init__(self, span: Any) -> None:
        self.outcome = OK
        self.span = span


class Telemetry:
    def __init__(self, *, metrics: Metrics, tracing: Tracing) -> None:
        self.metrics = metrics
        self.tracing = tracing

    @contextmanager
    def tool_call(self, tool: str, ctx: Context, meta: Any) -> Iterator[CallRecord]:
        """Span, duration, outcome, one log line and the call metrics of one tools/call."""
        started = time.perf_counter()
        attributes = {"mcp.method": "tools/call", "mcp.tool": tool, "mcp.session": (ctx.session_id or "")[:8]}
        with self.tracing.span(f"tools/call {tool}", attributes, meta) as span:
            record = CallRecord(span)
            try:
                yield record
            except BaseException:
                if record.outcome == OK:
                    record.outcome = INTERNAL
                raise
            finally:
                seconds = time.perf_counter() - started
                set_outcome(span, record.outcome)
                self.metrics.call(tool=tool, operation="", outcome=record.outcome, seconds=seconds)
                log.info(
                    "tool_call",
                    tool=tool,
                    outcome=record.outcome,
                    duration_ms=round(seconds * 1000, 2),
                    session_id=(ctx.session_id or "")[:8] or None,
                    subject=ctx.principal.digest if ctx.principal else None,
                    jsonrpc_id=ctx.message_id,
                )

    @contextmanager
    def method(self, method: str, ctx: Context, meta: Any) -> Iterator[None]:
        """The span of a JSON-RPC method other than tools/call."""
        attributes = {"mcp.method": method, "mcp.session": (ctx.session_id or "")[:8]}
        with self.tracing.span(method, attributes, meta):
            yield
