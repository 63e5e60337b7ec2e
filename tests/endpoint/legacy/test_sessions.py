import pytest

from aql_mcp.endpoint.legacy.events import STANDALONE
from aql_mcp.endpoint.legacy.session import Session
from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.exceptions import UPSTREAM_UNAVAILABLE, SessionLimitReached, SessionNotFound
from aql_mcp.plugin_host.hooks import PluginHooks
from aql_mcp.plugin_host.loader import load_plugins
from aql_mcp.plugins.executions.store import ExecutionRecord
from aql_mcp.protocol.primitives import Registry
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from tests.support.clock import Clock
from tests.support.engines import Backend, write_lock

pytestmark = pytest.mark.anyio

IDLE = 100  # touch interval: min(60, IDLE / 4) = 25 seconds
TOUCH_INTERVAL = 25
START = 1_000_000.0


class RecordingSink:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.ended = False

    async def write(self, chunk: bytes) -> None:
        self.chunks.append(chunk)

    async def end(self) -> None:
        self.ended = True


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


def make_manager(store: Store, clock: Clock, *, max_open: int = 10, retry_after: int = 30) -> SessionManager:
    return SessionManager(store, idle_seconds=IDLE, max_open=max_open, retry_after=retry_after, clock=clock)


@pytest.fixture
def manager(store: Store, clock: Clock) -> SessionManager:
    return make_manager(store, clock)


async def create(manager: SessionManager, owner: str = "owner-a") -> Session:
    return await manager.create(
        owner=owner,
        protocol_version="2025-11-25",
        client_info={"name": "client", "version": "1"},
        capabilities={"sampling": {}},
        log_level="info",
    )


async def stored_last_seen(store: Store, session_id: str) -> float:
    record = await store.get_session(session_id)
    assert record is not None
    return record.last_seen


async def test_created_session_is_found_by_its_owner(manager: SessionManager, store: Store) -> None:
    session = await create(manager)
    found = await manager.get(session.id, owner="owner-a")
    assert found.id == session.id
    assert found.protocol_version == "2025-11-25"
    assert found.client_capabilities == {"sampling": {}}
    assert await store.get_session(session.id) is not None


async def test_session_ids_are_long_visible_ascii_and_unique(manager: SessionManager) -> None:
    ids = {(await create(manager)).id for _ in range(3)}
    assert len(ids) == 3
    for session_id in ids:
        assert len(session_id) >= 32
        assert all(0x21 <= ord(char) <= 0x7E for char in session_id)


async def test_unknown_session_is_not_found(manager: SessionManager) -> None:
    with pytest.raises(SessionNotFound):
        await manager.get("no-such-session", owner="owner-a")


async def test_another_owners_session_is_not_found(manager: SessionManager) -> None:
    session = await create(manager)
    with pytest.raises(SessionNotFound):
        await manager.get(session.id, owner="owner-b")
    assert (await manager.get(session.id, owner="owner-a")).id == session.id


async def test_idle_session_expires_and_its_row_is_gone(manager: SessionManager, store: Store, clock: Clock) -> None:
    session = await create(manager)
    clock.advance(IDLE + 1)
    with pytest.raises(SessionNotFound):
        await manager.get(session.id, owner="owner-a")
    assert await store.get_session(session.id) is None
    with pytest.raises(SessionNotFound):
        await manager.get(session.id, owner="owner-a")


async def test_used_session_does_not_expire(manager: SessionManager, clock: Clock) -> None:
    session = await create(manager)
    for _ in range(5):
        clock.advance(IDLE - 1)
        assert (await manager.get(session.id, owner="owner-a")).id == session.id


async def test_session_cap_raises_limit_reached_with_retry_after(store: Store, clock: Clock) -> None:
    manager = make_manager(store, clock, max_open=1, retry_after=17)
    await create(manager)
    with pytest.raises(SessionLimitReached) as caught:
        await create(manager, owner="owner-b")
    assert caught.value.status == 503
    assert caught.value.code == UPSTREAM_UNAVAILABLE
    assert caught.value.headers["retry-after"] == "17"
    assert caught.value.data["retryAfter"] == 17
    assert await store.count_sessions() == 1


async def test_deleting_a_session_frees_a_place_under_the_cap(store: Store, clock: Clock) -> None:
    manager = make_manager(store, clock, max_open=1)
    await manager.delete(await create(manager))
    assert (await create(manager)).id


async def test_last_seen_is_written_at_most_once_per_touch_interval(
    manager: SessionManager, store: Store, clock: Clock
) -> None:
    session = await create(manager)
    clock.advance(TOUCH_INTERVAL - 5)
    await manager.get(session.id, owner="owner-a")
    assert await stored_last_seen(store, session.id) == START
    clock.advance(10)
    await manager.get(session.id, owner="owner-a")
    written = clock.now
    assert await stored_last_seen(store, session.id) == written
    clock.advance(TOUCH_INTERVAL - 5)
    await manager.get(session.id, owner="owner-a")
    assert await stored_last_seen(store, session.id) == written


async def test_a_due_touch_the_store_cannot_take_does_not_fail_the_request(backend: Backend, clock: Clock) -> None:
    """Issue 12: a lock held elsewhere fails the calls that must write, not a ping or a read that
    was due for a last-seen touch; the sweep writes the held-back last use once the store can."""
    store = await backend.open(lock_timeout_seconds=0.2)
    manager = make_manager(store, clock)
    session = await create(manager)
    clock.advance(TOUCH_INTERVAL + 1)
    async with write_lock(backend, "sessions"):
        assert (await manager.get(session.id, owner="owner-a")).id == session.id
    assert await stored_last_seen(store, session.id) == START
    seen = clock.now
    await manager.sweep()
    assert await stored_last_seen(store, session.id) == seen


