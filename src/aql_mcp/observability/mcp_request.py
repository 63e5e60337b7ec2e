"""One MCP request as telemetry sees it: its SERVER span and its `mcp.server.operation.duration`.

The span and the metric follow the OpenTelemetry MCP semantic conventions (docs/monitoring.md,
"Traces"): the span is named `{mcp.method.name} {target}`, the target being the registered tool or
prompt the request names (never a resource URI, which would make names unbounded); `error.type` is
the JSON-RPC error code of the answer, or `tool_error` for a tool result with `isError`, and the
status is ERROR exactly when `error.type` is set. Log lines written while the request runs carry
the span's `trace_id` and `span_id`.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any, Protocol

import anyio

from aql_mcp.auth.principal import Principal
from aql_mcp.exceptions import InputRequired, InternalError, WireError
from aql_mcp.observability.logging import end_log_context, extend_log_context
from aql_mcp.observability.mcp_metrics import McpMetrics
from aql_mcp.observability.tracing import NO_SPAN, Tracing, carrier_of, set_error, span_ids, trace_id_of

RESOURCE_METHODS = ("resources/read", "resources/subscribe", "resources/unsubscribe")
TOOL_CALL = "tools/call"
TOOL_ERROR = "tool_error"
# A resource URI is caller input: kept on the span, cut to a length no backend chokes on.
MAX_URI = 512
# Session ids are cut to this prefix, as on log lines: enough to tell sessions apart and match a
# trace to its log lines, without handing a tracing backend the whole id the session is reached by.
SESSION_PREFIX = 8


class Context(Protocol):
    """What an MCP request's telemetry reads of its context (`protocol.context.Context` has it)."""

    @property
    def session_id(self) -> str | None: ...

    @property
    def protocol_version(self) -> str | None: ...

    @property
    def principal(self) -> Principal | None: ...

    @property
    def message_id(self) -> str | int | None: ...


class RequestFacts:
    """The context of a request refused before a handler's context exists (the modern era's checks of
    headers, `_meta` and method): what the client said, and who it is."""

    __slots__ = ("message_id", "principal", "protocol_version", "session_id")

    def __init__(self, *, message_id: str | int | None, principal: Principal | None, protocol_version: Any) -> None:
        self.message_id = message_id
        self.principal = principal
        # Caller input not yet checked: kept if it is a string, cut short.
        self.protocol_version = protocol_version[:64] if isinstance(protocol_version, str) else None
        self.session_id: str | None = None


_CURRENT_REQUEST: ContextVar[McpRequest | None] = ContextVar("aql_mcp_current_request", default=None)


def current_request() -> McpRequest | None:
    """The MCP request running in this task, if any: its handler names the tool or prompt there."""
    return _CURRENT_REQUEST.get()


