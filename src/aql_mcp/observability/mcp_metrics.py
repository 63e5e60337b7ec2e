"""The OpenTelemetry MCP metrics: `mcp.server.operation.duration` and `mcp.server.session.duration`.

Both are histograms in seconds with the convention's bucket boundaries (docs/monitoring.md,
"MCP metrics"). They are always on `/metrics` under their Prometheus names
(`mcp_server_operation_duration_seconds`, `mcp_server_session_duration_seconds`, the attributes as
labels with `_` for `.`), and also exported over OTLP/HTTP when `tracing.otlp_metrics_endpoint` is
set. Labels stay bounded as in metrics.py: method names from the MCP set, registered tool and
prompt names capped, error types a JSON-RPC code or `tool_error`, and no ids.
"""

from __future__ import annotations

import re
from typing import Any

from prometheus_client import CollectorRegistry, Histogram

from aql_mcp.observability.metrics import BoundedNames, clamp

# The convention's ExplicitBucketBoundaries for both histograms.
BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# The methods a client sends this server (both eras); any other name is a label value `other`.
METHODS = (
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "skills/list",
    "skills/get",
    "server/discover",
    "subscriptions/listen",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/roots/list_changed",
    "notifications/progress",
)
# A JSON-RPC code, or the one error of a successful call the convention names.
ERROR_TYPE = re.compile(r"^-?[0-9]{1,6}$|^tool_error$")
VERSION = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
MAX_NAMES = 500
MAX_VERSIONS = 16
OPERATION_LABELS = ("mcp_method_name", "gen_ai_tool_name", "gen_ai_prompt_name", "error_type", "mcp_protocol_version")


class McpMetrics:
    """The two MCP histograms of one app, on its Prometheus registry and, if configured, over OTLP."""

    def __init__(
        self, registry: CollectorRegistry, *, service: str, version: str, otlp_endpoint: str | None = None
    ) -> None:
        self._tools = BoundedNames(MAX_NAMES)
        self._prompts = BoundedNames(MAX_NAMES)
        self._versions = BoundedNames(MAX_VERSIONS, VERSION)
        self._operation_seconds = Histogram(
            "mcp_server_operation_duration_seconds",
            "MCP request or notification duration as observed on the server (OpenTelemetry MCP conventions).",
            OPERATION_LABELS,
            buckets=BUCKETS,
            registry=registry,
        )
        self._session_seconds = Histogram(
            "mcp_server_session_duration_seconds",
            "Duration of MCP sessions (legacy era) as observed on the server (OpenTelemetry MCP conventions).",
            ("mcp_protocol_version", "error_type"),
            buckets=BUCKETS,
            registry=registry,
        )
        # Labelled children by the raw values, kept only where no value was clamped (bounded as the series).
        self._children: dict[tuple[str, str, str, str, str], Any] = {}
        self._otlp: Any = None
        if otlp_endpoint is not None:
            self._otlp = _OtlpMetrics(service=service, version=version, endpoint=otlp_endpoint)

    def operation(
        self,
        *,
        method: str,
        seconds: float,
        tool: str | None = None,
        prompt: str | None = None,
        error_type: str | None = None,
        protocol_version: str | None = None,
    ) -> None:
        """One MCP request or notification, served (or refused) in `seconds`."""
        key = (method, tool or "", prompt or "", error_type or "", protocol_version or "")
        child = self._children.get(key)
        if child is None or self._otlp is not None:
            labels = {
                "mcp_method_name": clamp(method, METHODS),
                "gen_ai_tool_name": self._tools.clamp(key[1]),
                "gen_ai_prompt_name": self._prompts.clamp(key[2]),
                "error_type": _error_type(error_type),
                "mcp_protocol_version": self._version(protocol_version),
            }
            child = self._operation_seconds.labels(**labels)
            if tuple(labels.values()) == key:
                self._children[key] = child
            if self._otlp is not None:
                self._otlp.operation(seconds, labels)
        child.observe(seconds)

    def session(self, *, seconds: float, protocol_version: str | None, error_type: str | None = None) -> None:
        """One legacy-era session, ended (deleted or expired) after `seconds`."""
        labels = {"mcp_protocol_version": self._version(protocol_version), "error_type": _error_type(error_type)}
        self._session_seconds.labels(**labels).observe(seconds)
        if self._otlp is not None:
            self._otlp.session(seconds, labels)

    def _version(self, version: str | None) -> str:
        return self._versions.clamp(version or "")

    def shutdown(self) -> None:
        """Export what is still held (the reader's last collection) and stop the exporter."""
        if self._otlp is not None:
            self._otlp.shutdown()


def _error_type(error_type: str | None) -> str:
    if not error_type:
        return ""
    return error_type if ERROR_TYPE.fullmatch(error_type) else "_OTHER"


class _OtlpMetrics:
    """The same two histograms through the OpenTelemetry SDK, exported over OTLP/HTTP.

    Imported only when configured, like the span exporter: a service without OTLP never loads it.
    """

    def __init__(self, *, service: str, version: str, endpoint: str) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource

        reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint))
        resource = Resource.create({"service.name": service, "service.version": version})
        self._provider = MeterProvider(resource=resource, metric_readers=[reader])
        meter = self._provider.get_meter("aql_mcp")
        self._operation = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request or notification duration as observed on the server.",
            explicit_bucket_boundaries_advisory=BUCKETS,
        )
        self._session = meter.create_histogram(
            "mcp.server.session.duration",
            unit="s",
            description="Duration of the MCP session as observed on the server.",
            explicit_bucket_boundaries_advisory=BUCKETS,
        )

    def operation(self, seconds: float, labels: dict[str, str]) -> None:
        self._operation.record(seconds, _attributes(labels))

    def session(self, seconds: float, labels: dict[str, str]) -> None:
        self._session.record(seconds, _attributes(labels))

    def shutdown(self) -> None:
        self._provider.shutdown()


def _attributes(labels: dict[str, str]) -> dict[str, str]:
    """The convention's attribute names of the set labels (`gen_ai_tool_name` -> `gen_ai.tool.name`)."""
    return {ATTRIBUTE_OF[label]: value for label, value in labels.items() if value}


ATTRIBUTE_OF = {
    "mcp_method_name": "mcp.method.name",
    "gen_ai_tool_name": "gen_ai.tool.name",
    "gen_ai_prompt_name": "gen_ai.prompt.name",
    "error_type": "error.type",
    "mcp_protocol_version": "mcp.protocol.version",
}
