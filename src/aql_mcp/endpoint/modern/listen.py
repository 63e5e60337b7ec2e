"""`subscriptions/listen`: the modern era's long-lived notification stream (MCP 2026-07-28
basic/patterns/subscriptions; Streamable HTTP, "Receiving Messages").

The answer is a 200 `text/event-stream` that stays open. Its first event is
`notifications/subscriptions/acknowledged` with the filter the server agreed to honour; then come
only the notification types the client opted in to, each tagged with
`_meta["io.modelcontextprotocol/subscriptionId"]`, the JSON-RPC id of the listen request. A quiet
stream carries an SSE comment once nothing was written for `streams.keepalive_seconds` (the
replica's one ticker looks every half of that: `Listeners.keepalive`). Events have no id: the modern era
has no `Last-Event-ID` resumption; a client that lost its stream listens again.

The stream ends
- when the client closes it (the HTTP cancellation of the request, basic/patterns/cancellation):
  nothing more is written;
- when the server ends it, on shutdown or when the caller's token expires: it first writes the
  `subscriptions/listen` response (`resultType: "complete"`, the subscription id in `_meta`),
  the "Graceful Closure" that tells the client to listen again, elsewhere or with a new token.

Everything that can refuse the request is checked before the stream starts, so a refusal is an
ordinary error answer: the filter (-32602), each URI of `resourceSubscriptions`, which must be a
resource the caller may read (the same check as `resources/read`), `taskIds` without the Tasks
extension declared in the request (-32021, SEP-2663), and the caps (endpoint/modern/listeners.py).

Of the `taskIds`, the stream agrees to the caller's own unexpired tasks (the rest are left out of
the acknowledgement, as another caller's task is not found by `tasks/get`). Right after the
acknowledgement it sends each one's current state, so a change between the task's creation and
the listen is not missed; then a `notifications/tasks` at each status change the replica running
the task reports (endpoint/notifier.py), read from the store when it is written: the same
`DetailedTask` a `tasks/get` would answer then. An id a plugin's task mapper owns (an execution's)
is agreed to, and read, through the mapper's `get` with the listener's principal, as `tasks/get`
reads it (endpoint/modern/task_methods.py).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import structlog
from starlette.types import Receive, Scope, Send

from aql_mcp.auth.principal import Principal
from aql_mcp.endpoint.modern.listeners import Listener, Listeners
from aql_mcp.endpoint.modern.subscription import (
    ACKNOWLEDGED,
    META_SUBSCRIPTION_ID,
    TASK_STATUS,
    Change,
    SubscriptionFilter,
    parse_filter,
)
from aql_mcp.endpoint.modern.task_methods import detailed
from aql_mcp.endpoint.modern.tasks_extension import EXTENSION, owner_of
from aql_mcp.endpoint.sse import KEEPALIVE, Connection, format_event
from aql_mcp.exceptions import InvalidRequest, MissingClientExtension, MissingToken, StoreError
from aql_mcp.jsonrpc.messages import Request, encode_notification, encode_result
from aql_mcp.observability.logging import bind_log_context
from aql_mcp.protocol.context import Context, Peer
from aql_mcp.protocol.policy import ScopeRules
from aql_mcp.protocol.primitives import Registry
from aql_mcp.protocol.resources import readable
from aql_mcp.protocol.task_mapping import ModernTaskMapper
from aql_mcp.protocol.versions import META_CLIENT_CAPABILITIES, META_SERVER_INFO, Era
from aql_mcp.scope import principal_of, request_id_of
from aql_mcp.store.tasks import TaskStore

LISTEN = "subscriptions/listen"

log = structlog.get_logger("aql_mcp.listen")


class ListenEndpoint:
    """Serves `subscriptions/listen` requests the modern edge has validated (`_meta`, headers, version)."""

    def __init__(
        self,
        *,
        listeners: Listeners,
        registry: Registry,
        rules: ScopeRules,
        server_info: dict[str, Any],
        max_uris: int,
        tasks: TaskStore,
        mapper: ModernTaskMapper | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._listeners = listeners
        self._registry = registry
        self._rules = rules
        self._server_info = server_info
        self._max_uris = max_uris
        self._tasks = tasks
        self._mapper = mapper
        self._clock = clock

    async def serve(
        self, scope: Scope, receive: Receive, send: Send, request: Request, peer: Peer | None = None
    ) -> None:
        """Answer `request` with its stream (`peer`: what its `_meta` declares, as the modern edge
        read it). A refusal raises before anything is sent (the modern edge answers it); once the
        stream has started, nothing raises."""
        principal = principal_of(scope)
        if principal is None:
            raise MissingToken()
        wanted = parse_filter(request.params, max_uris=self._max_uris)
        for uri in wanted.uris:
            await readable(self._registry, self._rules, uri, principal)
        reader = _reader(scope, request, principal, peer)
        wanted = await self._own_tasks(wanted, request, reader)
        listener = Listener(owner=principal.digest, subscription_id=request.id, wanted=wanted)
        self._listeners.admit(listener)
        bind_log_context(mcp_method=LISTEN, mcp_era=Era.MODERN.value)
        try:
            await self._stream(receive, Connection(send), listener, _lifetime(principal), reader)
        finally:
            self._listeners.release(listener)

    async def _own_tasks(self, wanted: SubscriptionFilter, request: Request, reader: Context) -> SubscriptionFilter:
        """The `taskIds` the stream agrees to: the caller's unexpired tasks, in the order asked.
        Asking for any needs the extension declared in the request (SEP-2663, -32021 otherwise)."""
        if not wanted.task_ids:
            return wanted
        if not _declares_tasks(request):
            raise MissingClientExtension(EXTENSION)
        found = [task_id for task_id in wanted.task_ids if await self._task(task_id, reader) is not None]
        return replace(wanted, task_ids=tuple(found))

    async def _task(self, task_id: str, reader: Context) -> dict[str, Any] | None:
        """The caller's task as `tasks/get` answers it now (endpoint/modern/task_methods.py), or None:
        no such task of the caller's, or it expired. A mapped id is read through the plugin's mapper."""
        if self._mapper is not None and self._mapper.owns(task_id):
            return await self._mapper.get(task_id, reader)
        record = await self._tasks.get_task(task_id, owner_of(reader), self._clock())
        return detailed(record) if record is not None else None

    async def _stream(
        self, receive: Receive, connection: Connection, listener: Listener, lifetime: float, reader: Context
    ) -> None:
        """The stream, written by the request's own task: no watcher task, no timer but the
        token's expiry (docs/connections.md, "What an open stream costs")."""
        await connection.start([])
        acknowledged = self._event(listener, ACKNOWLEDGED, {"notifications": listener.wanted.to_wire()})
        await self._write(connection, listener, acknowledged)
        for task_id in listener.wanted.task_ids:
            listener.offer(Change(TASK_STATUS, task_id, listener.owner))
        log.info("listen_opened", principal=listener.owner, uris=len(listener.wanted.uris))
        listener.waking(connection.wake)
        expiry = asyncio.get_running_loop().call_later(lifetime, listener.stop) if math.isfinite(lifetime) else None
        try:
            stopped = await self._pump(receive, connection, listener, reader)
        finally:
            listener.waking(None)
            if expiry is not None:
                expiry.cancel()
        if stopped:
            # The server ends the subscription (shutdown, token expiry).
            await connection.write(format_event(None, self._closing(listener)))
            await connection.end()
        log.info("listen_closed", principal=listener.owner, ended_by="server" if stopped else "client")

    async def _pump(self, receive: Receive, connection: Connection, listener: Listener, reader: Context) -> bool:
        """Write what the listener is offered, and a comment when the replica's ticker finds the
        stream quiet, until the server stops it (True) or the client goes away (False)."""
        while True:
            for change in listener.take():
                event = await self._notification(listener, change, reader)
                if event:
                    await self._write(connection, listener, event)
            if listener.stopped:
                return True
            if listener.due:
                listener.due = False
                await self._write(connection, listener, KEEPALIVE)
            if not listener.ready and not await connection.hold(receive):
                return False

    async def _write(self, connection: Connection, listener: Listener, chunk: bytes) -> None:
        await connection.write(chunk)
        listener.last_write = connection.last_write

    async def _notification(self, listener: Listener, change: Change, reader: Context) -> bytes:
        if change.method != TASK_STATUS:
            return self._event(listener, change.method, change.params())
        # The task as `tasks/get` answers it now; nothing once it expired (or the store failed:
        # the client may still poll).
        try:
            task = await self._task(change.uri, reader)
        except StoreError:
            return b""
        return self._event(listener, TASK_STATUS, task) if task is not None else b""

    def _event(self, listener: Listener, method: str, params: dict[str, Any]) -> bytes:
        tagged = {"_meta": {META_SUBSCRIPTION_ID: listener.subscription_id}, **params}
        return format_event(None, encode_notification(method, tagged))

    def _closing(self, listener: Listener) -> bytes:
        """The listen response: the subscription ended gracefully (subscriptions, "Graceful Closure")."""
        meta = {META_SUBSCRIPTION_ID: listener.subscription_id, META_SERVER_INFO: self._server_info}
        return encode_result(listener.subscription_id, {"resultType": "complete", "_meta": meta})


class _ReadOnly:
    """The `Outbound` and hub of the context a listen stream reads tasks with: nothing is asked,
    told or changed on the way."""

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        raise InvalidRequest()

    async def close_connection(self) -> None:
        return None

    def missing_capability(self, capability: str) -> Exception:
        return InvalidRequest()

    async def resource_updated(self, uri: str) -> None:
        return None


def _reader(scope: Scope, request: Request, principal: Principal, peer: Peer | None) -> Context:
    """The context the stream reads its tasks with: the listen request's caller and what it
    declares, as a `tasks/get` of theirs would be read."""
    quiet = _ReadOnly()
    return Context(
        request_id=request_id_of(scope),
        message_id=request.id,
        peer=peer,
        principal=principal,
        outbound=quiet,
        hub=quiet,
    )


def _declares_tasks(request: Request) -> bool:
    meta = request.params.get("_meta")
    capabilities = meta.get(META_CLIENT_CAPABILITIES) if isinstance(meta, Mapping) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def _lifetime(principal: Principal) -> float:
    """How long the stream may stay open: until the token that opened it expires."""
    if principal.expires_at is None:
        return math.inf
    return max(0.0, principal.expires_at - time.time())
