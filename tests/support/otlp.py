"""A real OTLP/HTTP receiver: `POST /v1/traces` and `POST /v1/metrics` from a real uvicorn in a thread.

It stands in for an OpenTelemetry Collector (none is on the package registries): it decodes each
export request's protobuf with the `opentelemetry-proto` package, as a collector does, and keeps
the spans and metric data points it got for the test to read.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

STARTUP_SECONDS = 10.0
PROTOBUF = "application/x-protobuf"


def value_of(value: AnyValue) -> Any:
    """The Python value of an OTLP attribute value (the kinds this service sets)."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def attributes_of(pairs: Any) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


@dataclass
class OtlpReceiver:
    base: str
    spans: list[Span] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    service_names: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/traces", self.receive_traces, methods=["POST"]),
                Route("/v1/metrics", self.receive_metrics, methods=["POST"]),
            ]
        )

    async def _body(self, request: Request) -> bytes:
        body = await request.body()
        return gzip.decompress(body) if request.headers.get("content-encoding") == "gzip" else body

    async def receive_traces(self, request: Request) -> Response:
        export = ExportTraceServiceRequest.FromString(await self._body(request))
        with self._lock:
            for resource in export.resource_spans:
                self.service_names.add(attributes_of(resource.resource.attributes).get("service.name", ""))
                for scope in resource.scope_spans:
                    self.spans.extend(scope.spans)
        return Response(ExportTraceServiceResponse().SerializeToString(), media_type=PROTOBUF)

    async def receive_metrics(self, request: Request) -> Response:
        export = ExportMetricsServiceRequest.FromString(await self._body(request))
        with self._lock:
            for resource in export.resource_metrics:
                for scope in resource.scope_metrics:
                    self.metrics.extend(scope.metrics)
        return Response(ExportMetricsServiceResponse().SerializeToString(), media_type=PROTOBUF)

    def finished_spans(self) -> list[Span]:
        with self._lock:
            return list(self.spans)

    def metric(self, name: str) -> list[Metric]:
        with self._lock:
            return [metric for metric in self.metrics if metric.name == name]


@contextmanager
def running_receiver() -> Iterator[OtlpReceiver]:
    """A receiver on 127.0.0.1 and a port of its own, served by uvicorn in a background thread."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Bound and listening before uvicorn starts: exports queue in the backlog meanwhile.
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    receiver = OtlpReceiver(base=f"http://127.0.0.1:{sock.getsockname()[1]}")
    config = uvicorn.Config(receiver.app(), log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="otlp-uvicorn", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the OTLP receiver did not start")
            thread.join(timeout=0.01)
        yield receiver
    finally:
        server.should_exit = True
        thread.join(timeout=STARTUP_SECONDS)
        sock.close()
