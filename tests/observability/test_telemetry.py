"""Traces, call logs and metrics of one call, end to end in-process (corporate §15; observability issue)."""

from __future__ import annotations

import json
import random
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families

from aql_mcp.app import create_app
from aql_mcp.observability.logging import configure_logging
from aql_mcp.observability.telemetry import MAX_LOGGED_CODES, distinct_codes
from aql_mcp.settings import Settings
from tests.support.asgi import BASE, MCP_HEADERS, dev_settings, open_session, rpc

pytestmark = pytest.mark.anyio

PROMTOOL = Path(__file__).resolve().parents[2] / "scripts" / "promtool.sh"

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
META_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # Rate limits high enough that a burst in these tests is never refused.
    return dev_settings(tmp_path, limits={"rate_per_second": 10_000, "rate_burst": 10_000})


@pytest.fixture
async def http(settings: Settings, exporter: InMemorySpanExporter) -> AsyncIterator[httpx.AsyncClient]:
    configure_logging(level="info", console=False)
    app = create_app(settings, span_exporter=exporter)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


def log_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


async def test_a_tool_call_with_traceparent_is_one_trace_from_the_request_to_the_tool(
    http: httpx.AsyncClient, token: str, exporter: InMemorySpanExporter, capsys: pytest.CaptureFixture[str]
) -> None:
    """Corporate §15.1: traceparent accepted; X-Request-Id returned and in the call's log line."""
    session = await open_session(http, token)
    exporter.clear()
    log_lines(capsys)
    headers = {**session, "traceparent": TRACEPARENT, "x-request-id": "req-trace-1"}
    call = rpc("tools/call", {"name": "test_simple_text", "arguments": {}}, message_id=5)
    response = await http.post("/mcp", json=call, headers=headers)

    assert response.headers["x-request-id"] == "req-trace-1"
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert "tools/call" not in spans  # one span per MCP request, named by its tool
    server, tool = spans["POST /mcp"], spans["tools/call test_simple_text"]
    assert {f"{s.context.trace_id:032x}" for s in (server, tool)} == {TRACE_ID}
    assert server.parent is not None
    assert f"{server.parent.span_id:016x}" == "00f067aa0ba902b7"
    # Without `_meta` context the MCP span's parent is the HTTP headers' context, and it links to
    # the HTTP span (OpenTelemetry MCP conventions).
    assert tool.kind is SpanKind.SERVER
    assert tool.parent is not None
    assert f"{tool.parent.span_id:016x}" == "00f067aa0ba902b7"
    assert [link.context.span_id for link in tool.links] == [server.context.span_id]
    assert dict(tool.attributes or {})["aql.outcome"] == "ok"

    call_line = next(line for line in log_lines(capsys) if line["event"] == "tool_call")
    assert call_line["request_id"] == "req-trace-1"
    assert call_line["trace_id"] == TRACE_ID
    assert call_line["span_id"] == f"{tool.context.span_id:016x}"
    assert call_line["tool"] == "test_simple_text"
    assert call_line["outcome"] == "ok"


async def test_meta_traceparent_parents_the_method_span(
    http: httpx.AsyncClient, token: str, exporter: InMemorySpanExporter
) -> None:
    session = await open_session(http, token)
    exporter.clear()
    meta = {"traceparent": f"00-{META_TRACE_ID}-b7ad6b7169203331-01"}
    call = rpc("tools/call", {"name": "test_simple_text", "arguments": {}, "_meta": meta}, message_id=6)
    await http.post("/mcp", json=call, headers=session)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    tool = spans["tools/call test_simple_text"]
    assert f"{tool.context.trace_id:032x}" == META_TRACE_ID
    assert tool.parent is not None
    assert f"{tool.parent.span_id:016x}" == "b7ad6b7169203331"
    assert [link.context.span_id for link in tool.links] == [spans["POST /mcp"].context.span_id]


async def test_call_outcomes_are_classified_in_logs_and_metrics(
    http: httpx.AsyncClient, token: str, capsys: pytest.CaptureFixture[str]
) -> None:
    session = await open_session(http, token)
    log_lines(capsys)
    for name in ("test_error_handling", "test_simple_text", "no_such_tool"):
        await http.post("/mcp", json=rpc("tools/call", {"name": name, "arguments": {}}), headers=session)
    outcomes = {line["tool"]: line["outcome"] for line in log_lines(capsys) if line["event"] == "tool_call"}
    assert outcomes == {"test_error_handling": "client_error", "test_simple_text": "ok", "unknown": "client_error"}
    exposition = (await http.get("/metrics")).text
    assert sample(exposition, "aql_mcp_calls_total", outcome="ok", tool="test_simple_text") == 1.0
    assert sample(exposition, "aql_mcp_calls_total", outcome="client_error", tool="unknown") == 1.0


