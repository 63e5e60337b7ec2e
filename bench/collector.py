"""A stand-in OpenTelemetry collector for the benchmark: it takes OTLP/HTTP trace exports and counts
the spans in them.

Issue 25 measures the service with traces on at the default sampler (every trace recorded), so
aql-mcp exports its spans as in production (`tracing.otlp_endpoint`, a BatchSpanProcessor and the
OTLP/HTTP exporter in the server process). This receives them in a thread of the driver, on the load
CPU: each export is parsed (so a broken export would show) and its spans counted, which lets the
report say how many spans each call produced. The server's cost of building and exporting the spans
is in its CPU per call; the collector's is not.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

PORT = 18298


class Collector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.spans = 0
        self.exports = 0
        self.refused = 0
        answer = ExportTraceServiceResponse().SerializeToString()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                try:
                    request = ExportTraceServiceRequest.FromString(body)
                except Exception:  # anything unparsable is counted and refused
                    collector.count(refused=1)
                    self.send_response(400)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                spans = sum(len(scope.spans) for rs in request.resource_spans for scope in rs.scope_spans)
                collector.count(spans=spans, exports=1)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
        threading.Thread(target=self._server.serve_forever, name="bench-collector", daemon=True).start()

    def count(self, *, spans: int = 0, exports: int = 0, refused: int = 0) -> None:
        with self._lock:
            self.spans += spans
            self.exports += exports
            self.refused += refused

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{PORT}/v1/traces"

    def env(self) -> dict[str, str]:
        """The setting that makes aql-mcp export its traces here (the sampler stays the default)."""
        return {"AQL_MCP_TRACING__OTLP_ENDPOINT": self.endpoint}


_COLLECTOR: Collector | None = None


def collector() -> Collector:
    """The one collector of this driver process, started on first use."""
    global _COLLECTOR
    if _COLLECTOR is None:
        _COLLECTOR = Collector()
    return _COLLECTOR
