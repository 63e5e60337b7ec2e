"""Traces (OpenTelemetry SDK): a SERVER span per HTTP request, and one per MCP request beside it.

The HTTP span is parented by the incoming W3C `traceparent`/`tracestate` headers. The MCP request's
span follows the OpenTelemetry MCP conventions (docs/monitoring.md, "Traces"): its parent is the
context the client put in `params._meta` (`traceparent`, `tracestate`, `baggage`), else the HTTP
headers' context, else the HTTP span; it links to the HTTP span, because one MCP request may travel
over several HTTP requests and one HTTP request may carry several MCP messages. Without an exporter
nothing is recorded and no span is built, so tracing that is not configured costs nothing; the
incoming trace id still reaches the logs. A request whose trace the sampler does not keep builds
only its HTTP span, which takes the decision (not recording, so never exported): the MCP request
and operation spans under it would follow that decision (`ParentBased`), so they are not built,
and its log lines carry the HTTP span's ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar, Token
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler, TraceIdRatioBased
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])
# The W3C keys a carrier may hold: HTTP headers, or `params._meta` unprefixed (SEP-414).
CARRIER_KEYS = ("traceparent", "tracestate", "baggage")
# The span scope where tracing is off: reusable, entering it does nothing, so one serves every request.
NO_SPAN: AbstractContextManager[None] = nullcontext()


class HttpTrace:
    """The HTTP request an MCP request arrived on: its span (the MCP span's link), the context its
    headers carried (the MCP span's parent when `_meta` names none), its peer's attributes, and
    whether the sampler kept its trace."""

    __slots__ = ("headers_context", "peer", "sampled", "span")

    def __init__(self, span: Span, headers_context: Context | None, peer: Mapping[str, str]) -> None:
        if headers_context is not None and not trace.get_current_span(headers_context).get_span_context().is_valid:
            # A `traceparent` header that does not parse: its baggage is kept, and the MCP span is a
            # child of the HTTP span, in its trace (not the root of a trace of its own).
            headers_context = trace.set_span_in_context(span, headers_context)
        self.span = span
        self.headers_context = headers_context
        self.peer = peer
        self.sampled = span.get_span_context().trace_flags.sampled


def peer_attributes(scope: Mapping[str, Any]) -> dict[str, str]:
    """`network.protocol.version` and `client.address` of an ASGI HTTP scope. The client is the
    peer after uvicorn's proxy-header handling, which reads `X-Forwarded-For` only from
    `server.forwarded_allow_ips` (docs/gateway.md), as the logs and metrics see it."""
    attributes: dict[str, str] = {}
    if isinstance(version := scope.get("http_version"), str) and version:
        attributes["network.protocol.version"] = version
    client = scope.get("client")
    if client and isinstance(client[0], str) and client[0]:
        attributes["client.address"] = client[0]
    return attributes


_HTTP_TRACE: ContextVar[HttpTrace | None] = ContextVar("aql_mcp_http_trace", default=None)


class CurrentSpan:
    """A span started on entry and current until exit, then ended: the SDK's `start_as_current_span`
    without its two generator context managers, a few microseconds per span on every request. As
    there, only an `Exception` is recorded on the span, and sets its ERROR status, unless `start`
    says `record_exception: False` (the MCP request span sets its own).

    `parent`: a context made current before the span starts (the MCP span's carrier, with its
    baggage); `http`: the headers' context and the peer's attributes, kept for the MCP request
    spans this HTTP request carries (`_HTTP_TRACE`)."""

    __slots__ = (
        "_http",
        "_http_token",
        "_name",
        "_parent",
        "_parent_token",
        "_span",
        "_span_token",
        "_start",
        "_tracer",
    )

    def __init__(
        self,
        tracer: trace.Tracer,
        name: str,
        start: dict[str, Any],
        *,
        parent: Context | None = None,
        http: tuple[Context | None, Mapping[str, str]] | None = None,
    ) -> None:
        self._tracer = tracer
        self._name = name
        self._start = start
        self._parent = parent
        self._http = http
        self._parent_token: Token[Context] | None = None
        self._span_token: Token[Context] | None = None
        self._http_token: Token[HttpTrace | None] | None = None
        self._span: Span = trace.INVALID_SPAN

    def __enter__(self) -> Span:
        self._parent_token = otel_context.attach(self._parent) if self._parent is not None else None
        try:
            self._span = span = self._tracer.start_span(self._name, **self._start)
        except BaseException:
            # No `__exit__` follows a failed `__enter__`: the parent must not stay current.
            self._detach_parent()
            raise
        self._span_token = otel_context.attach(trace.set_span_in_context(span))
        if self._http is not None:
            self._http_token = _HTTP_TRACE.set(HttpTrace(span, *self._http))
        return span

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        span = self._span
        try:
            if self._http_token is not None:
                _HTTP_TRACE.reset(self._http_token)
            if self._span_token is not None:
                otel_context.detach(self._span_token)
            if isinstance(exc, Exception) and self._start.get("record_exception", True) and span.is_recording():
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, description=f"{type(exc).__name__}: {exc}"))
        finally:
            try:
                span.end()
            finally:
                self._detach_parent()

    def _detach_parent(self) -> None:
        if self._parent_token is not None:
            otel_context.detach(self._parent_token)
            self._parent_token = None


class CurrentContext:
    """`context` current until exit, with no span: an MCP request whose trace is not sampled."""

    __slots__ = ("_context", "_token")

    def __init__(self, context: Context) -> None:
        self._context = context
        self._token: Token[Context] | None = None

    def __enter__(self) -> None:
        self._token = otel_context.attach(self._context)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._token is not None:
            otel_context.detach(self._token)


def carrier_of(source: Any) -> dict[str, str]:
    """The W3C trace context and baggage entries of a mapping (`_meta` or headers), strings only."""
    if not isinstance(source, Mapping):
        return {}
    return {key: value for key in CARRIER_KEYS if isinstance(value := source.get(key), str)}


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a W3C traceparent, for logs, without building any span."""
    match = TRACEPARENT.match(traceparent.strip()) if traceparent else None
    return match.group(1) if match and match.group(1) != "0" * 32 else None


class Tracing:
    """The tracer of one app; `enabled` is False when there is nowhere to send spans."""

    def __init__(
        self,
        *,
        service: str,
        version: str,
        otlp_endpoint: str | None = None,
        sample_ratio: float = 1.0,
        exporter: SpanExporter | None = None,
    ) -> None:
        self.enabled = exporter is not None or otlp_endpoint is not None
        resource = Resource.create({"service.name": service, "service.version": version})
        # At 1, the OpenTelemetry default (ParentBased(AlwaysOn)): the same decisions as a ratio of
        # 1, without comparing every new trace id to the bound.
        root: Sampler = ALWAYS_ON if sample_ratio >= 1 else TraceIdRatioBased(sample_ratio)
        self.provider = TracerProvider(resource=resource, sampler=ParentBased(root))
        if exporter is not None:
            self.provider.add_span_processor(SimpleSpanProcessor(exporter))
        elif otlp_endpoint is not None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint)))
        self.tracer = self.provider.get_tracer("aql_mcp")

    def server_span(
        self, name: str, carrier: Mapping[str, str], attributes: dict[str, Any], peer: Mapping[str, str]
    ) -> AbstractContextManager[Span | None]:
        """The HTTP request's span, parented by the carrier's traceparent; current while it runs.
        `peer` (`peer_attributes`) goes on it and on each MCP request span it carries."""
        if not self.enabled:
            return NO_SPAN
        headers_context = PROPAGATOR.extract(carrier=dict(carrier)) if "traceparent" in carrier else None
        start = {"context": headers_context, "kind": SpanKind.SERVER, "attributes": {**attributes, **peer}}
        return CurrentSpan(self.tracer, name, start, http=(headers_context, peer))

    def request_span(
        self, name: str, meta: Any, attributes: Callable[[], dict[str, Any]]
    ) -> AbstractContextManager[Span | None]:
        """The SERVER span of one MCP request (module docstring: its parent and its link); current while
        it runs. Its status is the caller's to set: an exception is not always a failure (a modern
        `input_required` answer, a cancellation). `attributes` are asked for only when it is built."""
        if not self.enabled:
            return NO_SPAN
        http = _HTTP_TRACE.get()
        carrier = carrier_of(meta)
        parent: Context | None = None
        if "traceparent" in carrier:
            parent = PROPAGATOR.extract(carrier=carrier)
        elif http is not None:
            parent = http.headers_context
            if not http.sampled:
                # Its parent is the HTTP request's, not sampled: neither would it be. The headers'
                # context (their baggage) is still current while it runs, as with a span, and the
                # HTTP span stays the current one.
                return NO_SPAN if parent is None else CurrentContext(trace.set_span_in_context(http.span, parent))
        links = [Link(http.span.get_span_context())] if http is not None else None
        kept = {**http.peer, **attributes()} if http is not None else attributes()
        start = {"kind": SpanKind.SERVER, "attributes": kept, "links": links, "record_exception": False}
        return CurrentSpan(self.tracer, name, start, parent=parent)

    def span(self, name: str, attributes: dict[str, Any]) -> AbstractContextManager[Span | None]:
        """An INTERNAL child of the current span (an MCP-AQL operation inside its tools/call)."""
        if not self.enabled:
            return NO_SPAN
        parent = trace.get_current_span().get_span_context()
        if parent.is_valid and not parent.trace_flags.sampled:
            return NO_SPAN  # a child of a span not sampled is not sampled either
        return CurrentSpan(self.tracer, name, {"attributes": attributes})

    def shutdown(self) -> None:
        self.provider.shutdown()


def set_outcome(span: Span | None, outcome: str) -> None:
    """MCP-AQL's outcome class on an operation's span; ERROR status only for an internal failure."""
    if span is None:
        return
    span.set_attribute("aql.outcome", outcome)
    if outcome == "internal":
        span.set_status(Status(StatusCode.ERROR))


def set_error(span: Span | None, error_type: str | None, description: str | None) -> None:
    """`error.type` and the ERROR status together, or neither (MCP conventions, server span)."""
    if span is None or error_type is None:
        return
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description))


def span_ids(span: Span | None) -> tuple[str | None, str | None]:
    """The trace and span ids of `span` as the logs write them (hex); None for no span or an invalid one."""
    context = span.get_span_context() if span is not None else None
    if context is None or not context.is_valid:
        return None, None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}"
