"""The tracer's span scopes: current while they run, ended and recorded as the SDK's own
`start_as_current_span` would, and the default sampler's decisions."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import baggage, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from aql_mcp.observability.tracing import PROPAGATOR, Tracing, span_ids

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def tracing(exporter: InMemorySpanExporter, sample_ratio: float = 1.0) -> Tracing:
    return Tracing(service="test", version="1", exporter=exporter, sample_ratio=sample_ratio)


def traceparent(sampled: bool) -> dict[str, str]:
    return {"traceparent": f"00-{TRACE}-{PARENT}-{'01' if sampled else '00'}"}


def test_a_server_span_is_current_while_it_runs_and_ended_after() -> None:
    exporter = InMemorySpanExporter()
    before = trace.get_current_span()
    with tracing(exporter).server_span("POST /mcp", {}, {"url.path": "/mcp"}, {"client.address": "10.0.0.1"}) as span:
        assert span is not None
        assert trace.get_current_span() is span
        assert exporter.get_finished_spans() == ()
    assert trace.get_current_span() is before
    (finished,) = exporter.get_finished_spans()
    assert finished.kind is SpanKind.SERVER
    assert dict(finished.attributes or {}) == {"url.path": "/mcp", "client.address": "10.0.0.1"}
    assert finished.end_time is not None


def test_the_request_span_links_the_http_span_and_keeps_its_peer() -> None:
    exporter = InMemorySpanExporter()
    tracer = tracing(exporter)
    with (
        tracer.server_span("POST /mcp", traceparent(True), {}, {"client.address": "10.0.0.1"}) as http,
        tracer.request_span("tools/call", {}, lambda: {"mcp.method.name": "tools/call"}) as mcp,
    ):
        assert trace.get_current_span() is mcp
        assert http is not None
        assert mcp is not None
    request, server = exporter.get_finished_spans()
    # No traceparent in `_meta`: the headers' context is the parent, and the HTTP span a link.
    assert request.parent is not None
    assert f"{request.parent.span_id:016x}" == PARENT
    assert [link.context.span_id for link in request.links] == [server.context.span_id]
    assert request.attributes == {"client.address": "10.0.0.1", "mcp.method.name": "tools/call"}


def test_the_meta_carrier_is_current_with_its_baggage_while_the_request_span_runs() -> None:
    exporter = InMemorySpanExporter()
    meta = {**traceparent(True), "baggage": "tenant=acme"}
    with tracing(exporter).request_span("tools/call", meta, dict):
        assert baggage.get_baggage("tenant") == "acme"
        assert f"{trace.get_current_span().get_span_context().trace_id:032x}" == TRACE
    assert baggage.get_baggage("tenant") is None
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_an_exception_through_the_http_span_is_recorded_with_error_status() -> None:
    exporter = InMemorySpanExporter()
    with pytest.raises(RuntimeError), tracing(exporter).server_span("POST /mcp", {}, {}, {}):
        raise RuntimeError("boom")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "RuntimeError: boom"
    assert [event.name for event in span.events] == ["exception"]
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_a_cancellation_is_not_an_error_of_the_http_span() -> None:
    """As the SDK's `use_span`: only an `Exception` is recorded; a cancelled request is no failure."""
    exporter = InMemorySpanExporter()
    with pytest.raises(asyncio.CancelledError), tracing(exporter).server_span("POST /mcp", {}, {}, {}):
        raise asyncio.CancelledError
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.UNSET
    assert span.events == ()


def test_the_request_span_leaves_its_status_to_its_caller() -> None:
    exporter = InMemorySpanExporter()
    with pytest.raises(ValueError, match="input required"), tracing(exporter).request_span("tools/call", {}, dict):
        raise ValueError("input required")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.UNSET
    assert span.events == ()


def test_an_operation_span_is_a_child_of_the_current_one() -> None:
    exporter = InMemorySpanExporter()
    tracer = tracing(exporter)
    with tracer.request_span("tools/call", {}, dict) as parent, tracer.span("aql list_records", {"a": 1}):
        pass
    child, request = exporter.get_finished_spans()
    assert parent is not None
    assert child.parent is not None
    assert child.parent.span_id == request.context.span_id
    assert child.kind is SpanKind.INTERNAL


@pytest.mark.parametrize(
    ("ratio", "carrier", "sampled"),
    [
        (1.0, {}, True),
        (1.0, traceparent(True), True),
        (1.0, traceparent(False), False),
        (0.0, {}, False),
        (0.0, traceparent(True), True),
    ],
)
def test_the_sampler_follows_a_parent_and_samples_new_traces_at_the_ratio(
    ratio: float, carrier: dict[str, str], sampled: bool
) -> None:
    exporter = InMemorySpanExporter()
    with tracing(exporter, ratio).server_span("POST /mcp", carrier, {}, {}) as span:
        assert span is not None
        assert span.get_span_context().trace_flags.sampled is sampled
    assert len(exporter.get_finished_spans()) == (1 if sampled else 0)


def test_span_ids_are_the_hex_the_logs_write() -> None:
    parent = trace.get_current_span(PROPAGATOR.extract(carrier=traceparent(True)))
    assert span_ids(parent) == (TRACE, PARENT)
    assert span_ids(trace.INVALID_SPAN) == (None, None)
    assert span_ids(None) == (None, None)


