"""One HTTP exchange carrying SSE: the POST that answers a request, or a GET stream.

A POST answers with one JSON body unless its handler talks first (progress, a log message, a
request to the client): then the exchange turns into an SSE stream at that moment, and the
response comes as the stream's last event. The JSON path starts no task and writes nothing to
the event log.
"""

from __future__ import annotations

from typing import Any

from starlette.types import Send

from aql_mcp.endpoint.legacy.events import EventStream, new_stream_id
from aql_mcp.endpoint.legacy.session import PendingRequest, Session
from aql_mcp.endpoint.sse import Connection
from aql_mcp.exceptions import CapabilityNotDeclared, InvalidRequest, ShuttingDown, ToolError
from aql_mcp.jsonrpc.messages import RequestId, encode_notification, encode_request, encode_result
from aql_mcp.responses import send_body


class ClientRequestFailed(ToolError):
    """The client answered a server-to-client request (sampling, elicitation) with an error."""


class PostExchange:
    """The `Outbound` of one request: JSON until the handler sends something, then SSE."""

    __slots__ = ("_connections", "_retry_ms", "_send", "connection", "message_id", "session", "stream")

    def __init__(
        self,
        *,
        send: Send,
        session: Session | None,
        message_id: RequestId,
        retry_ms: int | None,
        connections: set[Connection],
    ) -> None:
        self._send = send
        self.session = session
        self.message_id = message_id
        self._retry_ms = retry_ms
        self._connections = connections
        self.stream: EventStream | None = None
        self.connection: Connection | None = None

    @property
    def started(self) -> bool:
        return self.connection is not None

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._emit(encode_notification(method, params))

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Each question as a server-to-client request on this stream, one after the other."""
        return {key: await self.request(asked["method"], asked["params"]) for key, asked in requests.items()}

    def missing_capability(self, capability: str) -> Exception:
        return CapabilityNotDeclared(f"the client did not declare the {capability} capability")

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.session is None:
            raise ToolError("server-to-client requests need a session")
        if self.session.stopping is not None:
            raise ShuttingDown(retry_ms=self.session.stopping.retry_ms)
        request_id = self.session.next_request_id()
        waiter = PendingRequest()
        self.session.pending[request_id] = waiter
        try:
            await self._emit(encode_request(request_id, method, params))
            await waiter.done.wait()
        finally:
            self.session.pending.pop(request_id, None)
        if waiter.stopped is not None:
            raise ShuttingDown(retry_ms=waiter.stopped.retry_ms)
        if waiter.error is not None:
            raise ClientRequestFailed(f"the client refused {method}: {str(waiter.error.get('message', ''))[:200]}")
        return waiter.result or {}

    async def close_connection(self) -> None:
        if self._retry_ms is None:
            return  # a client without priming events could not resume: keep the connection
        stream = await self._open_stream()
        await stream.detach(self.connection, retry_ms=self._retry_ms)

    async def respond(self, result: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
        await self.finish(encode_result(self.message_id, result), headers)

    async def finish(
        self, body: bytes, headers: list[tuple[bytes, bytes]], status: int = 200, *, retry_ms: int | None = None
    ) -> None:
        """Send the response: the JSON body (with `status`), or the stream's last event, which then
        carries the `retry` field when given (a call ended by shutdown, like the GET streams)."""
        if self.stream is None:
            await send_body(self._send, status, body, headers)
            return
        await self.stream.emit(body, final=True, retry_ms=retry_ms)
        self._release()

    async def abandon(self) -> None:
        """The request was cancelled: end its stream with no response (MCP cancellation)."""
        if self.stream is not None:
            await self.stream.abandon()
            self._release()

    async def _emit(self, data: bytes) -> None:
        stream = await self._open_stream()
        await stream.emit(data)

    async def _open_stream(self) -> EventStream:
        if self.stream is not None:
            return self.stream
        if self.session is None:
            raise ToolError("streaming needs a session")
        self.stream = self.session.open_stream("p" + new_stream_id(), request=self.message_id)
        self.connection = Connection(self._send)
        self._connections.add(self.connection)
        await self.connection.start([])
        await self.stream.attach(self.connection, after=None, retry_ms=self._retry_ms)
        return self.stream

    def _release(self) -> None:
        if self.stream is not None and self.session is not None:
            self.session.streams.pop(self.stream.id, None)
        if self.connection is not None:
            self._connections.discard(self.connection)


class NoOutbound:
    """The `Outbound` of a notification: nothing may be sent in answer to it."""

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        raise InvalidRequest()

    async def close_connection(self) -> None:
        return None

    def missing_capability(self, capability: str) -> Exception:
        return InvalidRequest()
