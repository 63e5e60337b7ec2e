import random
import re
import string
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from aql_mcp.exceptions import ConfigError
from aql_mcp.observability.metrics import (
    AUTH_REASONS,
    INTROSPECTION_RESULTS,
    LIMIT_KINDS,
    MAX_OPERATIONS,
    MAX_TOOLS,
    METHODS,
    OUTCOMES,
    ROUTES,
    Metrics,
    MetricsEndpoint,
)
from tests.support.asgi import initialize_params
from tests.support.server import free_port, start_server

PROMTOOL = Path(__file__).resolve().parents[2] / "scripts" / "promtool.sh"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(service="aql-mcp", version="1.2.3")


def value(metrics: Metrics, name: str, **labels: str) -> float:
    sample = metrics.registry.get_sample_value(name, labels)
    return 0.0 if sample is None else sample


def label_values(metrics: Metrics) -> dict[str, set[str]]:
    """Every value each label takes in the exposition (histogram `le` excluded)."""
    seen: dict[str, set[str]] = defaultdict(set)
    body, _ = metrics.exposition()
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            for label, label_value in sample.labels.items():
                if label != "le":
                    seen[label].add(label_value)
    return seen


def sample_count(metrics: Metrics) -> int:
    body, _ = metrics.exposition()
    return sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))


def seeded(seed: int) -> random.Random:
    """Reproducible label values: a failure replays exactly."""
    return random.Random(seed)  # noqa: S311 - test data, not secrets


def random_word(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_letters + string.digits + " /:-_'", k=rng.randint(1, 40)))


def burst(metrics: Metrics, rng: random.Random, size: int = 2000) -> None:
    """Calls with random names, outcomes, routes, methods, statuses, reasons and kinds."""
    for _ in range(size):
        metrics.call(
            tool=f"tool_{rng.getrandbits(64):x}",
            operation=rng.choice([random_word(rng), f"op_{rng.getrandbits(32):x}"]),
            outcome=rng.choice([*OUTCOMES, random_word(rng)]),
            seconds=rng.random(),
        )
        metrics.http_request(
            route=rng.choice([*ROUTES, f"/mcp/{rng.getrandbits(32)}"]),
            method=rng.choice([*METHODS, random_word(rng)]),
            status=rng.randint(-10_000, 100_000),
            seconds=rng.random(),
        )
        metrics.auth_failure(rng.choice([*AUTH_REASONS, random_word(rng)]))
        metrics.limit_event(rng.choice([*LIMIT_KINDS, random_word(rng)]))


def check_with_promtool(body: bytes) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PROMTOOL)], input=body.decode(), capture_output=True, text=True, timeout=600, check=False
    )


def test_call_counts_by_tool_operation_and_outcome(metrics: Metrics) -> None:
    metrics.call(tool="records", operation="create_record", outcome="ok", seconds=0.02)
    metrics.call(tool="records", operation="create_record", outcome="ok", seconds=0.03)
    metrics.call(tool="records", operation="", outcome="client_error", seconds=0.001)
    assert value(metrics, "aql_mcp_calls_total", tool="records", operation="create_record", outcome="ok") == 2
    assert value(metrics, "aql_mcp_calls_total", tool="records", operation="", outcome="client_error") == 1


def test_call_duration_lands_in_the_histogram_buckets(metrics: Metrics) -> None:
    metrics.call(tool="records", operation="read", outcome="ok", seconds=0.02)
    labels = {"tool": "records", "operation": "read"}
    assert value(metrics, "aql_mcp_call_duration_seconds_count", **labels) == 1
    assert value(metrics, "aql_mcp_call_duration_seconds_sum", **labels) == pytest.approx(0.02)
    assert value(metrics, "aql_mcp_call_duration_seconds_bucket", le="0.01", **labels) == 0
    assert value(metrics, "aql_mcp_call_duration_seconds_bucket", le="0.025", **labels) == 1
    assert value(metrics, "aql_mcp_call_duration_seconds_bucket", le="30.0", **labels) == 1
    assert value(metrics, "aql_mcp_call_duration_seconds_bucket", le="0.001", **labels) == 0