def sample(exposition: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(exposition):
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                return float(found.value)
    return None


async def test_metric_series_stay_bounded_after_a_burst_of_random_ids_and_bad_tokens(
    http: httpx.AsyncClient, token: str
) -> None:
    """Observability issue: no label takes unbounded values (ids, subjects, error text)."""
    session = await open_session(http, token)
    rng = random.Random(7)  # noqa: S311 - test data, not secrets

    async def burst(size: int) -> str:
        for n in range(size):
            name = f"tool_{rng.getrandbits(64):x}"
            await http.post("/mcp", json=rpc("tools/call", {"name": name}, message_id=n), headers=session)
            bad = {**MCP_HEADERS, "authorization": f"Bearer {rng.getrandbits(128):x}", "x-request-id": f"r{n}"}
            await http.post("/mcp", json=rpc("ping"), headers=bad)
            await http.get(f"/no/such/path/{rng.getrandbits(32)}")
        await http.get("/metrics")  # the scrape's own series exist from the second one on
        return (await http.get("/metrics")).text

    first = await burst(60)
    second = await burst(120)
    series = {line.split(" ")[0] for line in first.splitlines() if not line.startswith("#")}
    assert {line.split(" ")[0] for line in second.splitlines() if not line.startswith("#")} == series
    assert re.search(r"tool_[0-9a-f]{6}", second) is None  # no random tool name became a label value
    assert "/no/such" not in second


async def test_metrics_are_served_without_mcp_auth_and_pass_promtool(http: httpx.AsyncClient, tmp_path: Path) -> None:
    response = await http.get("/metrics")
    assert response.status_code == 200
    assert "aql_mcp_build_info" in response.text
    done = await anyio.run_process([str(PROMTOOL)], input=response.content, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


async def test_metrics_allow_list_refuses_other_clients(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, metrics={"allowed_clients": ["10.0.0.0/8"]})
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5555))
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            assert (await client.get("/metrics")).status_code == 403


async def test_an_operation_is_a_child_span_of_its_tool_call_and_labels_the_call_metrics(
    http: httpx.AsyncClient, token: str, exporter: InMemorySpanExporter, capsys: pytest.CaptureFixture[str]
) -> None:
    """Observability issue: child spans per operation with MCP attributes and the outcome; calls
    counted by tool, operation and outcome; a batch logs one line per operation."""
    session = await open_session(http, token)
    exporter.clear()
    log_lines(capsys)

    async def call(tool: str, arguments: dict[str, Any]) -> None:
        await http.post("/mcp", json=rpc("tools/call", {"name": tool, "arguments": arguments}), headers=session)

    await call("mcp_aql_create", {"operation": "create_collection", "params": {"collection": "notes"}})
    await call("mcp_aql_read", {"operation": "get_record", "params": {"collection": "notes", "id": "rec_0"}})
    batch = [
        {"operation": "create_record", "params": {"collection": "notes", "data": {"a": 1}}},
        {"operation": "create_record", "params": {"collection": "nowhere", "data": {"a": 2}}},
    ]
    await call("mcp_aql_create", {"operations": batch})
    exposition = (await http.get("/metrics")).text

    spans = exporter.get_finished_spans()
    created = next(s for s in spans if s.name == "aql create_collection")
    tool = next(s for s in spans if s.name == "tools/call mcp_aql_create")
    assert created.parent is not None
    assert created.parent.span_id == tool.context.span_id
    assert dict(created.attributes or {})["aql.operation"] == "create_collection"
    assert dict(created.attributes or {})["aql.outcome"] == "ok"
    missing = next(s for s in spans if s.name == "aql get_record")
    assert dict(missing.attributes or {})["aql.outcome"] == "client_error"
    lines = log_lines(capsys)
    calls = [(line["tool"], line.get("operation"), line["outcome"]) for line in lines if line["event"] == "tool_call"]
    assert calls == [
        ("mcp_aql_create", "create_collection", "ok"),
        ("mcp_aql_read", "get_record", "client_error"),
        ("mcp_aql_create", "batch", "ok"),
    ]
    items = [(line["operation"], line["outcome"], line["code"]) for line in lines if line["event"] == "operation"]
    assert items == [("create_record", "ok", None), ("create_record", "client_error", "NOT_FOUND_RESOURCE")]
    labels = {"tool": "mcp_aql_create", "operation": "create_collection", "outcome": "ok"}
    assert sample(exposition, "aql_mcp_calls_total", **labels) == 1.0
    assert sample(exposition, "aql_mcp_calls_total", tool="mcp_aql_create", operation="batch", outcome="ok") == 1.0


def test_the_codes_of_a_batch_are_named_once_each_in_order_and_bounded() -> None:
    codes = [f"CODE_{n % 15}" for n in range(40)]
    assert distinct_codes(codes) == [f"CODE_{n}" for n in range(MAX_LOGGED_CODES)]
    assert distinct_codes(["B", "A", "B"]) == ["B", "A"]
    assert distinct_codes([]) is None