def test_without_an_exporter_no_span_is_built() -> None:
    off = Tracing(service="test", version="1")
    with off.server_span("POST /mcp", {}, {}, {}) as http, off.request_span("tools/call", {}, dict) as mcp:
        assert http is None
        assert mcp is None
        assert trace.get_current_span() is trace.INVALID_SPAN


def test_under_an_http_trace_not_sampled_no_request_or_operation_span_is_built() -> None:
    """`ParentBased`: the MCP request's span would follow the HTTP request's decision, and an
    operation's the MCP request's, so neither is built (nor its attributes); the headers' context,
    with its baggage, is still current while the request runs."""
    exporter = InMemorySpanExporter()
    tracer = tracing(exporter)
    asked: list[str] = []

    def attributes() -> dict[str, str]:
        asked.append("attributes")
        return {}

    carrier = {**traceparent(False), "baggage": "tenant=acme"}
    with tracer.server_span("POST /mcp", carrier, {}, {}) as http:
        assert http is not None
        assert not http.is_recording()
        with tracer.request_span("tools/call", {}, attributes) as mcp:
            assert mcp is None
            assert baggage.get_baggage("tenant") == "acme"
            assert trace.get_current_span() is http
            with tracer.span("aql list_records", {}) as operation:
                assert operation is None
        assert baggage.get_baggage("tenant") is None
    assert asked == []
    assert exporter.get_finished_spans() == ()


def test_a_sampled_meta_context_is_followed_under_an_http_trace_not_sampled() -> None:
    exporter = InMemorySpanExporter()
    tracer = tracing(exporter)
    meta = {"traceparent": f"00-{'a' * 32}-{'b' * 16}-01"}
    with (
        tracer.server_span("POST /mcp", traceparent(False), {}, {}),
        tracer.request_span("tools/call", meta, dict) as mcp,
    ):
        assert mcp is not None
        assert mcp.is_recording()
    (span,) = exporter.get_finished_spans()
    assert f"{span.context.trace_id:032x}" == "a" * 32


def test_a_root_trace_not_sampled_builds_no_request_span() -> None:
    exporter = InMemorySpanExporter()
    tracer = tracing(exporter, sample_ratio=0.0)
    with tracer.server_span("POST /mcp", {}, {}, {}) as http, tracer.request_span("tools/call", {}, dict) as mcp:
        assert http is not None
        assert span_ids(http)[0] is not None
        assert mcp is None
    assert exporter.get_finished_spans() == ()


class RefusingProcessor(SpanProcessor):
    """A span processor whose `on_start` fails, as a broken plugin's might."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        raise RuntimeError("processor down")

    def on_end(self, span: ReadableSpan) -> None:
        return None


def test_a_span_that_cannot_start_leaves_no_context_behind() -> None:
    tracer = tracing(InMemorySpanExporter())
    tracer.provider.add_span_processor(RefusingProcessor())
    meta = {**traceparent(True), "baggage": "tenant=acme"}
    with pytest.raises(RuntimeError, match="processor down"), tracer.request_span("tools/call", meta, dict):
        pass
    assert baggage.get_baggage("tenant") is None
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_the_meta_context_is_gone_after_a_request_that_raised() -> None:
    exporter = InMemorySpanExporter()
    meta = {**traceparent(True), "baggage": "tenant=acme"}
    with pytest.raises(ValueError, match="refused"), tracing(exporter).request_span("tools/call", meta, dict):
        raise ValueError("refused")
    assert baggage.get_baggage("tenant") is None
    assert trace.get_current_span() is trace.INVALID_SPAN
    (span,) = exporter.get_finished_spans()
    assert span.end_time is not None


def test_an_operation_span_records_its_exception() -> None:
    exporter = InMemorySpanExporter()
    with pytest.raises(RuntimeError, match="store down"), tracing(exporter).span("aql list_records", {}):
        raise RuntimeError("store down")
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]


def test_a_meta_context_not_sampled_is_followed_under_a_sampled_http_trace() -> None:
    exporter = InMemorySpanExporter()
    tracer = tracing(exporter)
    meta = {"traceparent": f"00-{'a' * 32}-{'b' * 16}-00"}
    with tracer.server_span("POST /mcp", {}, {}, {}), tracer.request_span("tools/call", meta, dict) as mcp:
        assert mcp is not None
        assert not mcp.is_recording()
        with tracer.span("aql list_records", {}) as operation:
            assert operation is None
    assert [span.name for span in exporter.get_finished_spans()] == ["POST /mcp"]


def test_under_a_traceparent_header_that_does_not_parse_the_request_span_is_a_child_of_the_http_span() -> None:
    exporter = InMemorySpanExporter()
    tracer = tracing(exporter)
    carrier = {"traceparent": "not a traceparent", "baggage": "tenant=acme"}
    with tracer.server_span("POST /mcp", carrier, {}, {}), tracer.request_span("tools/call", {}, dict):
        assert baggage.get_baggage("tenant") == "acme"
    request, server = exporter.get_finished_spans()
    assert request.context.trace_id == server.context.trace_id
    assert request.parent is not None
    assert request.parent.span_id == server.context.span_id