def test_http_request_counts_route_method_status_and_duration(metrics: Metrics) -> None:
    metrics.http_request(route="/mcp", method="POST", status=200, seconds=0.004)
    metrics.http_request(route="/health", method="GET", status=503, seconds=0.5)
    assert value(metrics, "aql_mcp_http_requests_total", route="/mcp", method="POST", status="200") == 1
    assert value(metrics, "aql_mcp_http_requests_total", route="/health", method="GET", status="503") == 1
    assert value(metrics, "aql_mcp_http_request_duration_seconds_count", route="/mcp") == 1
    assert value(metrics, "aql_mcp_http_request_duration_seconds_bucket", route="/health", le="0.5") == 1


def test_auth_failures_limit_events_and_jwks_refreshes_count_by_their_label(metrics: Metrics) -> None:
    metrics.auth_failure("invalid_token")
    metrics.auth_failure("invalid_token")
    metrics.limit_event("rate")
    metrics.jwks_refresh(ok=True)
    metrics.jwks_refresh(ok=False)
    metrics.jwks_refresh(ok=False)
    assert value(metrics, "aql_mcp_auth_failures_total", reason="invalid_token") == 2
    assert value(metrics, "aql_mcp_limit_events_total", kind="rate") == 1
    assert value(metrics, "aql_mcp_jwks_refreshes_total", result="ok") == 1
    assert value(metrics, "aql_mcp_jwks_refreshes_total", result="failed") == 2


def test_introspection_calls_count_by_result_and_an_unknown_result_is_other(metrics: Metrics) -> None:
    for result in ("active", "inactive", "inactive", "failed", "a-token-never-a-label"):
        metrics.introspection_call(result)
    metrics.limit_event("introspection")
    assert value(metrics, "aql_mcp_introspection_calls_total", result="active") == 1
    assert value(metrics, "aql_mcp_introspection_calls_total", result="inactive") == 2
    assert value(metrics, "aql_mcp_introspection_calls_total", result="failed") == 1
    assert value(metrics, "aql_mcp_introspection_calls_total", result="other") == 1
    assert value(metrics, "aql_mcp_limit_events_total", kind="introspection") == 1


def test_known_reasons_kinds_and_results_are_exposed_at_zero_before_any_event(metrics: Metrics) -> None:
    for reason in AUTH_REASONS:
        assert metrics.registry.get_sample_value("aql_mcp_auth_failures_total", {"reason": reason}) == 0
    for kind in LIMIT_KINDS:
        assert metrics.registry.get_sample_value("aql_mcp_limit_events_total", {"kind": kind}) == 0
    for result in ("ok", "failed"):
        assert metrics.registry.get_sample_value("aql_mcp_jwks_refreshes_total", {"result": result}) == 0
    for result in INTROSPECTION_RESULTS:
        assert metrics.registry.get_sample_value("aql_mcp_introspection_calls_total", {"result": result}) == 0


def test_build_info_is_one_labelled_with_version_and_service(metrics: Metrics) -> None:
    assert value(metrics, "aql_mcp_build_info", version="1.2.3", service="aql-mcp") == 1


def test_open_sessions_and_streams_are_read_when_scraped(metrics: Metrics) -> None:
    counts = {"sessions": 3, "streams": 1}
    metrics.track(sessions=lambda: counts["sessions"], streams=lambda: counts["streams"])
    assert value(metrics, "aql_mcp_open_sessions") == 3
    assert value(metrics, "aql_mcp_open_sse_streams") == 1
    counts.update(sessions=7, streams=0)
    assert value(metrics, "aql_mcp_open_sessions") == 7
    assert value(metrics, "aql_mcp_open_sse_streams") == 0


