"""What a platform team gets beside the chart: the alert rules and the Grafana dashboard (issue 15).

The rules run through `promtool check rules` and `promtool test rules` (firing and quiet cases for
each alert); every PromQL expression of the dashboard goes through `promtool check rules` wrapped
in a recording rule; and every metric name either of them reads is one a real `aql-mcp serve`
exposes on its metrics port. The chart ships the same two files (files/), as a PrometheusRule and
a ConfigMap for Grafana's sidecar, byte for byte what deploy/ holds.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.chart import (
    CHART,
    PRODUCTION,
    find,
    helm,
    kubernetes_validate,
    only,
    render,
)
from tests.support.server import free_port, start_server

ROOT = Path(__file__).resolve().parents[2]
PROMTOOL = ROOT / "scripts" / "promtool.sh"
RULES = ROOT / "deploy" / "prometheus" / "aql-mcp-rules.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "aql-mcp-dashboard.json"
CHART_RULES = CHART / "files" / "prometheus-rules.yaml"
CHART_DASHBOARD = CHART / "files" / "grafana-dashboard.json"
# The names of a sample of each metric type in the exposition format.
SAMPLE_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}
# PromQL words that are not metric names (operators and modifiers; functions are followed by "(").
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "inf", "nan"}
# Series Prometheus itself writes for every scrape target, not the service.
PROMETHEUS_SERIES = {"up"}
# Grafana's variables, replaced by what they stand for so that promtool can parse the expression.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$namespace": ".*", "$job": ".*"}


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    command = [str(PROMTOOL), *(str(arg) for arg in args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: what is left once strings, label matchers,
    ranges, grouping clauses, functions and operators are taken out."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", " ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = set()
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", expr):
        if expr[match.end() :].lstrip().startswith("(") or match.group() in PROMQL_WORDS:
            continue
        names.add(match.group())
    return names


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def dashboard_queries() -> Iterator[tuple[str, str]]:
    """(where, expression) of every panel target and every query variable."""
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            yield f"panel {panel['id']} {target['refId']}", target["expr"]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            # Grafana's `label_values(selector, label)`: the selector is the PromQL it runs.
            query = variable["query"]["query"]
            found = re.fullmatch(r"label_values\((.*), *\w+\)", query)
            yield f"variable {variable['name']}", found.group(1) if found else query


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every sample name a real server's /metrics (on its own port) can carry, from its families:
    a labelled family with no sample yet still declares its name and type."""
    port = free_port()
    with start_server(tmp_path_factory.mktemp("metrics"), env={"AQL_MCP_METRICS__PORT": str(port)}):
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10.0)
    assert scraped.status_code == 200
    names = set()
    for family in text_string_to_metric_families(scraped.text):
        names.update(family.name + suffix for suffix in SAMPLE_SUFFIXES.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def test_the_metrics_docs_name_only_metrics_the_service_exposes(exposed: set[str]) -> None:
    documented = re.findall(
        r"`((?:aql_mcp|process|python)_[a-z_]+)`", (ROOT / "docs" / "monitoring.md").read_text(encoding="utf-8")
    )
    assert len(set(documented)) > 20
    for name in documented:
        assert {name, f"{name}_bucket"} & exposed, f"docs/monitoring.md names {name}"


# --- the files: one content in two places --------------------------------------------------------


@pytest.mark.parametrize(("shipped", "packaged"), [(RULES, CHART_RULES), (DASHBOARD, CHART_DASHBOARD)])
def test_the_file_beside_the_chart_is_the_file_in_the_chart(shipped: Path, packaged: Path) -> None:
    """deploy/ is for a Prometheus or a Grafana without the chart; the chart cannot read outside itself."""
    assert shipped.read_bytes() == packaged.read_bytes()


def test_metric_names_finds_the_metrics_and_nothing_else() -> None:
    """The control for the name checks below."""
    expr = (
        'sum by (job, le) (rate(a_total{x="y", z=~"b|c"}[5m])) / ignoring(result) b_seconds '
        'and on(job) (time() - c:recorded > 0.5) or histogram_quantile(0.99, d_bucket{le="+Inf"}) > bool 1'
    )
    assert metric_names(expr) == {"a_total", "b_seconds", "c:recorded", "d_bucket"}


# --- the alerts ----------------------------------------------------------------------------------


def test_promtool_check_rules_accepts_the_alerts() -> None:
    checked = promtool("check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_alerts_cover_errors_latency_auth_jwks_store_and_sessions() -> None:
    names = {rule["alert"] for rule in alert_rules()}
    assert names >= {
        "AqlMcpHighErrorRatio",
        "AqlMcpHighLatencyP99",
        "AqlMcpAuthFailures",
        "AqlMcpJwksStale",
        "AqlMcpStoreUnavailable",
        "AqlMcpSessionsNearCap",
        "AqlMcpDown",
    }
    for rule in alert_rules():
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "description"} <= set(rule["annotations"])


def test_the_alerts_read_only_metrics_the_service_exposes(exposed: set[str]) -> None:
    for rule in alert_rules():
        unknown = metric_names(rule["expr"]) - exposed - PROMETHEUS_SERIES
        assert not unknown, f"{rule['alert']} reads {unknown}"


SERVICE = 'namespace="mcp", job="aql-mcp"'
POD = f'{SERVICE}, instance="10.0.0.1:9090"'
GROUPED = {"namespace": "mcp", "job": "aql-mcp"}
PER_POD = {**GROUPED, "instance": "10.0.0.1:9090"}


def calls(outcome: str, values: str) -> dict[str, str]:
    return {"series": f'aql_mcp_calls_total{{{POD}, tool="t", operation="o", outcome="{outcome}"}}', "values": values}


def latency(le: str, values: str) -> dict[str, str]:
    return {
        "series": f'aql_mcp_call_duration_seconds_bucket{{{POD}, tool="t", operation="o", le="{le}"}}',
        "values": values,
    }


def series(name: str, values: str, labels: str = POD) -> dict[str, str]:
    return {"series": f"{name}{{{labels}}}", "values": values}


# (alert, input series at one sample a minute, evaluated at, the alert's labels when it fires or None)
ALERT_CASES: dict[str, tuple[str, list[dict[str, str]], str, dict[str, str] | None]] = {
    "errors above 5% fire": (
        "AqlMcpHighErrorRatio",
        [calls("ok", "0+90x40"), calls("internal", "0+6x40"), calls("timeout", "0+4x40")],
        "30m",
        GROUPED,
    ),
    "errors at 1% stay quiet": (
        "AqlMcpHighErrorRatio",
        [calls("ok", "0+99x40"), calls("internal", "0+1x40")],
        "30m",
        None,
    ),
    "cancelled and input_required calls are not errors": (
        "AqlMcpHighErrorRatio",
        [calls("ok", "0+10x40"), calls("cancelled", "0+50x40"), calls("input_required", "0+40x40")],
        "30m",
        None,
    ),
    "a p99 above 5 s fires": (
        "AqlMcpHighLatencyP99",
        [latency("1.0", "0x40"), latency("10.0", "0+10x40"), latency("+Inf", "0+10x40")],
        "30m",
        GROUPED,
    ),
    "fast calls stay quiet": (
        "AqlMcpHighLatencyP99",
        [latency("0.1", "0+10x40"), latency("10.0", "0+10x40"), latency("+Inf", "0+10x40")],
        "30m",
        None,
    ),
    "a third of the requests with refused tokens fires": (
        "AqlMcpAuthFailures",
        [
            series("aql_mcp_auth_failures_total", "0+30x40", f'{POD}, reason="invalid_token"'),
            series("aql_mcp_http_requests_total", "0+90x40", f'{POD}, route="/mcp", method="POST", status="200"'),
        ],
        "30m",
        GROUPED,
    ),
    "requests without a token (discovery) stay quiet": (
        "AqlMcpAuthFailures",
        [
            series("aql_mcp_auth_failures_total", "0+90x40", f'{POD}, reason="missing_token"'),
            series("aql_mcp_auth_failures_total", "0x40", f'{POD}, reason="invalid_token"'),
            series("aql_mcp_http_requests_total", "0+100x40", f'{POD}, route="/mcp", method="POST", status="401"'),
        ],
        "30m",
        None,
    ),
    "an IdP out of reach fires": (
        "AqlMcpAuthUnavailable",
        [series("aql_mcp_auth_failures_total", "0+2x40", f'{POD}, reason="unavailable"')],
        "30m",
        GROUPED,
    ),
    "a key set refreshed 29 minutes ago fires": (
        "AqlMcpJwksStale",
        [series("aql_mcp_jwks_last_success_timestamp_seconds", "60x40")],
        "30m",
        PER_POD,
    ),
    "a key set refreshed every minute stays quiet": (
        "AqlMcpJwksStale",
        [series("aql_mcp_jwks_last_success_timestamp_seconds", "0+60x40")],
        "30m",
        None,
    ),
    "a key set never fetched while refreshes fail fires": (
        "AqlMcpJwksStale",
        [
            series("aql_mcp_jwks_last_success_timestamp_seconds", "0x40"),
            series("aql_mcp_jwks_refreshes_total", "0+1x40", f'{POD}, result="failed"'),
        ],
        "30m",
        PER_POD,
    ),
    "no JWKS configured stays quiet": (
        "AqlMcpJwksStale",
        [
            series("aql_mcp_jwks_last_success_timestamp_seconds", "0x40"),
            series("aql_mcp_jwks_refreshes_total", "0x40", f'{POD}, result="failed"'),
        ],
        "30m",
        None,
    ),
    "a store that cannot write fires": (
        "AqlMcpStoreUnavailable",
        [series("aql_mcp_store_available", "1x5 0x20")],
        "20m",
        PER_POD,
    ),
    "a takeover of a lost replica's work fires": (
        "AqlMcpTasksTakenOver",
        [
            series(
                "aql_mcp_task_takeovers_total", "0x10 1x30", f'{POD}, task_kind="execution", task_outcome="resumed"'
            ),
        ],
        "15m",
        GROUPED,
    ),
    "no takeover stays quiet": (
        "AqlMcpTasksTakenOver",
        [series("aql_mcp_task_takeovers_total", "0x40", f'{POD}, task_kind="task", task_outcome="ended"')],
        "30m",
        None,
    ),
    "an available store stays quiet": (
        "AqlMcpStoreUnavailable",
        [series("aql_mcp_store_available", "1x40")],
        "30m",
        None,
    ),
    "a store holding 95% of the cap fires, whichever replica holds them": (
        "AqlMcpSessionsNearCap",
        [
            # The cap counts the store's rows: a replica may hold none of them in memory.
            series("aql_mcp_open_sessions", "0x40", f'{SERVICE}, instance="a"'),
            series("aql_mcp_open_sessions", "100x40", f'{SERVICE}, instance="b"'),
            series("aql_mcp_store_sessions", "950x40", f'{SERVICE}, instance="a"'),
            series("aql_mcp_store_sessions", "950x40", f'{SERVICE}, instance="b"'),
            series("aql_mcp_open_sessions_limit", "1000x40", f'{SERVICE}, instance="a"'),
            series("aql_mcp_open_sessions_limit", "1000x40", f'{SERVICE}, instance="b"'),
        ],
        "30m",
        GROUPED,
    ),
    "two replicas reporting the same half-full store stay quiet (max, not sum)": (
        "AqlMcpSessionsNearCap",
        [
            series("aql_mcp_store_sessions", "500x40", f'{SERVICE}, instance="a"'),
            series("aql_mcp_store_sessions", "500x40", f'{SERVICE}, instance="b"'),
            series("aql_mcp_open_sessions_limit", "1000x40", f'{SERVICE}, instance="a"'),
            series("aql_mcp_open_sessions_limit", "1000x40", f'{SERVICE}, instance="b"'),
        ],
        "30m",
        None,
    ),
    "a job whose every replica stopped answering fires": (
        "AqlMcpDown",
        [
            series("up", "1x10 0x30", f'{SERVICE}, instance="a"'),
            series("up", "1x10 0x30", f'{SERVICE}, instance="b"'),
            series("aql_mcp_build_info", "1x10 _x30", f'{SERVICE}, instance="a", version="1", service="s"'),
        ],
        "30m",
        GROUPED,
    ),
    "one replica of two down stays quiet": (
        "AqlMcpDown",
        [
            series("up", "0x40", f'{SERVICE}, instance="a"'),
            series("up", "1x40", f'{SERVICE}, instance="b"'),
            series("aql_mcp_build_info", "1x40", f'{SERVICE}, instance="b", version="1", service="s"'),
        ],
        "30m",
        None,
    ),
    "another job down stays quiet": (
        "AqlMcpDown",
        [series("up", "0x40", 'namespace="mcp", job="other", instance="a"')],
        "30m",
        None,
    ),
    "sessions refused at the cap fire": (
        "AqlMcpSessionsRefused",
        [series("aql_mcp_limit_events_total", "0x10 1x30", f'{POD}, kind="session_table"')],
        "12m",
        GROUPED,
    ),
}


def alert_test(alert: str, inputs: list[dict[str, str]], at: str, fires: dict[str, str] | None) -> dict[str, Any]:
    """A `promtool test rules` case: the firing ALERTS series at `at` (its labels), or none."""
    severity = next(rule["labels"]["severity"] for rule in alert_rules() if rule["alert"] == alert)
    expected = []
    if fires is not None:
        labels = {"alertname": alert, "alertstate": "firing", "severity": severity, **fires}
        expected = [
            {"labels": "ALERTS{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}", "value": 1}
        ]
    return {
        "interval": "1m",
        "input_series": inputs,
        "promql_expr_test": [
            {"expr": f'ALERTS{{alertname="{alert}", alertstate="firing"}}', "eval_time": at, "exp_samples": expected}
        ],
    }


@pytest.mark.parametrize("case", ALERT_CASES.values(), ids=ALERT_CASES.keys())
def test_promtool_test_rules_fires_each_alert_when_it_should_and_only_then(
    case: tuple[str, list[dict[str, str]], str, dict[str, str] | None], tmp_path: Path
) -> None:
    alert, inputs, at, fires = case
    tests = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [alert_test(alert, inputs, at, fires)]}
    path = tmp_path / "alerts.test.yaml"
    path.write_text(yaml.safe_dump(tests), encoding="utf-8")
    tested = promtool("test", "rules", path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_promtool_test_rules_fails_a_wrong_expectation(tmp_path: Path) -> None:
    """The control for the cases above: a quiet case announced as firing is a failure."""
    alert, inputs, at, _ = ALERT_CASES["an available store stays quiet"]
    tests = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [alert_test(alert, inputs, at, PER_POD)]}
    path = tmp_path / "alerts.test.yaml"
    path.write_text(yaml.safe_dump(tests), encoding="utf-8")
    assert promtool("test", "rules", path).returncode != 0


