"""The MCP request's SERVER span and histograms in the OpenTelemetry MCP conventions, both eras, in process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from aql_mcp.app import create_app
from aql_mcp.observability.logging import configure_logging
from tests.support.asgi import BASE, dev_settings, open_session, rpc
from tests.support.modern import MODERN, modern_body, modern_headers

pytestmark = pytest.mark.anyio

HTTP_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
HTTP_PARENT = "00f067aa0ba902b7"
META_TRACE = "0af7651916cd43dd8448eb211c80319c"
META_PARENT = "b7ad6b7169203331"
META_CONTEXT = {"traceparent": f"00-{META_TRACE}-{META_PARENT}-01", "baggage": "tenant=acme"}
HEADERS_CONTEXT = {"traceparent": f"00-{HTTP_TRACE}-{HTTP_PARENT}-01"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "spans", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
# The convention's ExplicitBucketBoundaries for mcp.server.operation.duration.
CONVENTION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# A request: (method, params, message id) -> the HTTP response.
Post = Callable[[str, dict[str, Any], int], Awaitable[httpx.Response]]


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
async def http(tmp_path: Path, exporter: InMemorySpanExporter) -> AsyncIterator[httpx.AsyncClient]:
    configure_logging(level="info", console=False)
    settings = dev_settings(tmp_path, mcp={"modern_era": True}, limits={"rate_per_second": 1000, "rate_burst": 1000})
    app = create_app(settings, span_exporter=exporter)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


@pytest.fixture(params=["legacy", "modern"])
async def post(request: pytest.FixtureRequest, http: httpx.AsyncClient, token: str) -> Post:
    """One era's way of sending a request, with the HTTP traceparent header on every POST."""
    if request.param == "legacy":
        session = await open_session(http, token)

        async def legacy(method: str, params: dict[str, Any], message_id: int) -> httpx.Response:
            headers = {**session, **HEADERS_CONTEXT}
            return await http.post("/mcp", json=rpc(method, params, message_id), headers=headers)

        return legacy

    async def modern(method: str, params: dict[str, Any], message_id: int) -> httpx.Response:
        meta = {**MODERN_META, **params.pop("_meta", {})}
        headers = {
            **modern_headers(token, method, params.get("name") or params.get("uri"), arguments=params.get("arguments")),
            **HEADERS_CONTEXT,
        }
        return await http.post("/mcp", json=modern_body(method, params, meta, message_id), headers=headers)

    return modern


def only(exporter: InMemorySpanExporter, kind: SpanKind = SpanKind.SERVER, prefix: str = "") -> ReadableSpan:
    """The one finished span of `kind` whose name is not the HTTP request's and starts with `prefix`."""
    found = [s for s in exporter.get_finished_spans() if s.kind is kind and not s.name.startswith("POST ")]
    found = [s for s in found if s.name.startswith(prefix)]
    assert len(found) == 1, [s.name for s in exporter.get_finished_spans()]
    return found[0]


def http_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    return next(s for s in exporter.get_finished_spans() if s.name == "POST /mcp")


def hex_span(span_id: int) -> str:
    return f"{span_id:016x}"


def check_common(span: ReadableSpan, exporter: InMemorySpanExporter, *, message_id: int, parent: str) -> dict[str, Any]:
    """What every MCP server span carries: kind, parent, the link to the HTTP span, and the attributes."""
    assert span.kind is SpanKind.SERVER
    assert span.parent is not None
    assert hex_span(span.parent.span_id) == parent
    assert [link.context.span_id for link in span.links] == [http_span(exporter).context.span_id]
    attributes = dict(span.attributes or {})
    assert attributes["jsonrpc.request.id"] == str(message_id)
    assert attributes["mcp.protocol.version"] in ("2025-11-25", MODERN)
    if attributes["mcp.protocol.version"] == MODERN:
        assert "mcp.session.id" not in attributes  # no sessions in the modern era
    else:
        assert len(attributes["mcp.session.id"]) == 8
    assert attributes["network.transport"] == "tcp"
    return attributes