def test_the_session_cap_is_exposed_beside_the_open_sessions(metrics: Metrics) -> None:
    """The "sessions near the cap" alert divides one by the other (deploy/prometheus)."""
    metrics.track(sessions=lambda: 9, streams=lambda: 0, session_cap=10)
    assert value(metrics, "aql_mcp_open_sessions_limit") == 10
    assert value(metrics, "aql_mcp_open_sessions") == 9


def test_a_successful_jwks_refresh_stamps_the_wall_clock_and_a_failed_one_does_not(metrics: Metrics) -> None:
    assert value(metrics, "aql_mcp_jwks_last_success_timestamp_seconds") == 0
    before = time.time()
    metrics.jwks_refresh(ok=True)
    stamped = value(metrics, "aql_mcp_jwks_last_success_timestamp_seconds")
    assert before <= stamped <= time.time()
    metrics.jwks_refresh(ok=False)
    assert value(metrics, "aql_mcp_jwks_last_success_timestamp_seconds") == stamped


def test_store_availability_follows_the_last_check(metrics: Metrics) -> None:
    metrics.store_check(available=True)
    assert value(metrics, "aql_mcp_store_available") == 1
    metrics.store_check(available=False)
    assert value(metrics, "aql_mcp_store_available") == 0


@pytest.mark.parametrize(
    "name",
    [
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ],
)
def test_the_own_registry_carries_the_process_metrics(metrics: Metrics, name: str) -> None:
    assert value(metrics, name) > 0


def test_the_own_registry_carries_the_python_platform_and_gc_metrics(metrics: Metrics) -> None:
    body, _ = metrics.exposition()
    families = {family.name for family in text_string_to_metric_families(body.decode())}
    assert {"python_info", "python_gc_objects_collected", "python_gc_collections"} <= families
    assert value(metrics, "python_gc_collections_total", generation="0") >= 0


def test_values_outside_the_fixed_sets_become_other(metrics: Metrics) -> None:
    metrics.call(tool="records", operation="read", outcome="ValueError: secret at /etc/x", seconds=0.1)
    metrics.auth_failure("token eyJhbGciOi... expired")
    metrics.limit_event("disk")
    assert value(metrics, "aql_mcp_calls_total", tool="records", operation="read", outcome="other") == 1
    assert value(metrics, "aql_mcp_auth_failures_total", reason="other") == 1
    assert value(metrics, "aql_mcp_limit_events_total", kind="other") == 1


def test_unknown_route_method_and_status_become_other(metrics: Metrics) -> None:
    metrics.http_request(route="/mcp/123", method="BREW", status=200, seconds=0.1)
    metrics.http_request(route="/mcp", method="GET", status=99, seconds=0.1)
    metrics.http_request(route="/mcp", method="GET", status=600, seconds=0.1)
    assert value(metrics, "aql_mcp_http_requests_total", route="other", method="other", status="200") == 1
    assert value(metrics, "aql_mcp_http_requests_total", route="/mcp", method="GET", status="other") == 2
    assert value(metrics, "aql_mcp_http_request_duration_seconds_count", route="other") == 1


def test_a_tool_or_operation_label_that_is_not_a_name_becomes_other(metrics: Metrics) -> None:
    metrics.call(tool="no such tool: 'x'", operation="subject=alice@example.com", outcome="ok", seconds=0.1)
    metrics.call(tool="a" * 65, operation="", outcome="ok", seconds=0.1)
    assert value(metrics, "aql_mcp_calls_total", tool="other", operation="other", outcome="ok") == 1
    assert value(metrics, "aql_mcp_calls_total", tool="other", operation="", outcome="ok") == 1