# --- the chart's PrometheusRule ------------------------------------------------------------------


def test_the_production_example_renders_the_alerts_as_a_prometheus_rule(deploy_tools: dict[str, Path]) -> None:
    docs = render(deploy_tools, "-f", PRODUCTION)
    rule = only(docs, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert rule["spec"] == yaml.safe_load(RULES.read_text(encoding="utf-8"))


def test_the_prometheus_rule_and_the_dashboard_are_off_by_default(deploy_tools: dict[str, Path]) -> None:
    docs = render(deploy_tools)
    assert not find(docs, "PrometheusRule")
    assert len(find(docs, "ConfigMap")) == 1  # the service's config file only


def test_the_prometheus_rule_is_refused_when_the_service_serves_no_metrics(deploy_tools: dict[str, Path]) -> None:
    result = helm(
        deploy_tools, "template", "aql", "--set", "prometheusRule.enabled=true", "--set", "config.metrics.enabled=false"
    )
    assert result.returncode != 0
    assert "config.metrics.enabled" in result.stderr


# --- the dashboard -------------------------------------------------------------------------------


def test_the_dashboard_has_the_shape_grafana_imports() -> None:
    board = dashboard()
    assert isinstance(board["schemaVersion"], int)
    assert board["uid"]
    assert board["title"]
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert all(isinstance(grid[key], int) for key in ("h", "w", "x", "y"))
        assert grid["x"] >= 0
        assert grid["x"] + grid["w"] <= 24
        if panel["type"] == "row":
            continue
        # The data source is the variable, never a uid of the Grafana it was exported from.
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [target["refId"] for target in panel["targets"]]
        assert refs
        assert len(refs) == len(set(refs))
        assert all(target["datasource"] == panel["datasource"] for target in panel["targets"])


def test_no_two_panels_overlap() -> None:
    cells: set[tuple[int, int]] = set()
    for panel in dashboard()["panels"]:
        grid = panel["gridPos"]
        area = {
            (x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not area & cells, f"panel {panel['id']} overlaps another"
        cells |= area


def test_every_dashboard_expression_parses_with_promtool(tmp_path: Path) -> None:
    rules = []
    for index, (_, expr) in enumerate(dashboard_queries()):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        rules.append({"record": f"dashboard:query_{index}", "expr": expr})
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}), encoding="utf-8")
    checked = promtool("check", "rules", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{len(rules)} rules found" in checked.stdout


def test_the_dashboard_reads_only_metrics_the_service_exposes(exposed: set[str]) -> None:
    read = set()
    for where, expr in dashboard_queries():
        unknown = metric_names(expr) - exposed
        assert not unknown, f"{where} reads {unknown}"
        read |= metric_names(expr)
    # The process metrics are on the dashboard (memory, CPU, files, GC), not only the service's.
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total", "python_gc_collections_total"} <= read


def test_the_chart_ships_the_dashboard_to_grafanas_sidecar(deploy_tools: dict[str, Path], tmp_path: Path) -> None:
    docs = render(
        deploy_tools,
        "-f",
        PRODUCTION,
        "--set",
        "grafanaDashboard.enabled=true",
        "--set",
        "grafanaDashboard.annotations.grafana_folder=Platform",
    )
    (config_map,) = [doc for doc in find(docs, "ConfigMap") if "aql-mcp-dashboard.json" in doc["data"]]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "Platform"}
    assert json.loads(config_map["data"]["aql-mcp-dashboard.json"]) == dashboard()
    kubernetes_validate(deploy_tools, [config_map], tmp_path)