class McpRequest:
    """One MCP request while it runs; leaving it ends the span and records the duration.

    A plain class rather than a generator context manager: it is entered on every request.
    """

    __slots__ = (
        "_current",
        "_log_token",
        "_meta",
        "_metrics",
        "_span_scope",
        "_started",
        "description",
        "error_type",
        "method",
        "prompt",
        "protocol_version",
        "span",
        "tool",
    )

    def __init__(
        self, tracing: Tracing, metrics: McpMetrics, method: str, ctx: Context, params: dict[str, Any]
    ) -> None:
        self._metrics = metrics
        self.method = method
        self.protocol_version = ctx.protocol_version
        self.tool: str | None = None
        self.prompt: str | None = None
        self.error_type: str | None = None
        self.description: str | None = None
        self.span: Any = None
        self._meta = params.get("_meta")
        self._current: Token[McpRequest | None] | None = None
        self._log_token: Token[dict[str, Any]] | None = None
        self._started = 0.0
        self._span_scope: AbstractContextManager[Any] = NO_SPAN
        if tracing.enabled:
            self._span_scope = tracing.request_span(method, self._meta, lambda: request_attributes(method, ctx, params))

    def __enter__(self) -> McpRequest:
        self.span = self._span_scope.__enter__()
        self._current = _CURRENT_REQUEST.set(self)
        if self.span is not None:
            trace_id, span_id = span_ids(self.span)
            self._log_token = extend_log_context(trace_id=trace_id, span_id=span_id)
        elif trace_id := trace_id_of(carrier_of(self._meta).get("traceparent")):
            self._log_token = extend_log_context(trace_id=trace_id)
        self._started = time.perf_counter()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool | None:
        seconds = time.perf_counter() - self._started
        if exc is not None and self.error_type is None:
            self.error_type, self.description = error_of(exc)
        if self.span is not None and self.error_type is not None:
            set_error(self.span, self.error_type, self.description)
            if self.error_type != TOOL_ERROR:
                self.span.set_attribute("rpc.response.status_code", self.error_type)
        self._metrics.operation(
            method=self.method,
            seconds=seconds,
            tool=self.tool,
            prompt=self.prompt,
            error_type=self.error_type,
            protocol_version=self.protocol_version,
        )
        if self._current is not None:
            _CURRENT_REQUEST.reset(self._current)
        if self._log_token is not None:
            end_log_context(self._log_token)
        return self._span_scope.__exit__(exc_type, exc, traceback)

    def name_tool(self, tool: str) -> None:
        """The registered tool this tools/call runs: the span's target and `gen_ai.tool.name`."""
        self.tool = tool
        if self.span is not None:
            self.span.update_name(f"{self.method} {tool}")
            self.span.set_attribute("gen_ai.tool.name", tool)

    def name_prompt(self, prompt: str) -> None:
        """The registered prompt this prompts/get renders: the span's target and `gen_ai.prompt.name`."""
        self.prompt = prompt
        if self.span is not None:
            self.span.update_name(f"{self.method} {prompt}")
            self.span.set_attribute("gen_ai.prompt.name", prompt)

    def answered(self, result: Any) -> None:
        """The request's result: a tool result with `isError` is the convention's `tool_error`."""
        if self.method == TOOL_CALL and isinstance(result, dict) and result.get("isError") is True:
            self.error_type = TOOL_ERROR
            self.description = "tool result with isError"

    def set_attribute(self, key: str, value: Any) -> None:
        if self.span is not None:
            self.span.set_attribute(key, value)


def request_attributes(method: str, ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    """The convention's attributes known when the request starts (the target comes later)."""
    attributes: dict[str, Any] = {
        "mcp.method.name": method,
        "network.transport": "tcp",
        "network.protocol.name": "http",
    }
    if ctx.protocol_version:
        attributes["mcp.protocol.version"] = ctx.protocol_version
    if ctx.session_id:
        attributes["mcp.session.id"] = ctx.session_id[:SESSION_PREFIX]
    # A notification, or a request whose id is null, has no id to name (convention: not captured).
    if ctx.message_id is not None:
        attributes["jsonrpc.request.id"] = str(ctx.message_id)
    if method in RESOURCE_METHODS and isinstance(uri := params.get("uri"), str):
        attributes["mcp.resource.uri"] = uri[:MAX_URI]
    if method == TOOL_CALL:
        attributes["gen_ai.operation.name"] = "execute_tool"
        if ctx.principal is not None and ctx.principal.actors:
            # The delegation chain as digests, current actor first (docs/identity.md, "Delegation"); the
            # conventions have no name for it, so it keeps its own.
            attributes["mcp.actors"] = list(ctx.principal.actor_digests)
    return attributes


def error_of(exc: BaseException) -> tuple[str | None, str | None]:
    """`error.type` and status description of a request its handler left with `exc`: the JSON-RPC
    code it is answered with (responses.error_object maps the same way). A modern `input_required`
    answer is a result, and a cancelled request gets no answer: neither is an error."""
    if isinstance(exc, InputRequired | anyio.get_cancelled_exc_class()):
        return None, None
    if isinstance(exc, WireError):
        return str(exc.code), exc.detail
    return str(InternalError.code), InternalError.message
