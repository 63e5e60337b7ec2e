"""One log line and the HTTP metrics per request (corporate §15.2, §15.3).

The line carries the path but never the query string (which could hold a secret), plus what the
layers below bound to the log context: request id, trace id, session, MCP method.

A probe that succeeds (`/health`, `/ready`, `/metrics`: kubelet and Prometheus call them every
few seconds) is logged at debug, so the info log holds the traffic that matters; a probe that
fails (not ready, a refused scrape) stays at info, where it explains a pod taken out of service.
"""

from __future__ import annotations

import time

import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aql_mcp.observability.logging import info_line
from aql_mcp.observability.metrics import ROUTES, Metrics

log = structlog.get_logger("aql_mcp.http")
PROBES = frozenset({"/health", "/ready", "/metrics"})


class AccessMiddleware:
    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0
        started = time.perf_counter()

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            seconds = time.perf_counter() - started
            path = scope["path"]
            route = path if path in ROUTES else "other"
            self.metrics.http_request(route=route, method=scope["method"], status=status, seconds=seconds)
            fields = {
                "method": scope["method"],
                "path": path,
                "status": status,
                "duration_ms": round(seconds * 1000, 2),
            }
            if path in PROBES and 0 < status < 400:
                log.debug("http_request", **fields)
            else:
                info_line(log, "http_request", **fields)
