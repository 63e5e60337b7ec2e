"""A POST stream followed on a replica other than the one running its request
(endpoint/legacy/transport.py `_hold(follow=...)`; docs/connections.md, "A stream whose replica died").

The follower delivers what the running replica appends, until the response. When that replica is
gone (no heartbeat for `LIVE_SECONDS` by the database's clock, store/postgres/bus.py), no response
will ever come: instead of waiting out the longest a call may run, the follower answers the request
itself with `ReplicaGone` (-32006, `data.reason: "replica_gone"`) as the stream's last event. It is
appended to the store like any event, so a client that resumes the stream elsewhere reads the same
end. The store records which replica writes a stream and which request it answers with the
stream's first event (store/base.py `stream_origin`); with one replica (SQLite) there is none to
lose, and the follower only waits.
"""

from __future__ import annotations

import anyio
import orjson
import structlog

from aql_mcp.endpoint.legacy.events import EventStream
from aql_mcp.exceptions import ReplicaGone, StoreError
from aql_mcp.jsonrpc.messages import encode_error
from aql_mcp.responses import error_object
from aql_mcp.store.base import Store

# How often a follower asks whether the stream's replica is still alive: a few times per heartbeat.
CHECK_SECONDS = 2.0

log = structlog.get_logger("aql_mcp.follower")


async def watch_origin(stream: EventStream, store: Store, request_id: str, *, interval: float = CHECK_SECONDS) -> None:
    """Until the stream ends, check every `interval` whether the replica running its request is
    gone; if it is, end the stream with the request's `ReplicaGone` error. `request_id` is the
    X-Request-Id of the GET that follows (the error's `data.requestId`)."""
    while not stream.done.is_set():
        with anyio.move_on_after(interval):
            await stream.done.wait()
        if stream.done.is_set():
            return
        try:
            origin = await store.stream_origin(stream.session_id, stream.id)
            if origin is None or not await store.bus.gone(origin.replica):
                continue
            answered = orjson.loads(origin.request) if origin.request else None
            _, error = error_object(ReplicaGone(), request_id)
            await stream.emit(encode_error(answered, error), final=True)
        except StoreError:
            continue  # logged by the engine; the next check tries again, the deadline still holds
        log.warning("stream_replica_gone", session_id=stream.session_id[:8], replica=origin.replica)
        return
