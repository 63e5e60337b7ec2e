"""End to end: a real `aql-mcp serve` exports MCP spans and metrics over OTLP/HTTP to a real receiver.

The receiver (tests/support/otlp.py) decodes the protobuf as a collector does. In both eras a
call with `_meta.traceparent` yields a SERVER span with that parent, linked to the HTTP span, with
the OpenTelemetry MCP conventions' attributes, for a success, a tool error and a protocol error;
the histograms arrive over OTLP and show on `/metrics`; the call's log line has the span's ids.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests.support.asgi import open_session, rpc
from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.otlp import OtlpReceiver, attributes_of, running_receiver
from tests.support.server import ServerProcess, start_server
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio

MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "otel-e2e", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
# (tool, error.type or None, the span's name): a success, a tool error, a protocol error.
CASES = [
    ("test_simple_text", None, "tools/call test_simple_text"),
    ("test_error_handling", "tool_error", "tools/call test_error_handling"),
    ("no_such_tool", "-32602", "tools/call"),
]


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with running_receiver() as running:
        yield running


@pytest.fixture(scope="module")
def server(receiver: OtlpReceiver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {
        "AQL_MCP_MCP__MODERN_ERA": "true",
        "AQL_MCP_TRACING__OTLP_ENDPOINT": f"{receiver.base}/v1/traces",
        "AQL_MCP_TRACING__OTLP_METRICS_ENDPOINT": f"{receiver.base}/v1/metrics",
        "AQL_MCP_TRACING__SERVICE_NAME": "aql-mcp-otel-e2e",
        # The SDK's own export cadence, shortened so the test need not wait its defaults (5 s, 60 s).
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "300",
    }
    with start_server(tmp_path_factory.mktemp("otel"), env=env) as process:
        yield process


def new_traceparent() -> tuple[str, str, str]:
    """A client span's trace id, span id and the `traceparent` naming them."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


async def call(http: httpx.AsyncClient, server: ServerProcess, era: str, tool: str, meta: dict[str, Any]) -> None:
    params = {"name": tool, "arguments": {}}
    if era == "legacy":
        session = await open_session(http, server.token())
        body = rpc("tools/call", {**params, "_meta": meta}, 3)
        response = await http.post("/mcp", json=body, headers=session)
    else:
        headers = modern_headers(server.token(), "tools/call", tool)
        response = await http.post(
            "/mcp", json=modern_body("tools/call", params, {**MODERN_META, **meta}, 3), headers=headers
        )
    assert response.status_code in (200, 400), response.text  # the modern era answers -32602 with 400


async def exported(receiver: OtlpReceiver, trace_id: str) -> list[Span]:
    """The spans of `trace_id` once the MCP span arrived."""

    def spans() -> list[Span]:
        return [span for span in receiver.finished_spans() if span.trace_id.hex() == trace_id]

    await eventually(lambda: any(span.kind == Span.SPAN_KIND_SERVER for span in spans()), f"no span of {trace_id}")
    return spans()


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize(("tool", "error_type", "name"), CASES)
async def test_a_call_with_meta_traceparent_arrives_as_a_server_span_with_that_parent(
    server: ServerProcess, receiver: OtlpReceiver, era: str, tool: str, error_type: str | None, name: str
) -> None:
    trace_id, parent_id, traceparent = new_traceparent()
    async with httpx.AsyncClient(base_url=server.base, timeout=10) as http:
        await call(http, server, era, tool, {"traceparent": traceparent})

    (span,) = [span for span in await exported(receiver, trace_id) if span.kind == Span.SPAN_KIND_SERVER]
    assert span.name == name
    assert span.parent_span_id.hex() == parent_id
    (link,) = span.links
    http_spans = [s for s in receiver.finished_spans() if s.span_id == link.span_id]
    assert [s.name for s in http_spans] == ["POST /mcp"]
    attributes = attributes_of(span.attributes)
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["jsonrpc.request.id"] == "3"
    assert attributes["mcp.protocol.version"] == ("2025-11-25" if era == "legacy" else MODERN)
    assert ("mcp.session.id" in attributes) is (era == "legacy")
    assert attributes.get("error.type") == error_type
    if tool != "no_such_tool":
        assert attributes["gen_ai.tool.name"] == tool
        assert attributes["gen_ai.operation.name"] == "execute_tool"
    expected_status = Status.STATUS_CODE_ERROR if error_type else Status.STATUS_CODE_UNSET
    assert span.status.code == expected_status
    assert "aql-mcp-otel-e2e" in receiver.service_names

    line = next(
        json.loads(text)
        for text in server.log_text().splitlines()
        if text.startswith("{") and trace_id in text and '"tool_call"' in text
    )
    assert (line["trace_id"], line["span_id"]) == (trace_id, span.span_id.hex())


async def test_the_operation_histogram_arrives_over_otlp_and_shows_on_metrics(
    server: ServerProcess, receiver: OtlpReceiver
) -> None:
    async with httpx.AsyncClient(base_url=server.base, timeout=10) as http:
        await call(http, server, "legacy", "test_simple_text", {})
        exposition = (await http.get("/metrics")).text
    assert "mcp_server_operation_duration_seconds_bucket{" in exposition
    assert 'gen_ai_tool_name="test_simple_text"' in exposition

    def histogram_points() -> list[Any]:
        return [
            point
            for metric in receiver.metric("mcp.server.operation.duration")
            for point in metric.histogram.data_points
        ]

    await eventually(lambda: bool(histogram_points()), "mcp.server.operation.duration was not exported")
    metric = receiver.metric("mcp.server.operation.duration")[-1]
    assert metric.unit == "s"
    point = next(
        p
        for p in metric.histogram.data_points
        if attributes_of(p.attributes).get("gen_ai.tool.name") == "test_simple_text"
    )
    assert list(point.explicit_bounds) == [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]
    assert attributes_of(point.attributes)["mcp.method.name"] == "tools/call"