async def test_sweep_expires_idle_sessions_and_keeps_active_ones(
    manager: SessionManager, store: Store, clock: Clock
) -> None:
    idle = await create(manager)
    active = await create(manager)
    await idle.standalone().emit(b'{"jsonrpc":"2.0","method":"x"}')
    clock.advance(IDLE - 10)
    await manager.get(active.id, owner="owner-a")
    clock.advance(20)
    await manager.sweep()
    assert await store.get_session(idle.id) is None
    assert await store.events_after(idle.id, STANDALONE, 0) == []
    assert await store.get_session(active.id) is not None
    assert idle not in list(manager)
    with pytest.raises(SessionNotFound):
        await manager.get(idle.id, owner="owner-a")


async def test_sweep_writes_the_last_seen_it_held_back(manager: SessionManager, store: Store, clock: Clock) -> None:
    session = await create(manager)
    clock.advance(TOUCH_INTERVAL - 5)
    await manager.get(session.id, owner="owner-a")
    seen = clock.now
    await manager.sweep()
    assert await stored_last_seen(store, session.id) == seen


async def test_sweep_expires_idle_sessions_known_only_to_the_store(store: Store, clock: Clock) -> None:
    session = await create(make_manager(store, clock))
    clock.advance(IDLE + 1)
    assert await make_manager(store, clock).sweep() == 1
    assert await store.get_session(session.id) is None


async def test_session_survives_a_restart(store: Store, clock: Clock) -> None:
    session = await create(make_manager(store, clock))
    await session.set_log_level("debug")
    clock.advance(IDLE - 1)
    restarted = make_manager(store, clock)
    found = await restarted.get(session.id, owner="owner-a")
    assert found.id == session.id
    assert found.log_level == "debug"
    assert found.client_capabilities == {"sampling": {}}
    with pytest.raises(SessionNotFound):
        await restarted.get(session.id, owner="owner-b")


async def test_delete_closes_the_session_streams_and_removes_the_row(manager: SessionManager, store: Store) -> None:
    session = await create(manager)
    stream = session.open_stream("s1")
    sink = RecordingSink()
    await stream.attach(sink, after=None, retry_ms=None)
    await stream.emit(b'{"jsonrpc":"2.0","method":"x"}')
    await manager.delete(session)
    assert stream.done.is_set()
    assert sink.ended
    assert await store.get_session(session.id) is None
    assert await store.events_after(session.id, "s1", 0) == []
    with pytest.raises(SessionNotFound):
        await manager.get(session.id, owner="owner-a")


async def test_close_all_ends_every_stream_but_keeps_the_rows(manager: SessionManager, store: Store) -> None:
    session = await create(manager)
    stream = session.open_stream("s1")
    await manager.close_all()
    assert stream.done.is_set()
    assert list(manager) == []
    assert await store.get_session(session.id) is not None


async def test_graceful_restart_keeps_the_last_use_of_a_session(store: Store, clock: Clock) -> None:
    before = make_manager(store, clock)
    session = await create(before)
    clock.advance(TOUCH_INTERVAL - 5)
    await before.get(session.id, owner="owner-a")
    await before.close_all()
    clock.advance(IDLE - 5)
    assert (await make_manager(store, clock).get(session.id, owner="owner-a")).id == session.id


async def test_a_session_busy_on_another_replica_is_not_expired_by_one_that_has_not_seen_it(
    backend: Backend, clock: Clock
) -> None:
    """docs/store.md: a session expires when the store's last use, the latest any replica wrote,
    is older than the idle limit, not when one replica has not seen it for that long."""
    first, second = make_manager(await backend.open(), clock), make_manager(await backend.open(), clock)
    session = await create(first)
    for _ in range(4):
        clock.advance(IDLE / 2)
        await second.get(session.id, owner="owner-a")
        await second.sweep()
        assert await first.sweep() == 0
    assert (await first.get(session.id, owner="owner-a")).id == session.id
    clock.advance(IDLE + 1)
    assert await first.sweep() == 1
    with pytest.raises(SessionNotFound):
        await second.get(session.id, owner="owner-a")


async def test_a_session_that_expires_or_is_deleted_cancels_its_live_executions(
    manager: SessionManager, store: Store, clock: Clock
) -> None:
    """MCP-AQL §2.3.3: in-progress executions are session-scoped state (docs/executions.md)."""
    # The executions plugin hears of the ends through its hook, as the service wires it (app.py).
    loaded = load_plugins(["aql_mcp.plugins.executions:plugin"], Registry(), Settings(), store)
    manager = SessionManager(
        store, idle_seconds=IDLE, max_open=10, retry_after=30, clock=clock, on_end=PluginHooks(loaded).session_end
    )
    idle, deleted = await create(manager), await create(manager)
    now = clock()
    for execution_id, session in (("e-idle", idle), ("e-deleted", deleted)):
        record = ExecutionRecord(execution_id, "owner-a", "import", "pending", now, now, session_id=session.id)
        assert await store.executions.create(record, None, max_live_per_owner=10)
    await manager.delete(deleted)
    clock.advance(IDLE + 1)
    assert await manager.sweep() == 1
    for execution_id in ("e-idle", "e-deleted"):
        found = await store.executions.load(execution_id)
        assert found is not None
        assert found.status == "cancelled"
