"""Traces (OpenTelemetry SDK): a server span per HTTP request, children per JSON-RPC method and tool.

Spans are parented by the incoming W3C `traceparent`/`tracestate` headers and, for a method, by
`_meta.traceparent` where the client puts it in the request params. Without an exporter nothing
is recorded and no span is built, so tracing that is not configured costs nothing; the incoming
trace id still reaches the logs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
PROPAGATOR = TraceContextTextMapPropagator()


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
    def server_span(self, name: str, carrier: Mapping[str, str], attributes: dict[str, Any]) -> Iterator[Span | None]:
        """The HTTP request's span, parented by the carrier's traceparent; current while it runs."""
        if not self.enabled:
            yield None
            return
        parent = PROPAGATOR.extract(carrier=dict(carrier))
        with self.tracer.start_as_current_span(
            name, context=parent, kind=SpanKind.SERVER, attributes=attributes
        ) as span:
            yield span

    @contextmanager
    def span(self, name: str, attributes: dict[str, Any], meta: Any = None) -> Iterator[Span | None]:
        """A child of the current span, or of `_meta.traceparent` when the request carries one."""
        if not self.enabled:
            yield None
            return
        token = None
        if isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
            carrier = {k: v for k in ("traceparent", "tracestate") if isinstance(v := meta.get(k), str)}
            token = otel_context.attach(PROPAGATOR.extract(carrier=carrier))
        try:
            with self.tracer.start_as_current_span(name, attributes=attributes) as span:
                yield span
        finally:
            if token is not None:
                otel_context.detach(token)

    def shutdown(self) -> None:
        self.provider.shutdown()


def set_outcome(span: Span | None, outcome: str) -> None:
    if span is None:
        return
    span.set_attribute("mcp.outcome", outcome)
    if outcome == "internal":
        span.set_status(Status(StatusCode.ERROR))


def current_trace_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None
