"""Traces (OpenTelemetry SDK): a SERVER span per HTTP request, and one per MCP request beside it.

The HTTP span is parented by the incoming W3C `traceparent`/`tracestate` headers. The MCP request's
span follows the OpenTelemetry MCP conventions (docs/monitoring.md, "Traces"): its parent is the
context the client put in `params._meta` (`traceparent`, `tracestate`, `baggage`), else the HTTP
headers' context, else the HTTP span; it links to the HTTP span, because one MCP request may travel
over several HTTP requests and one HTTP request may carry several MCP messages. Without an exporter
nothing is recorded and no span is built, so tracing that is not configured costs nothing; the
incoming trace id still reaches the logs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
PROPAGATOR = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])
# The W3C keys a carrier may hold: HTTP headers, or `params._meta` unprefixed (SEP-414).
CARRIER_KEYS = ("traceparent", "tracestate", "baggage")


class HttpTrace:
    """The HTTP request an MCP request arrived on: its span (the MCP span's link), the context its
    headers carried (the MCP span's parent when `_meta` names none) and its peer's attributes."""

    __slots__ = ("headers_context", "peer", "span")

    def __init__(self, span: Span, headers_context: Context | None, peer: Mapping[str, str]) -> None:
        self.span = span
        self.headers_context = headers_context
        self.peer = peer


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
        self.provider = TracerProvider(resource=resource, sampler=ParentBased(TraceIdRatioBased(sample_ratio)))
        if exporter is not None:
            self.provider.add_span_processor(SimpleSpanProcessor(exporter))
        elif otlp_endpoint is not None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint)))
        self.tracer = self.provider.get_tracer("aql_mcp")

    @contextmanager
    def server_span(
        self, name: str, carrier: Mapping[str, str], attributes: dict[str, Any], peer: Mapping[str, str]
    ) -> Iterator[Span | None]:
        """The HTTP request's span, parented by the carrier's traceparent; current while it runs.
        `peer` (`peer_attributes`) goes on it and on each MCP request span it carries."""
        if not self.enabled:
            yield None
            return
        headers_context = PROPAGATOR.extract(carrier=dict(carrier)) if "traceparent" in carrier else None
        with self.tracer.start_as_current_span(
            name, context=headers_context, kind=SpanKind.SERVER, attributes={**attributes, **peer}
        ) as span:
            token = _HTTP_TRACE.set(HttpTrace(span, headers_context, peer))
            try:
                yield span
            finally:
                _HTTP_TRACE.reset(token)

    @contextmanager
    def request_span(self, name: str, attributes: dict[str, Any], meta: Any) -> Iterator[Span | None]:
        """The SERVER span of one MCP request (module docstring: its parent and its link); current while
        it runs. Its status is the caller's to set: an exception is not always a failure (a modern
        `input_required` answer, a cancellation)."""
        if not self.enabled:
            yield None
            return
        http = _HTTP_TRACE.get()
        carrier = carrier_of(meta)
        parent: Context | None = None
        if "traceparent" in carrier:
            parent = PROPAGATOR.extract(carrier=carrier)
        elif http is not None:
            parent = http.headers_context
        links = [Link(http.span.get_span_context())] if http is not None else None
        if http is not None:
            attributes = {**http.peer, **attributes}
        token = otel_context.attach(parent) if parent is not None else None
        try:
            with self.tracer.start_as_current_span(
                name,
                kind=SpanKind.SERVER,
                attributes=attributes,
                links=links,
                record_exception=False,
                set_status_on_exception=False,
            ) as span:
                yield span
        finally:
            if token is not None:
                otel_context.detach(token)

    @contextmanager
    def span(self, name: str, attributes: dict[str, Any]) -> Iterator[Span | None]:
        """An INTERNAL child of the current span (an MCP-AQL operation inside its tools/call)."""
        if not self.enabled:
            yield None
            return
        with self.tracer.start_as_current_span(name, attributes=attributes) as span:
            yield span

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


def current_trace_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


def current_span_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    return f"{context.span_id:016x}" if context.is_valid else None
