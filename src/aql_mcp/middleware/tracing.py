"""The server span of each HTTP request, and its trace and span ids in the log context (corporate §15.1)."""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aql_mcp.observability.logging import bind_log_context
from aql_mcp.observability.tracing import (
    CARRIER_KEYS,
    Tracing,
    peer_attributes,
    span_ids,
    trace_id_of,
)
from aql_mcp.scope import header


class TracingMiddleware:
    def __init__(self, app: ASGIApp, *, tracing: Tracing) -> None:
        self.app = app
        self.tracing = tracing

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Without tracing, returns the next app's awaitable: no frame here while a request runs (host.py).
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        if not self.tracing.enabled:
            trace_id = trace_id_of(header(scope, b"traceparent"))
            if trace_id:
                bind_log_context(trace_id=trace_id)
            return self.app(scope, receive, send)
        return self._traced(scope, receive, send)

    async def _traced(self, scope: Scope, receive: Receive, send: Send) -> None:
        carrier = {k: v for k in CARRIER_KEYS if (v := header(scope, k.encode())) is not None}
        attributes = {"http.request.method": scope["method"], "url.path": scope["path"]}
        peer = peer_attributes(scope)
        with self.tracing.server_span(f"{scope['method']} {scope['path']}", carrier, attributes, peer) as span:
            trace_id, span_id = span_ids(span)
            bind_log_context(trace_id=trace_id, span_id=span_id)

            async def send_with_status(message: Message) -> None:
                if message["type"] == "http.response.start" and span is not None:
                    span.set_attribute("http.response.status_code", message["status"])
                await send(message)

            await self.app(scope, receive, send_with_status)
