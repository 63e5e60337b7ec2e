"""Prometheus metrics of one app (corporate §15.3) and the ASGI endpoint that serves them.

Every label has a bounded set of values by construction: a value outside its fixed set becomes
`other`, and tool and operation names are capped at a number of distinct values, so no caller can
grow the series without limit. Labels never carry ids, subjects, tokens or error text.
Each `Metrics` has its own `CollectorRegistry`, so two apps (or two tests) never share a series;
the process, platform and garbage-collector collectors prometheus-client puts on its global
registry are added to each one, so /metrics carries memory, CPU, open files and `python_gc_*`.
The alerts and the dashboard shipped beside the chart read these names (docs/monitoring.md).
"""

from __future__ import annotations

import ipaddress
import re
import threading
import time
from collections.abc import Callable, Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from starlette.types import Receive, Scope, Send

from aql_mcp.exceptions import ConfigError, Forbidden
from aql_mcp.observability.task_metrics import TaskMeter
from aql_mcp.responses import send_empty, send_error
from aql_mcp.scope import request_id_of

OTHER = "other"
# `input_required`: a modern call that ended its attempt to ask the client (docs/eras.md, MRTR);
# `cancelled`: the client cancelled it or went away. Neither is a failure of the service, so error
# ratios leave them out.
OUTCOMES = (
    "ok",
    "client_error",
    "auth_error",
    "rate_limited",
    "timeout",
    "internal",
    "input_required",
    "cancelled",
)
AUTH_REASONS = ("missing_token", "invalid_token", "insufficient_scope", "unavailable")
LIMIT_KINDS = (
    "rate",
    "concurrency",
    "sessions",
    "session_table",
    "body",
    "timeout",
    "result_size",
    "connections",
    "connections_per_source",
    "headers",
    "header_timeout",
    "body_timeout",
    "malformed",
    "introspection",
    "evicted",
    "pipeline",
    "write_timeout",
    "listens",
    "listen_table",
)
INTROSPECTION_RESULTS = ("active", "inactive", "failed")
ROUTES = (
    "/mcp",
    "/health",
    "/ready",
    "/metrics",
    "/",
    "/.well-known/oauth-protected-resource",
    "/.well-known/jwks.json",
)
METHODS = ("GET", "POST", "DELETE", "OPTIONS", "HEAD", "PUT", "PATCH")
# From a 1 ms ping to the 30 s default tool timeout (limits.tool_timeout_seconds).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
MAX_TOOLS = 500
MAX_OPERATIONS = 500
# Registered tool and operation names are short snake_case words; anything else is not a name.
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")


def clamp(value: str, allowed: Iterable[str]) -> str:
    return value if value in allowed else OTHER


def clamp_status(status: int) -> str:
    return str(status) if isinstance(status, int) and 100 <= status <= 599 else OTHER


class BoundedNames:
    """Remembers up to `limit` distinct names; later new names, and non-names, become `other`."""

    def __init__(self, limit: int, pattern: re.Pattern[str] = NAME) -> None:
        self._limit = limit
        self._pattern = pattern
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def clamp(self, value: str) -> str:
        if value in self._seen or value == "":
            return value
        if not self._pattern.fullmatch(value):
            return OTHER
        with self._lock:
            if len(self._seen) >= self._limit:
                return OTHER
            self._seen.add(value)
        return value