def test_tool_names_past_the_cap_become_other_but_known_ones_keep_counting(metrics: Metrics) -> None:
    for index in range(MAX_TOOLS):
        metrics.call(tool=f"tool_{index}", operation="", outcome="ok", seconds=0.0)
    metrics.call(tool="one_too_many", operation="", outcome="ok", seconds=0.0)
    metrics.call(tool="tool_0", operation="", outcome="ok", seconds=0.0)
    assert value(metrics, "aql_mcp_calls_total", tool="one_too_many", operation="", outcome="ok") == 0
    assert value(metrics, "aql_mcp_calls_total", tool="other", operation="", outcome="ok") == 1
    assert value(metrics, "aql_mcp_calls_total", tool="tool_0", operation="", outcome="ok") == 2


def test_a_burst_of_random_labels_keeps_the_series_bounded(metrics: Metrics) -> None:
    rng = seeded(20251125)
    burst(metrics, rng)
    seen = label_values(metrics)
    assert len(seen["tool"]) == MAX_TOOLS + 1
    assert len(seen["operation"]) <= MAX_OPERATIONS + 1
    assert seen["outcome"] <= {*OUTCOMES, "other"}
    assert seen["route"] <= {*ROUTES, "other"}
    assert seen["method"] <= {*METHODS, "other"}
    assert seen["status"] <= {*(str(code) for code in range(100, 600)), "other"}
    assert seen["reason"] <= {*AUTH_REASONS, "other"}
    assert seen["kind"] <= {*LIMIT_KINDS, "other"}
    before = sample_count(metrics)
    burst(metrics, rng)
    assert label_values(metrics)["tool"] == seen["tool"]
    assert label_values(metrics)["operation"] == seen["operation"]
    # Fresh random names add nothing; only a few newly drawn valid statuses may add a series.
    assert sample_count(metrics) - before < 100


def test_two_instances_never_share_a_series() -> None:
    first = Metrics(service="a", version="1")
    second = Metrics(service="b", version="2")
    first.limit_event("rate")
    assert value(first, "aql_mcp_limit_events_total", kind="rate") == 1
    assert value(second, "aql_mcp_limit_events_total", kind="rate") == 0
    assert value(second, "aql_mcp_build_info", version="1", service="a") == 0


def test_exposition_passes_promtool_check_metrics(metrics: Metrics) -> None:
    metrics.track(sessions=lambda: 2, streams=lambda: 1)
    burst(metrics, seeded(7), size=200)
    metrics.jwks_refresh(ok=True)
    body, content_type = metrics.exposition()
    assert content_type == CONTENT_TYPE
    checked = check_with_promtool(body)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_promtool_script_rejects_a_malformed_exposition() -> None:
    checked = check_with_promtool(b'aql_mcp_calls_total{tool="x"} not-a-number\n')
    assert checked.returncode != 0


async def get_metrics(
    endpoint: MetricsEndpoint, client: tuple[str, int] = ("127.0.0.1", 50000), method: str = "GET"
) -> httpx.Response:
    transport = httpx.ASGITransport(app=endpoint, client=client)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        return await http.request(method, "/metrics")


@pytest.mark.anyio
async def test_endpoint_serves_the_exposition_as_text(metrics: Metrics) -> None:
    metrics.limit_event("body")
    response = await get_metrics(MetricsEndpoint(metrics))
    assert response.status_code == 200
    assert response.headers["content-type"] == CONTENT_TYPE
    assert 'aql_mcp_limit_events_total{kind="body"} 1.0' in response.text
    assert 'aql_mcp_build_info{service="aql-mcp",version="1.2.3"} 1.0' in response.text


@pytest.mark.anyio
async def test_endpoint_answers_head_with_headers_only(metrics: Metrics) -> None:
    response = await get_metrics(MetricsEndpoint(metrics), method="HEAD")
    assert response.status_code == 200
    assert response.headers["content-type"] == CONTENT_TYPE
    assert response.content == b""


@pytest.mark.anyio
async def test_endpoint_refuses_other_methods_with_405(metrics: Metrics) -> None:
    response = await get_metrics(MetricsEndpoint(metrics), method="POST")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"


