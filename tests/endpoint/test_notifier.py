"""A change reaches both eras' clients, on this replica and on every other one (endpoint/notifier.py).

Each test runs on both engines; what needs two replicas runs where there can be two (PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio
import orjson
import pytest

from aql_mcp.endpoint.legacy.events import STANDALONE
from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.endpoint.modern.listeners import Listener, Listeners
from aql_mcp.endpoint.modern.subscription import (
    PROMPTS_CHANGED,
    RESOURCE_UPDATED,
    TOOLS_CHANGED,
    Change,
    SubscriptionFilter,
)
from aql_mcp.endpoint.notifier import Notifier
from aql_mcp.store.base import Signal, Store
from aql_mcp.store.factory import open_store
from tests.support.engines import Backend, write_lock

pytestmark = pytest.mark.anyio

URI = "test://watched"
EVERYTHING = SubscriptionFilter(frozenset({TOOLS_CHANGED, PROMPTS_CHANGED}), (URI,))


@dataclass
class Replica:
    store: Store
    sessions: SessionManager
    listeners: Listeners
    notifier: Notifier

    def listener(self) -> Listener:
        held = Listener(owner="alice", subscription_id=1, wanted=EVERYTHING)
        self.listeners.admit(held)
        return held


async def replica(backend: Backend) -> Replica:
    """A replica as app.py assembles one: the notifier hears the bus before the store opens."""
    store = open_store(backend.settings)
    sessions = SessionManager(store, idle_seconds=600, max_open=100, retry_after=1)
    listeners = Listeners(max_open=10, max_per_owner=10)
    notifier = Notifier(sessions=sessions, listeners=listeners, bus=store.bus)
    store.bus.listen(notifier.on_signal)
    await store.open()
    backend.opened.append(store)
    return Replica(store, sessions, listeners, notifier)


async def received(listener: Listener, count: int) -> list[Change]:
    changes: list[Change] = []
    with anyio.fail_after(10):
        while len(changes) < count:
            changes += await listener.next_changes(10)
    return changes


@contextmanager
def only_postgres(backend: Backend) -> Iterator[None]:
    if backend.engine != "postgres":
        pytest.skip("one SQLite store is one replica: there is no other to tell")
    yield


async def test_a_resource_update_reaches_a_listen_stream_and_a_subscribed_session(backend: Backend) -> None:
    here = await replica(backend)
    listening = here.listener()
    session = await here.sessions.create(
        owner="bob", protocol_version="2025-11-25", client_info={}, capabilities={}, log_level="info"
    )
    await session.subscribe(URI)

    await here.notifier.resource_updated(URI)

    assert await received(listening, 1) == [Change(RESOURCE_UPDATED, URI)]
    logged = await here.store.events_after(session.id, STANDALONE, 0)
    assert [orjson.loads(event.data)["params"] for event in logged] == [{"uri": URI}]


async def test_a_list_change_reaches_the_listen_streams_that_want_it(backend: Backend) -> None:
    here = await replica(backend)
    listening = here.listener()

    await here.notifier.list_changed("notifications/resources/list_changed")
    await here.notifier.list_changed(TOOLS_CHANGED)

    assert await received(listening, 1) == [Change(TOOLS_CHANGED)]


async def test_a_change_on_one_replica_reaches_a_listen_stream_held_by_another_once(backend: Backend) -> None:
    with only_postgres(backend):
        first, second = await replica(backend), await replica(backend)
        on_first, on_second = first.listener(), second.listener()
        with anyio.fail_after(10):
            await first.store.bus.connected.wait()  # type: ignore[attr-defined]
            await second.store.bus.connected.wait()  # type: ignore[attr-defined]

        await first.notifier.resource_updated(URI)
        await first.notifier.list_changed(TOOLS_CHANGED)

        expected = [Change(RESOURCE_UPDATED, URI), Change(TOOLS_CHANGED)]
        assert await received(on_second, 2) == expected
        assert await received(on_first, 2) == expected
        # A replica ignores its own signals: after a change from elsewhere, nothing of its own comes back.
        await second.notifier.list_changed(PROMPTS_CHANGED)
        assert await received(on_first, 1) == [Change(PROMPTS_CHANGED)]


async def test_signals_other_than_broadcasts_still_reach_the_sessions(backend: Backend) -> None:
    here = await replica(backend)
    session = await here.sessions.create(
        owner="bob", protocol_version="2025-11-25", client_info={}, capabilities={}, log_level="info"
    )

    await here.notifier.on_signal(Signal("session_ended", session.id))

    assert here.sessions.live_count() == 0


async def test_a_change_the_store_cannot_publish_still_reaches_this_replicas_streams(backend: Backend) -> None:
    """A store that cannot write the signal (its table locked past `store.lock_timeout_seconds`) is
    logged, never raised into the tool that made the change."""
    with only_postgres(backend):
        here = await replica(backend)
        listening = here.listener()

        async with write_lock(backend, "signals"):
            await here.notifier.list_changed(TOOLS_CHANGED)

        assert await received(listening, 1) == [Change(TOOLS_CHANGED)]


class Held:
    """A GET stream's connection as a test holds it: what the stream wrote to it."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.wrote = anyio.Event()

    async def write(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.wrote.set()

    async def end(self) -> None:
        return None

    def methods(self) -> list[str]:
        lines = [line[5:] for chunk in self.chunks for line in chunk.split(b"\n") if line.startswith(b"data:")]
        return [orjson.loads(data)["method"] for data in lines if data.strip()]


async def holding_get_stream(replica: Replica, session_id: str) -> Held:
    """The session's GET stream opened on `replica` (the session loaded there first, as a GET does)."""
    session = await replica.sessions.get(session_id, owner="bob")
    held = Held()
    await session.standalone().attach(held, after=None, retry_ms=None)
    return held


async def heard(held: Held, count: int) -> list[str]:
    with anyio.fail_after(10):
        while len(held.methods()) < count:
            held.wrote = anyio.Event()
            await held.wrote.wait()
    return held.methods()


async def test_a_list_change_reaches_the_sessions_whose_get_stream_is_open_here(backend: Backend) -> None:
    here = await replica(backend)
    listening = await here.sessions.create(
        owner="bob", protocol_version="2025-11-25", client_info={}, capabilities={}, log_level="info"
    )
    quiet = await here.sessions.create(
        owner="bob", protocol_version="2025-11-25", client_info={}, capabilities={}, log_level="info"
    )
    held = await holding_get_stream(here, listening.id)

    await here.notifier.list_changed(TOOLS_CHANGED)

    assert await heard(held, 1) == [TOOLS_CHANGED]
    # A session without an open GET stream is told nothing: no replica writes to its log.
    assert await here.store.events_after(quiet.id, STANDALONE, 0) == []


async def test_a_list_change_on_one_replica_reaches_a_get_stream_held_by_another_once(backend: Backend) -> None:
    """The session is known on both replicas (a POST served on each); its GET stream is open on the
    second. The first, where the change happens, leaves it to the second: one event in the log."""
    with only_postgres(backend):
        first, second = await replica(backend), await replica(backend)
        with anyio.fail_after(10):
            await first.store.bus.connected.wait()  # type: ignore[attr-defined]
            await second.store.bus.connected.wait()  # type: ignore[attr-defined]
        session = await first.sessions.create(
            owner="bob", protocol_version="2025-11-25", client_info={}, capabilities={}, log_level="info"
        )
        held = await holding_get_stream(second, session.id)

        await first.notifier.list_changed(TOOLS_CHANGED)
        assert await heard(held, 1) == [TOOLS_CHANGED]
        await second.notifier.list_changed(PROMPTS_CHANGED)

        assert await heard(held, 2) == [TOOLS_CHANGED, PROMPTS_CHANGED]
        logged = await first.store.events_after(session.id, STANDALONE, 0)
        assert [orjson.loads(event.data)["method"] for event in logged] == [TOOLS_CHANGED, PROMPTS_CHANGED]


async def test_a_resource_update_from_the_bus_is_not_written_again_to_the_sessions(backend: Backend) -> None:
    """Subscribed sessions get a resource update through their event log from the replica where it
    happened; the `broadcast` signal that reaches the other replicas is for their listen streams only."""
    here = await replica(backend)
    session = await here.sessions.create(
        owner="bob", protocol_version="2025-11-25", client_info={}, capabilities={}, log_level="info"
    )
    held = await holding_get_stream(here, session.id)
    listening = here.listener()

    await here.notifier.on_signal(Signal("broadcast", target=RESOURCE_UPDATED, payload=URI.encode()))
    await here.notifier.on_signal(Signal("broadcast", target=TOOLS_CHANGED))

    assert await received(listening, 2) == [Change(RESOURCE_UPDATED, URI), Change(TOOLS_CHANGED)]
    assert await heard(held, 1) == [TOOLS_CHANGED]