class Metrics:
    """All metrics of one app, on its own CollectorRegistry (never the global one)."""

    def __init__(self, *, service: str, version: str) -> None:
        # `*_created` series double the exposition and no dashboard of ours reads them; the
        # switch is process-wide in prometheus-client, so it is thrown here, idempotently.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        # The global registry's default collectors, on this one: memory, CPU, fds, python_info, GC.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._tools = BoundedNames(MAX_TOOLS)
        self._operations = BoundedNames(MAX_OPERATIONS)
        # Labelled children by the raw label values: `.labels()` costs more than the update it serves.
        self._http_children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self._call_children: dict[tuple[str, str, str], tuple[Counter, Histogram, bool]] = {}
        # Registration order is exposition order: traffic, refusals, state, build.
        self._traffic_series()
        self._refusal_series()
        self._state_gauges()
        # Tasks and executions, reported by the task runner and the executions worker.
        self.tasks = TaskMeter(self.registry)
        build = Gauge(
            "aql_mcp_build_info", "Build information; always 1.", ("version", "service"), registry=self.registry
        )
        build.labels(version=version, service=service).set(1)
        self._zero_known_labels()

    def _traffic_series(self) -> None:
        """Calls and HTTP requests: counts by outcome and durations."""
        self._calls = Counter(
            "aql_mcp_calls",
            "MCP calls (tools/call and other methods) by tool, MCP-AQL operation and outcome.",
            ("tool", "operation", "outcome"),
            registry=self.registry,
        )
        self._call_seconds = Histogram(
            "aql_mcp_call_duration_seconds",
            "Duration of MCP calls in seconds.",
            ("tool", "operation"),
            buckets=BUCKETS,
            registry=self.registry,
        )
        self._requests = Counter(
            "aql_mcp_http_requests",
            "HTTP requests by route template, method and status.",
            ("route", "method", "status"),
            registry=self.registry,
        )
        self._request_seconds = Histogram(
            "aql_mcp_http_request_duration_seconds",
            "Duration of HTTP requests in seconds, by route template.",
            ("route",),
            buckets=BUCKETS,
            registry=self.registry,
        )

    def _refusal_series(self) -> None:
        """What was refused or failed: authentications, limits, JWKS refreshes, introspection calls."""
        self._auth_failures = Counter(
            "aql_mcp_auth_failures", "Refused authentications by reason.", ("reason",), registry=self.registry
        )
        self._limit_events = Counter(
            "aql_mcp_limit_events", "Requests refused or cut by a limit, by kind.", ("kind",), registry=self.registry
        )
        self._jwks_refreshes = Counter(
            "aql_mcp_jwks_refreshes", "JWKS refreshes by result.", ("result",), registry=self.registry
        )
        self._introspections = Counter(
            "aql_mcp_introspection_calls",
            "Calls to the RFC 7662 introspection endpoint by result (active, inactive, failed); refused "
            'tokens without a call are aql_mcp_limit_events{kind="introspection"}.',
            ("result",),
            registry=self.registry,
        )

    def _state_gauges(self) -> None:
        """What this replica holds now: sessions, streams, replicas, caps, key and store health."""
        self._sessions = Gauge("aql_mcp_open_sessions", "Open MCP sessions this replica holds.", registry=self.registry)
        # The cap (sessions.max_open) is enforced on the store's rows, shared by every replica.
        self._store_sessions = Gauge(
            "aql_mcp_store_sessions",
            "Sessions in the store, every replica's, as counted at start and by each session sweep.",
            registry=self.registry,
        )
        self._streams = Gauge("aql_mcp_open_sse_streams", "Open SSE streams.", registry=self.registry)
        self._replicas = Gauge(
            "aql_mcp_replicas", "Live replicas sharing the store, this one included.", registry=self.registry
        )
        self._sessions_limit = Gauge(
            "aql_mcp_open_sessions_limit", "The cap on open sessions (sessions.max_open).", registry=self.registry
        )
        self._jwks_last_success = Gauge(
            "aql_mcp_jwks_last_success_timestamp_seconds",
            "Unix time of the last successful JWKS refresh; 0 before the first one or without a JWKS.",
            registry=self.registry,
        )
        self._store_available = Gauge(
            "aql_mcp_store_available",
            "1 when the store read and committed a write at its last readiness check (or opened at start), else 0.",
            registry=self.registry,
        )

    def _zero_known_labels(self) -> None:
        # Known label values start at 0, so a rate() sees the first event (Prometheus naming practices).
        for reason in AUTH_REASONS:
            self._auth_failures.labels(reason=reason)
        for kind in LIMIT_KINDS:
            self._limit_events.labels(kind=kind)
        for result in ("ok", "failed"):
            self._jwks_refreshes.labels(result=result)
        for result in INTROSPECTION_RESULTS:
            self._introspections.labels(result=result)

    def http_request(self, *, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        children = self._http_children.get(key)
        if children is None:
            children = self._http_series(route, method, status)
            if method in METHODS:  # the route is clamped by the caller, the status is a 3-digit int
                self._http_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def _http_series(self, route: str, method: str, status: int) -> tuple[Counter, Histogram]:
        route = clamp(route, ROUTES)
        counter = self._requests.labels(route=route, method=clamp(method, METHODS), status=clamp_status(status))
        return counter, self._request_seconds.labels(route=route)

    def call(self, *, tool: str, operation: str, outcome: str, seconds: float) -> None:
        key = (tool, operation, outcome)
        children = self._call_children.get(key)
        if children is None:
            children = self._call_series(tool, operation, outcome)
            # Only names the bounded sets took are remembered: the cache is as bounded as the series.
            if children[2]:
                self._call_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def _call_series(self, tool: str, operation: str, outcome: str) -> tuple[Counter, Histogram, bool]:
        clamped_tool = self._tools.clamp(tool)
        clamped_operation = self._operations.clamp(operation)
        counter = self._calls.labels(tool=clamped_tool, operation=clamped_operation, outcome=clamp(outcome, OUTCOMES))
        exact = clamped_tool == tool and clamped_operation == operation and outcome in OUTCOMES
        return counter, self._call_seconds.labels(tool=clamped_tool, operation=clamped_operation), exact

    def auth_failure(self, reason: str) -> None:
        self._auth_failures.labels(reason=clamp(reason, AUTH_REASONS)).inc()

    def limit_event(self, kind: str) -> None:
        self._limit_events.labels(kind=clamp(kind, LIMIT_KINDS)).inc()

    def jwks_refresh(self, *, ok: bool) -> None:
        self._jwks_refreshes.labels(result="ok" if ok else "failed").inc()
        if ok:
            # Wall-clock time, not an age: Prometheus computes the age with time() at query time.
            self._jwks_last_success.set(time.time())

    def store_check(self, *, available: bool) -> None:
        self._store_available.set(1 if available else 0)

    def store_sessions(self, count: int) -> None:
        self._store_sessions.set(count)

    def introspection_call(self, result: str) -> None:
        self._introspections.labels(result=clamp(result, INTROSPECTION_RESULTS)).inc()

    def track(
        self,
        *,
        sessions: Callable[[], int],
        streams: Callable[[], int],
        replicas: Callable[[], int] = lambda: 1,
        session_cap: int = 0,
    ) -> None:
        """Read the open sessions, streams and live replicas when scraped, not on every change."""
        self._sessions_limit.set(session_cap)
        self._sessions.set_function(sessions)
        self._streams.set_function(streams)
        self._replicas.set_function(replicas)

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition format 0.0.4 and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_PLAIN_0_0_4


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(allowed: Iterable[str]) -> tuple[Network, ...]:
    """IPs and CIDRs as networks; a malformed entry fails at startup."""
    networks = []
    for entry in allowed:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ConfigError(f"metrics allow-list: {entry!r} is not an IP address or CIDR network") from None
    return tuple(networks)


def is_allowed_client(host: str | None, networks: tuple[Network, ...]) -> bool:
    """Whether the peer address is in one of `networks`; no allow-list lets everyone in."""
    if not networks:
        return True
    if host is None:
        return False
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


class MetricsEndpoint:
    """`GET /metrics`: the exposition, optionally only for clients in an allow-list of networks.

    The client is the ASGI peer address (after uvicorn's proxy-header handling, which trusts only
    `server.forwarded_allow_ips`), never a header the client chose.
    """

    def __init__(self, metrics: Metrics, *, allowed: tuple[str, ...] = ()) -> None:
        self.metrics = metrics
        self.networks = parse_networks(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        client = scope.get("client")
        if not is_allowed_client(client[0] if client else None, self.networks):
            await send_error(send, Forbidden(), request_id=request_id_of(scope))
            return
        if scope["method"] not in ("GET", "HEAD"):
            await send_empty(send, 405, [(b"allow", b"GET, HEAD")])
            return
        body, content_type = self.metrics.exposition()
        headers = [(b"content-type", content_type.encode("latin-1")), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