async def test_a_successful_tool_call_is_a_server_span_parented_by_meta_and_linked_to_http(
    post: Post, exporter: InMemorySpanExporter
) -> None:
    exporter.clear()
    params = {"name": "test_simple_text", "arguments": {}, "_meta": dict(META_CONTEXT)}
    response = await post("tools/call", params, 7)
    assert response.status_code == 200, response.text

    span = only(exporter)
    assert span.name == "tools/call test_simple_text"
    assert f"{span.context.trace_id:032x}" == META_TRACE
    attributes = check_common(span, exporter, message_id=7, parent=META_PARENT)
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "test_simple_text"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["aql.outcome"] == "ok"
    assert "error.type" not in attributes
    assert span.status.status_code is StatusCode.UNSET
    # The HTTP span keeps the headers' trace; the MCP span is in the client's MCP trace.
    assert f"{http_span(exporter).context.trace_id:032x}" == HTTP_TRACE


async def test_a_tool_error_sets_error_type_tool_error_and_status_error(
    post: Post, exporter: InMemorySpanExporter
) -> None:
    exporter.clear()
    response = await post("tools/call", {"name": "test_error_handling", "arguments": {}}, 8)
    assert response.status_code == 200, response.text

    span = only(exporter)
    assert span.name == "tools/call test_error_handling"
    attributes = check_common(span, exporter, message_id=8, parent=HTTP_PARENT)  # no _meta: the headers' context
    assert attributes["error.type"] == "tool_error"
    assert "rpc.response.status_code" not in attributes
    assert span.status.status_code is StatusCode.ERROR


async def test_an_unknown_tool_is_a_protocol_error_named_by_its_json_rpc_code(
    post: Post, exporter: InMemorySpanExporter
) -> None:
    exporter.clear()
    params = {"name": "no_such_tool", "arguments": {}, "_meta": dict(META_CONTEXT)}
    response = await post("tools/call", params, 9)
    assert '"code":-32602' in response.text.replace(" ", "")

    span = only(exporter)
    assert span.name == "tools/call"  # an unknown name is caller input, not a low-cardinality target
    attributes = check_common(span, exporter, message_id=9, parent=META_PARENT)
    assert attributes["error.type"] == "-32602"
    assert attributes["rpc.response.status_code"] == "-32602"
    assert "gen_ai.tool.name" not in attributes
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description


async def test_a_prompt_is_the_target_and_a_resource_uri_an_attribute(
    post: Post, exporter: InMemorySpanExporter
) -> None:
    exporter.clear()
    await post("prompts/get", {"name": "test_simple_prompt"}, 10)
    prompt = only(exporter)
    assert prompt.name == "prompts/get test_simple_prompt"
    attributes = check_common(prompt, exporter, message_id=10, parent=HTTP_PARENT)
    assert attributes["gen_ai.prompt.name"] == "test_simple_prompt"
    assert "gen_ai.operation.name" not in attributes  # execute_tool only

    exporter.clear()
    await post("resources/read", {"uri": "test://static-text"}, 11)
    resource = only(exporter)
    assert resource.name == "resources/read"  # the convention keeps URIs out of span names by default
    assert dict(resource.attributes or {})["mcp.resource.uri"] == "test://static-text"


async def test_an_mcp_aql_operation_is_an_internal_child_with_its_own_attributes(
    post: Post, exporter: InMemorySpanExporter
) -> None:
    exporter.clear()
    arguments = {"operation": "create_collection", "params": {"collection": "spans"}}
    await post("tools/call", {"name": "mcp_aql_create", "arguments": arguments}, 12)
    request = only(exporter)
    operation = only(exporter, SpanKind.INTERNAL, "aql ")
    assert operation.parent is not None
    assert operation.parent.span_id == request.context.span_id
    assert dict(operation.attributes or {})["aql.operation"] == "create_collection"
    assert dict(request.attributes or {})["aql.operation"] == "create_collection"
    assert not {"mcp.method", "mcp.tool", "mcp.outcome", "mcp.operation"} & set(request.attributes or {})


