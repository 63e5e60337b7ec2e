"""Which replica writes a stream, and whether a replica is gone (store/base.py `stream_origin`,
`Bus.gone`): what a replica following a POST stream needs to end it once the replica running its
request has died (endpoint/legacy/follower.py). Run on every engine; SQLite is one replica."""

from __future__ import annotations

import time

import pytest

from aql_mcp.store.base import StreamOrigin
from tests.support.engines import Backend
from tests.support.store import admit, record

pytestmark = pytest.mark.anyio


async def test_a_stream_names_its_first_writer_and_request_until_it_ends(backend: Backend) -> None:
    running, following = await backend.open(), await backend.open()
    await admit(running, record("s1"))
    await running.append_event("s1", "p1", b"progress", 100.0, request='"call-7"')
    # Another replica appending (a follower answering for a dead one) does not take the stream over.
    await following.append_event("s1", "p1", b"more", 101.0, request="8")

    origin = await following.stream_origin("s1", "p1")
    if backend.engine == "sqlite":
        assert origin is None  # one replica: nobody else can have run the request
        return
    assert origin == StreamOrigin(running.bus.replica, '"call-7"')  # type: ignore[attr-defined]
    assert await following.stream_origin("s1", "unknown") is None
    await running.append_event("s1", "p1", b"response", 102.0, final=True)
    assert await following.stream_origin("s1", "p1") is None


async def test_a_replica_is_gone_without_a_recent_heartbeat(backend: Backend) -> None:
    store = await backend.open()
    await store.bus.heartbeat(time.time())
    if backend.engine == "sqlite":
        assert await store.bus.gone("anyone") is False
        return
    assert await store.bus.gone(store.bus.replica) is False  # type: ignore[attr-defined]
    assert await store.bus.gone("never-started") is True
