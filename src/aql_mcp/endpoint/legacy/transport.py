"""The MCP endpoint: Streamable HTTP, legacy era (MCP 2025-11-25 `basic/transports`).

POST carries one JSON-RPC message; GET opens the session's stream for server-initiated
messages, or resumes any stream with `Last-Event-ID`; DELETE ends the session. Errors raised
before the response starts are answered here with their HTTP status; once a request is being
dispatched, its JSON-RPC errors travel with 200 or in its stream (docs/errors.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import structlog
from starlette.types import Receive, Scope, Send

from aql_mcp.auth.principal import Principal, principal_key
from aql_mcp.endpoint.legacy.cancellation import RunningRequest, answer_cancelled, cancel_notified
from aql_mcp.endpoint.legacy.events import STANDALONE, EventStream, parse_event_id
from aql_mcp.endpoint.legacy.exchange import NoOutbound, PostExchange
from aql_mcp.endpoint.legacy.follower import watch_origin
from aql_mcp.endpoint.legacy.session import Cancellable, Session
from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.endpoint.media import check_accept, check_content_type, read_body
from aql_mcp.endpoint.sse import Connection, format_retry
from aql_mcp.endpoint.statuses import dispatched_status
from aql_mcp.exceptions import (
    AuthError,
    Conflict,
    InvalidRequest,
    MissingSession,
    MissingToken,
    SessionAlreadyInitialized,
    ShuttingDown,
    StreamGone,
    WireError,
)
from aql_mcp.jsonrpc.dispatcher import Dispatcher
from aql_mcp.jsonrpc.messages import (
    Message,
    Request,
    RequestId,
    Response,
    encode_error,
    parse_message,
    peek_id,
)
from aql_mcp.observability.logging import bind_log_context
from aql_mcp.observability.telemetry import Telemetry
from aql_mcp.protocol import lifecycle
from aql_mcp.protocol.context import Context, ResourceHub
from aql_mcp.protocol.versions import Era
from aql_mcp.responses import error_object, header_fields, send_body, send_empty, send_error
from aql_mcp.scope import header, principal_of, request_id_of

SESSION_HEADER = b"mcp-session-id"
LAST_EVENT_HEADER = b"last-event-id"
ALLOW = [(b"allow", b"GET, POST, DELETE")]

log = structlog.get_logger("aql_mcp.transport")


class StreamableHTTPEndpoint:
    """ASGI app for `/mcp`; route middleware in front of it has authenticated the caller."""

    def __init__(
        self,
        *,
        sessions: SessionManager,
        dispatcher: Dispatcher[Context],
        hub: ResourceHub,
        server_name: str,
        instructions: str,
        retry_ms: int,
        log_level: str,
        telemetry: Telemetry,
        anonymous_methods: frozenset[str] = frozenset(),
        follow_seconds: float = 60.0,
        handshake_limits: lifecycle.HandshakeLimits = lifecycle.DEFAULT_HANDSHAKE,
        task_capability: dict[str, Any] | None = None,
    ) -> None:
        self._telemetry = telemetry
        self._sessions = sessions
        self._dispatcher = dispatcher
        self._hub = hub
        self._name = server_name
        self._instructions = instructions
        self._retry_ms = retry_ms
        self._log_level = log_level
        self._anonymous_methods = anonymous_methods
        self._follow_seconds = follow_seconds
        self._handshake_limits = handshake_limits
        self._task_capability = task_capability
        self.connections: set[Connection] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        try:
            if method == "POST":
                await self._post(scope, receive, send)
            elif method == "GET":
                await self._get(scope, receive, send)
            elif method == "DELETE":
                await self._delete(scope, send)
            else:
                await send_empty(send, 405, ALLOW)
        except AuthError:
            raise  # answered by the auth middleware, with its challenge
        except WireError as exc:
            # Raised before the response started; later failures are answered in-band.
            await send_error(send, exc, request_id=request_id_of(scope))

    async def end_streams(self, retry_ms: int) -> None:
        """Shutting down: end every GET stream with a retry hint; POST streams finish their calls,
        except calls waiting for the client's answer, which can no longer arrive: those end now with
        -32006 `ShuttingDown` (`data.retryAfter`) as their stream's last event, with the `retry` field."""
        waiting = self._sessions.interrupt_waits(retry_ms=retry_ms)
        if waiting:
            log.info("client_waits_interrupted", calls=waiting)
        for connection in list(self.connections):
            if connection.standing:
                await connection.write(format_retry(retry_ms, comment="shutting down"))
                await connection.end()

    async def keepalive(self, idle: float) -> None:
        """Write a comment on every SSE connection idle for `idle` seconds (proxies drop silent ones)."""
        for connection in list(self.connections):
            if connection.ended.is_set():
                self.connections.discard(connection)
            else:
                await connection.keepalive(idle)

    # POST ---------------------------------------------------------------------------------

    async def _post(self, scope: Scope, receive: Receive, send: Send) -> None:
        check_content_type(scope)
        check_accept(scope, post=True)
        body = await read_body(receive)
        try:
            message = parse_message(body)
        except WireError as exc:
            await send_error(send, exc, request_id=request_id_of(scope), message_id=peek_id(body))
            return
        try:
            await self._route(scope, send, message)
        except AuthError:
            raise  # answered by the auth middleware, with its challenge
        except WireError as exc:
            # A readable request's rejection carries its id (JSON-RPC 2.0 §5).
            message_id = message.id if isinstance(message, Request) else None
            await send_error(send, exc, request_id=request_id_of(scope), message_id=message_id)

    async def _route(self, scope: Scope, send: Send, message: Message) -> None:
        principal = principal_of(scope)
        if principal is None and getattr(message, "method", None) not in self._anonymous_methods:
            raise MissingToken()
        session_id = header(scope, SESSION_HEADER)
        if isinstance(message, Request) and message.method == "initialize":
            if session_id is not None:
                raise SessionAlreadyInitialized()
            await self._initialize(scope, send, message, principal)
            return
        if session_id is None:
            if isinstance(message, Request) and message.method == "ping":
                await self._run(scope, send, message, None)
                return
            raise MissingSession()
        session = await self._sessions.get(session_id, owner=principal_key(principal))
        await self._deliver(scope, send, message, session)

    async def _deliver(self, scope: Scope, send: Send, message: Message, session: Session) -> None:
        if isinstance(message, Request):
            await self._run(scope, send, message, session)
            return
        if isinstance(message, Response):
            await session.answer(message.id, message.result, message.error)
        elif message.method == "notifications/cancelled":
            await cancel_notified(session, message)
        else:
            ctx = self._context(scope, None, session, NoOutbound())
            # A notification is an MCP request too in the conventions: a span, without a JSON-RPC id.
            with self._telemetry.request(message.method, ctx, message.params):
                await self._dispatcher.notify(message, ctx)
        await send_empty(send, 202)

    async def _initialize(self, scope: Scope, send: Send, message: Request, principal: Principal | None) -> None:
        params = message.params
        try:
            info, caps = lifecycle.client_info(params, self._handshake_limits)
        except WireError as exc:
            _, error = error_object(exc, request_id_of(scope))
            await send_body(send, 200, encode_error(message.id, error))
            return
        version = lifecycle.negotiate(params.get("protocolVersion"))
        session = await self._sessions.create(
            owner=principal_key(principal),
            protocol_version=version,
            client_info=info,
            capabilities=caps,
            log_level=self._log_level,
        )
        result = lifecycle.initialize_result(
            version=version, name=self._name, title=self._name, instructions=self._instructions
        )
        if self._task_capability is not None and "tasks" in caps:
            # MCP 2025-11-25 tasks: declared to a client that declared its own (docs/executions.md).
            result["capabilities"]["tasks"] = self._task_capability
        log.info("session_created", session_id=session.id[:8], protocol_version=version, client=info.get("name"))
        headers = [(SESSION_HEADER, session.id.encode("ascii"))]
        exchange = PostExchange(
            send=send, session=session, message_id=message.id, retry_ms=None, connections=self.connections
        )
        await exchange.respond(result, headers)

    async def _run(self, scope: Scope, send: Send, request: Request, session: Session | None) -> None:
        exchange = PostExchange(
            send=send,
            session=session,
            message_id=request.id,
            retry_ms=self._priming(session),
            connections=self.connections,
        )
        ctx = self._context(scope, request, session, exchange)
        # Typed as anyio cancel scopes in endpoint/legacy/session.py; only `cancel()` is ever called on them.
        in_flight: dict[RequestId, Cancellable] = session.in_flight if session is not None else {}
        bind_log_context(mcp_method=request.method, session_id=session.id[:8] if session else None)
        running = RunningRequest()
        in_flight[request.id] = running
        ctx.cancelled_by_client = lambda: running.cancelled
        try:
            try:
                with self._telemetry.request(request.method, ctx, request.params) as mcp:
                    result = await self._dispatcher.call(request, ctx)
                    mcp.answered(result)
            finally:
                in_flight.pop(request.id, None)
        except asyncio.CancelledError:
            if not running.cancelled:
                raise  # not ours: the server is stopping the task
            running.uncancel()
            await answer_cancelled(exchange, send)
        except Exception as exc:
            wire, error = error_object(exc, ctx.request_id)
            # In-session errors travel with 200, except those whose status is the signal (504, and
            # 429 or 503 with Retry-After) while the status can still be sent (endpoint/statuses.py).
            status = dispatched_status(Era.LEGACY, wire, error["code"])
            headers = header_fields(wire.headers)
            retry_ms = wire.retry_ms if isinstance(wire, ShuttingDown) else None
            await exchange.finish(encode_error(request.id, error), headers, status=status, retry_ms=retry_ms)
        else:
            await exchange.respond(result, [])

    def _priming(self, session: Session | None) -> int | None:
        """The `retry` hint that comes with a priming event, or None where priming is not understood.

        The negotiated version says what the client implementation understands; the header may
        name an older one (the conformance suite sends 2025-03-26 after negotiating 2025-11-25).
        """
        version = session.protocol_version if session else lifecycle.DEFAULT_HEADER_VERSION
        return self._retry_ms if version >= lifecycle.PRIMING_SINCE else None

    def _context(self, scope: Scope, request: Request | None, session: Session | None, outbound: Any) -> Context:
        meta = request.params.get("_meta") if request is not None else None
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        return Context(
            request_id=request_id_of(scope),
            message_id=request.id if request is not None else None,
            peer=session,
            principal=principal_of(scope),
            outbound=outbound,
            hub=self._hub,
            progress_token=token if isinstance(token, str | int) and not isinstance(token, bool) else None,
        )

    # GET ----------------------------------------------------------------------------------

    async def _get(self, scope: Scope, receive: Receive, send: Send) -> None:
        check_accept(scope, post=False)
        session_id = header(scope, SESSION_HEADER)
        if session_id is None:
            raise MissingSession()
        session = await self._sessions.get(session_id, owner=principal_key(principal_of(scope)))
        last_event = header(scope, LAST_EVENT_HEADER)
        resume = parse_event_id(last_event) if last_event else None
        if last_event and resume is None:
            raise InvalidRequest("Invalid request: malformed Last-Event-ID", data={"field": "Last-Event-ID"})
        connection = Connection(send, standing=True)
        if resume is not None:
            stream = await self._resume(session, connection, *resume)
            followed = stream if stream.follows else None
            await self._hold(receive, connection, session, follow=followed, request_id=request_id_of(scope))
            return
        standalone = session.standalone()
        if standalone.sink is not None:
            raise Conflict("Conflict: a GET stream is already open for this session")
        await connection.start([])
        await standalone.attach(connection, after=None, retry_ms=self._priming(session))
        await self._hold(receive, connection, session)

    async def _resume(self, session: Session, connection: Connection, stream_id: str, seq: int) -> EventStream:
        """Replay what the client missed on `stream_id`, then keep it live while it still is, here
        or on the replica answering its request."""
        stream = session.streams.get(stream_id)
        if stream is None and stream_id == STANDALONE:
            stream = session.standalone()
        if stream is None:
            last, ended = await self._sessions.store.stream_position(session.id, stream_id)
            if last == 0 or last < seq or (ended and last == seq) or stream_id.startswith(STANDALONE):
                # Finished, cancelled, or past retention: nothing will ever come on it. 410, not an
                # empty 200, so a client stops polling it (and not 404, which means "session gone").
                raise StreamGone()
            # Its request runs, or ran, on another replica (or before a restart): follow it here.
            stream = session.open_stream(stream_id, follows=True)
        await connection.start([])
        await stream.attach(connection, after=seq, retry_ms=self._priming(session))
        return stream

    async def _hold(
        self,
        receive: Receive,
        connection: Connection,
        session: Session,
        *,
        follow: EventStream | None = None,
        request_id: str = "",
    ) -> None:
        """Keep the GET exchange open until its stream ends it or the client goes away, in the
        request's own task (`Connection.hold`). A followed stream (its request runs on another
        replica) ends with an error once that replica is gone (endpoint/legacy/follower.py), and
        after the longest a call may run in any case."""
        self.connections.add(connection)
        try:
            if follow is None:
                while not connection.ended.is_set() and await connection.hold(receive):
                    pass
                return
            async with anyio.create_task_group() as group:
                group.start_soon(watch_origin, follow, self._sessions.store, request_id)
                with anyio.move_on_after(self._follow_seconds):
                    while not connection.ended.is_set() and await connection.hold(receive):
                        pass
                group.cancel_scope.cancel()
        finally:
            self.connections.discard(connection)
            if follow is not None:
                session.streams.pop(follow.id, None)
            for stream in list(session.streams.values()):
                if stream.sink is connection:
                    with anyio.CancelScope(shield=True):
                        await stream.detach(connection)

    # DELETE -------------------------------------------------------------------------------

    async def _delete(self, scope: Scope, send: Send) -> None:
        session_id = header(scope, SESSION_HEADER)
        if session_id is None:
            raise MissingSession()
        session = await self._sessions.get(session_id, owner=principal_key(principal_of(scope)))
        await self._sessions.delete(session)
        log.info("session_deleted", session_id=session_id[:8])
        await send_empty(send, 204)