async def test_log_lines_of_the_request_carry_the_span_ids(
    post: Post, exporter: InMemorySpanExporter, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    exporter.clear()
    await post("tools/call", {"name": "test_simple_text", "arguments": {}, "_meta": dict(META_CONTEXT)}, 13)
    span = only(exporter)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    call = next(line for line in lines if line["event"] == "tool_call")
    assert (call["trace_id"], call["span_id"]) == (f"{span.context.trace_id:032x}", hex_span(span.context.span_id))
    access = next(line for line in lines if line["event"] == "http_request")
    http = http_span(exporter)
    assert (access["trace_id"], access["span_id"]) == (HTTP_TRACE, hex_span(http.context.span_id))


def samples(exposition: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (found.labels, found.value)
        for family in text_string_to_metric_families(exposition)
        for found in family.samples
        if found.name == name
    ]


async def test_metrics_show_the_operation_histogram_under_its_prometheus_name(
    post: Post, http: httpx.AsyncClient
) -> None:
    await post("tools/call", {"name": "test_simple_text", "arguments": {}}, 14)
    await post("tools/call", {"name": "test_error_handling", "arguments": {}}, 15)
    await post("tools/call", {"name": "no_such_tool", "arguments": {}}, 16)
    exposition = (await http.get("/metrics")).text
    counts = {
        (labels["gen_ai_tool_name"], labels["error_type"]): value
        for labels, value in samples(exposition, "mcp_server_operation_duration_seconds_count")
        if labels["mcp_method_name"] == "tools/call"
    }
    assert counts == {("test_simple_text", ""): 1.0, ("test_error_handling", "tool_error"): 1.0, ("", "-32602"): 1.0}
    buckets = [
        labels["le"]
        for labels, _ in samples(exposition, "mcp_server_operation_duration_seconds_bucket")
        if labels["gen_ai_tool_name"] == "test_simple_text"
    ]
    assert buckets == [*(str(bound) for bound in CONVENTION_BUCKETS), "+Inf"]
    versions = {
        labels["mcp_protocol_version"]
        for labels, _ in samples(exposition, "mcp_server_operation_duration_seconds_count")
    }
    assert versions & {"2025-11-25", MODERN}


async def test_a_deleted_session_is_measured_by_the_session_histogram(http: httpx.AsyncClient, token: str) -> None:
    session = await open_session(http, token)
    assert (await http.delete("/mcp", headers=session)).status_code in (200, 204)
    exposition = (await http.get("/metrics")).text
    counts = samples(exposition, "mcp_server_session_duration_seconds_count")
    assert counts == [({"mcp_protocol_version": "2025-11-25", "error_type": ""}, 1.0)]


async def test_an_unknown_method_is_a_span_with_error_type_minus_32601(
    post: Post, exporter: InMemorySpanExporter
) -> None:
    """The modern era refuses it before dispatch, the legacy era in it: a span either way."""
    exporter.clear()
    response = await post("no/such_method", {"_meta": dict(META_CONTEXT)}, 17)
    assert '"code":-32601' in response.text.replace(" ", "")

    span = only(exporter)
    assert span.name == "no/such_method"
    attributes = check_common(span, exporter, message_id=17, parent=META_PARENT)
    assert attributes["mcp.method.name"] == "no/such_method"
    assert attributes["error.type"] == "-32601"
    assert span.status.status_code is StatusCode.ERROR


async def test_a_legacy_notification_is_a_span_without_a_request_id(
    http: httpx.AsyncClient, token: str, exporter: InMemorySpanExporter
) -> None:
    session = await open_session(http, token)
    exporter.clear()
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized", "params": {"_meta": dict(META_CONTEXT)}}
    assert (await http.post("/mcp", json=notification, headers=session)).status_code == 202
    span = only(exporter)
    assert span.name == "notifications/initialized"
    assert span.parent is not None
    assert hex_span(span.parent.span_id) == META_PARENT
    attributes = dict(span.attributes or {})
    assert attributes["mcp.method.name"] == "notifications/initialized"
    assert "jsonrpc.request.id" not in attributes
    assert len(attributes["mcp.session.id"]) == 8


class Http2:
    """What an HTTP/2 server puts in the scope (`http_version` "2"); uvicorn and httpx's ASGI
    transport speak HTTP/1.1 only."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope = {**scope, "http_version": "2"}
        await self.app(scope, receive, send)


GATEWAY = "10.0.0.5"
FORWARDED_CLIENT = "203.0.113.7"


@pytest.mark.parametrize(
    ("peer", "version", "client"),
    [(GATEWAY, "2", FORWARDED_CLIENT), (GATEWAY, "1.1", FORWARDED_CLIENT), ("10.0.0.9", "1.1", "10.0.0.9")],
)
async def test_the_span_names_the_http_version_and_the_client_as_the_service_resolves_it(
    tmp_path: Path, exporter: InMemorySpanExporter, token: str, peer: str, version: str, client: str
) -> None:
    """`client.address` is the forwarded client only behind a gateway listed in
    `server.forwarded_allow_ips`, through the proxy-header handling `aql-mcp serve` gives uvicorn."""
    settings = dev_settings(tmp_path, server={"forwarded_allow_ips": [GATEWAY]})
    service = create_app(settings, span_exporter=exporter)
    app: ASGIApp = ProxyHeadersMiddleware(service, list(settings.server.forwarded_allow_ips))
    if version == "2":
        app = Http2(app)
    transport = httpx.ASGITransport(app=app, client=(peer, 40_000))
    forwarded = {"x-forwarded-for": FORWARDED_CLIENT}
    async with service.router.lifespan_context(service), httpx.AsyncClient(transport=transport, base_url=BASE) as http:
        session = {**await open_session(http, token), **forwarded}
        legacy = await http.post(
            "/mcp", json=rpc("tools/call", {"name": "test_simple_text", "arguments": {}}, 3), headers=session
        )
        assert legacy.status_code == 200, legacy.text
        headers = {**modern_headers(token, "tools/call", "test_simple_text", arguments={}), **forwarded}
        body = modern_body("tools/call", {"name": "test_simple_text", "arguments": {}}, MODERN_META, 4)
        modern = await http.post("/mcp", json=body, headers=headers)
        assert modern.status_code == 200, modern.text
    calls = [s for s in exporter.get_finished_spans() if s.name == "tools/call test_simple_text"]
    assert len(calls) == 2
    carrying = {link.context.span_id for call in calls for link in call.links}
    posts = [s for s in exporter.get_finished_spans() if s.context.span_id in carrying]
    assert [s.name for s in posts] == ["POST /mcp", "POST /mcp"]
    for span in [*calls, *posts]:
        attributes = dict(span.attributes or {})
        assert attributes["network.protocol.version"] == version
        assert attributes["client.address"] == client


async def test_a_span_carries_the_session_ids_prefix_as_the_log_lines_do_never_the_whole_id(
    http: httpx.AsyncClient, token: str, exporter: InMemorySpanExporter, capsys: pytest.CaptureFixture[str]
) -> None:
    """The session id reaches a session like a bearer secret (docs/monitoring.md, "The session id")."""
    exporter.clear()
    session = await open_session(http, token)
    session_id = session["mcp-session-id"]
    capsys.readouterr()
    response = await http.post(
        "/mcp", json=rpc("tools/call", {"name": "test_simple_text", "arguments": {}}, 5), headers=session
    )
    assert response.status_code == 200
    spans = exporter.get_finished_spans()
    values = [str(value) for span in spans for value in (span.attributes or {}).values()]
    assert values
    assert not [value for value in values if session_id[8:] in value]
    prefixes = {dict(span.attributes or {}).get("mcp.session.id") for span in spans if span.kind is SpanKind.SERVER}
    assert prefixes - {None} == {session_id[:8]}
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert next(line for line in lines if line["event"] == "tool_call")["session_id"] == session_id[:8]
