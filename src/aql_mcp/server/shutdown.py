"""Graceful shutdown for Kubernetes: drain, then stop accepting, then let calls finish.

On SIGTERM `/ready` turns 503 at once while the service keeps serving for `shutdown.drain_seconds`,
so the endpoints controller takes the pod out of rotation before connections are refused; every
answer in the drain says `Connection: close` (middleware/drain.py), and an answer already under
way when it starts closes its connection when it ends, so a gateway keeps no idle connection to
the replica. Then, in this order: the replica stops accepting (a gateway's new
connection is refused, which it safely tries on another replica; those already in the accept queue
are taken and served, server/backlog.py), idle connections close (uvicorn closes the others after
their answer, and one accepted that has not yet sent its request is answered first), and only then
do open GET streams end with a `retry` hint and `subscriptions/listen` streams with their response
(the modern era's graceful closure): a client that comes straight back can only reach another
replica, never this one in its last moments, where a GET would stay open unended and a listen be
refused. In-flight calls get `shutdown.grace_seconds` to finish before the process exits 0
(docs/connections.md, "Rolling restarts"). A call waiting for the client's answer to a server
request (elicitation, sampling) is the exception: that answer comes as a new POST, which this
replica no longer accepts, so it would only hold the exit until the grace period ends. It is
answered at once instead, in its SSE stream, with JSON-RPC -32006 and `data.retryAfter`
(`ShuttingDown`), in an event that also carries the `retry` field. A second SIGTERM, or SIGINT
(Ctrl-C at a terminal), skips the drain.

Companion servers (the `metrics.port` and `probes.port` listeners) run on the same loop: they start
after the main server and stop after it, so Prometheus can scrape a replica, and the kubelet probe
it, through its whole drain. Their sockets are bound before the process serves anything
(`main.companion`): a port already taken is a configuration error at start, not a failure once the
service is answering.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

import structlog
import uvicorn

from aql_mcp.endpoint.legacy.transport import StreamableHTTPEndpoint
from aql_mcp.endpoint.modern.listeners import Listeners
from aql_mcp.observability.probes import Probes
from aql_mcp.server.backlog import take_backlog

log = structlog.get_logger("aql_mcp.shutdown")


@dataclass(frozen=True)
class Companion:
    """A server run beside the main one, with its sockets already bound."""

    server: uvicorn.Server
    sockets: list[socket.socket]


class DrainingServer(uvicorn.Server):
    def __init__(
        self,
        config: uvicorn.Config,
        *,
        probes: Probes,
        endpoint: StreamableHTTPEndpoint,
        drain_seconds: float,
        retry_ms: int,
        companions: list[Companion] | None = None,
        listeners: Listeners | None = None,
        on_started: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        # Run once every port is bound: what must not happen for a server that never listened
        # (uvicorn exits from `startup` when the port is taken).
        self._on_started = on_started
        self._listeners = listeners
        self._companions = companions or []
        self._probes = probes
        self._endpoint = endpoint
        self._drain_seconds = drain_seconds
        self._retry_ms = retry_ms
        self._draining = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ending: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets)
        for companion in self._companions:
            # What `uvicorn.Server._serve` does before `startup`, without taking over the signals.
            server = companion.server
            server.config.load()
            server.lifespan = server.config.lifespan_class(server.config)
            await server.startup(companion.sockets)
        if self.started and self._on_started is not None:
            self._on_started()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn's own first steps, taken before the streams end (see the module docstring); it
        # takes them again harmlessly, then waits for the calls in flight.
        queued = take_backlog(sock.fileno() for server in self.servers for sock in server.sockets)
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        await self._serve_queued(queued)
        for connection in list(self.server_state.connections):
            connection.shutdown()
        self._end_streams()
        await super().shutdown(sockets)
        for companion in self._companions:
            if companion.server.started:
                await companion.server.shutdown(companion.sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig != signal.SIGTERM or self._draining or self._loop is None:
            self._stop(sig)
            return
        self._draining = True
        self._probes.draining = True
        self._loop.call_soon_threadsafe(self._close_after_answers)
        log.info("drain_started", seconds=self._drain_seconds)
        timer = threading.Timer(self._drain_seconds, self._stop, args=(sig,))
        timer.daemon = True
        timer.start()

    async def _serve_queued(self, queued: list[socket.socket]) -> None:
        """Connections taken from the accept queue, served as uvicorn serves those it accepted."""
        loop = asyncio.get_running_loop()
        config = self.config

        def protocol() -> asyncio.Protocol:
            # What uvicorn's `Server.startup` gives `create_server`.
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=self.server_state, app_state=self.lifespan.state, _loop=loop
            )

        for connection in queued:
            await loop.connect_accepted_socket(protocol, connection)

    def _close_after_answers(self) -> None:
        """The answers in flight when the drain starts are their connections' last: their heads may
        be sent already, without the drain's `Connection: close`, and a connection a gateway pooled
        after such an answer would still be open, idle, when the port closes."""
        for connection in self.server_state.connections:
            cycle = getattr(connection, "cycle", None)  # the request being answered, on HTTP connections
            if cycle is not None and not cycle.response_complete:
                cycle.keep_alive = False

    def _end_streams(self) -> None:
        # A task, as a stream whose client stopped reading must not hold the shutdown (its write
        # waits until `http.body_timeout_seconds` aborts the connection).
        self._ending = asyncio.get_running_loop().create_task(self._endpoint.end_streams(self._retry_ms))
        if self._listeners is not None:
            # Each `subscriptions/listen` stream ends with its response
            # (endpoint/modern/listen.py, Graceful Closure).
            self._listeners.stop_all()

    def _stop(self, sig: int) -> None:
        # Not `super().handle_exit`: uvicorn would re-raise the signal after its shutdown, and a
        # drained, completed shutdown is a clean exit (0), not death by SIGTERM.
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True
