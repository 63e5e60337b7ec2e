"""The follower of a stream whose request runs on another replica (endpoint/legacy/follower.py),
on two stores sharing one database: it ends the stream with the request's `replica_gone` error once
the running replica has left the heartbeat table, and never while that replica lives.
SQLite is one replica: there is no other to lose."""

from __future__ import annotations

import time

import anyio
import orjson
import pytest

from aql_mcp.endpoint.legacy.events import EventStream
from aql_mcp.endpoint.legacy.follower import watch_origin
from aql_mcp.store.base import Store
from tests.support.engines import Backend
from tests.support.store import admit, record

pytestmark = pytest.mark.anyio
CHECK = 0.05


class Held:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    async def write(self, chunk: bytes) -> None:
        self.chunks.append(chunk)

    async def end(self) -> None:
        return None


async def followed(running: Store, following: Store) -> tuple[EventStream, Held]:
    """A POST stream for request 7 written on `running`, followed on `following` from its first event."""
    await running.bus.heartbeat(time.time())
    await admit(running, record("s1"))
    source = EventStream(session_id="s1", stream_id="p1", store=running, request="7")
    await source.emit(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}')
    stream = EventStream(session_id="s1", stream_id="p1", store=following, follows=True)
    held = Held()
    await stream.attach(held, after=1, retry_ms=None)
    return stream, held


async def test_a_stream_whose_replica_left_ends_with_the_requests_error(backend: Backend) -> None:
    if backend.engine != "postgres":
        pytest.skip("one SQLite store is one replica: there is no other to lose")
    running, following = await backend.open(), await backend.open()
    stream, held = await followed(running, following)
    await running.bus.close()  # type: ignore[attr-defined]  # a stopped replica removes its row

    with anyio.fail_after(10):
        await watch_origin(stream, following, "req-1", interval=CHECK)

    assert stream.done.is_set()
    [answer] = [orjson.loads(line[5:]) for chunk in held.chunks for line in chunk.split(b"\n") if line[:5] == b"data:"]
    assert answer["id"] == 7
    assert answer["error"]["code"] == -32006
    assert answer["error"]["data"] == {"reason": "replica_gone", "retryAfter": 1, "requestId": "req-1"}
    assert await following.stream_position("s1", "p1") == (2, True)  # in the store: a resume reads it


async def test_a_stream_whose_replica_lives_is_left_to_it(backend: Backend) -> None:
    running, following = await backend.open(), await backend.open()
    stream, held = await followed(running, following)

    with anyio.move_on_after(CHECK * 10):
        await watch_origin(stream, following, "req-1", interval=CHECK)

    assert not stream.done.is_set()
    assert held.chunks == []