@pytest.mark.anyio
async def test_endpoint_admits_a_client_inside_an_allowed_network(metrics: Metrics) -> None:
    endpoint = MetricsEndpoint(metrics, allowed=("10.0.0.0/8", "192.0.2.7"))
    assert (await get_metrics(endpoint, client=("10.20.30.40", 1234))).status_code == 200
    assert (await get_metrics(endpoint, client=("192.0.2.7", 1234))).status_code == 200


@pytest.mark.anyio
async def test_endpoint_refuses_a_client_outside_the_allow_list_with_403(metrics: Metrics) -> None:
    endpoint = MetricsEndpoint(metrics, allowed=("10.0.0.0/8",))
    response = await get_metrics(endpoint, client=("192.0.2.1", 1234))
    assert response.status_code == 403
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == -32600
    assert "aql_mcp_" not in response.text


@pytest.mark.anyio
async def test_endpoint_refuses_a_client_that_is_not_an_ip_address(metrics: Metrics) -> None:
    endpoint = MetricsEndpoint(metrics, allowed=("127.0.0.0/8",))
    assert (await get_metrics(endpoint, client=("testclient", 1234))).status_code == 403


@pytest.mark.anyio
async def test_endpoint_matches_ipv4_mapped_ipv6_clients_and_ipv6_networks(metrics: Metrics) -> None:
    endpoint = MetricsEndpoint(metrics, allowed=("127.0.0.1", "2001:db8::/32"))
    assert (await get_metrics(endpoint, client=("::ffff:127.0.0.1", 1234))).status_code == 200
    assert (await get_metrics(endpoint, client=("2001:db8::1", 1234))).status_code == 200
    assert (await get_metrics(endpoint, client=("2001:db9::1", 1234))).status_code == 403


def test_a_malformed_allow_list_entry_fails_at_construction(metrics: Metrics) -> None:
    with pytest.raises(ConfigError, match=re.escape("10.0.0.0/33")):
        MetricsEndpoint(metrics, allowed=("10.0.0.0/33",))


def test_a_real_server_exposes_process_memory_gc_and_the_alerting_gauges_on_its_metrics_port(
    tmp_path: Path,
) -> None:
    """Issue 15: memory, CPU, open files and GC of the serving process, beside the alerts' gauges."""
    port = free_port()
    with start_server(tmp_path, env={"AQL_MCP_METRICS__PORT": str(port), "AQL_MCP_SESSIONS__MAX_OPEN": "250"}):
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10.0)
    assert scraped.status_code == 200
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
    }
    names = {name for name, _ in samples}
    assert {
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "python_info",
        "python_gc_collections_total",
        "python_gc_objects_collected_total",
    } <= names
    assert samples[("process_resident_memory_bytes", ())] > 0
    assert samples[("aql_mcp_open_sessions_limit", ())] == 250
    assert samples[("aql_mcp_store_available", ())] == 1  # the store opened at start
    assert samples[("aql_mcp_jwks_last_success_timestamp_seconds", ())] == 0  # development mode: no JWKS


def test_the_store_session_gauge_counts_the_stores_sessions_not_this_replicas(tmp_path: Path) -> None:
    """The session cap is enforced on the store's rows, shared by every replica: the alert reads
    aql_mcp_store_sessions. A restarted replica holds none of the sessions the store still has."""
    port = free_port()
    env = {"AQL_MCP_METRICS__PORT": str(port)}
    with start_server(tmp_path, env=env) as server:
        headers = {"authorization": f"Bearer {server.token()}", "accept": "application/json, text/event-stream"}
        for _ in range(2):
            body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params()}
            assert httpx.post(server.url, json=body, headers=headers, timeout=10).status_code == 200
    with start_server(tmp_path, env=env):
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10.0)
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(scraped.text)
        for sample in family.samples
        if not sample.labels
    }
    assert samples["aql_mcp_open_sessions"] == 0
    assert samples["aql_mcp_store_sessions"] == 2
