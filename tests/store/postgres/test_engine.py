"""What only the PostgreSQL engine has: migrations under an advisory lock, pool options, its bus."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import asyncpg
import pytest
import structlog
from pydantic import SecretStr

from aql_mcp.exceptions import ConfigError, StoreError
from aql_mcp.settings import StoreSettings
from aql_mcp.store.base import Signal
from aql_mcp.store.factory import database_password
from aql_mcp.store.migration import SchemaTooNew, compatible_from
from aql_mcp.store.postgres.engine import PostgresOptions
from aql_mcp.store.postgres.schema import MIGRATIONS
from aql_mcp.store.postgres.store import PostgresStore
from tests.support.engines import Backend, backend_for
from tests.support.plugin_store import with_built_ins

pytestmark = pytest.mark.anyio


@pytest.fixture
async def postgres(postgres_server: str, tmp_path: Path) -> AsyncIterator[Backend]:
    async for backend in backend_for("postgres", tmp_path, postgres_server):
        yield backend


async def test_replicas_starting_together_apply_each_migration_once(postgres: Backend) -> None:
    stores = [PostgresStore(PostgresOptions(url=postgres.url, min_size=1)) for _ in range(4)]
    await asyncio.gather(*(store.open() for store in stores))
    try:
        connection = await asyncpg.connect(postgres.url)
        versions = [row[0] for row in await connection.fetch("SELECT version FROM schema_version ORDER BY version")]
        await connection.close()
    finally:
        await asyncio.gather(*(store.close() for store in stores))
    assert versions == list(range(1, len(MIGRATIONS) + 1))


async def add_newer_migration(url: str, *, additive: bool) -> int:
    """What a newer release leaves behind: one more row in schema_version, additive or breaking."""
    store = PostgresStore(PostgresOptions(url=url, min_size=1))
    await store.open()
    await store.close()
    newer = len(MIGRATIONS) + 1
    needs = compatible_from(MIGRATIONS, len(MIGRATIONS)) if additive else newer
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("INSERT INTO schema_version (version, compatible_from) VALUES ($1, $2)", newer, needs)
    finally:
        await connection.close()
    return newer


async def stored_versions(url: str) -> list[tuple[int, int | None]]:
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch("SELECT version, compatible_from FROM schema_version ORDER BY version")
    finally:
        await connection.close()
    return [(row[0], row[1]) for row in rows]


async def test_a_release_runs_on_a_database_a_newer_release_migrated_additively(postgres: Backend) -> None:
    """An old replica in a rolling update, or a `helm rollback`, over an additive migration keeps working."""
    newer = await add_newer_migration(postgres.url, additive=True)
    older = with_built_ins(PostgresStore(PostgresOptions(url=postgres.url, min_size=1)))
    await older.open()
    try:
        await older.records.create_collection("t", "c", "", None, "now")
        assert [c.name for c in (await older.records.list_collections("t", size=10)).items] == ["c"]
    finally:
        await older.close()
    assert [version for version, _ in await stored_versions(postgres.url)] == list(range(1, newer + 1))


async def test_a_database_a_newer_release_migrated_with_a_breaking_change_is_refused_untouched(
    postgres: Backend,
) -> None:
    """A rollback over a breaking migration: the older release must not read and write a schema it does not know."""
    newer = await add_newer_migration(postgres.url, additive=False)
    before = await stored_versions(postgres.url)
    older = PostgresStore(PostgresOptions(url=postgres.url, min_size=1))
    with pytest.raises(SchemaTooNew) as refused:
        await older.open()  # which closes its pool again
    assert (refused.value.found, refused.value.needs, refused.value.known) == (newer, newer, len(MIGRATIONS))
    assert await stored_versions(postgres.url) == before


async def test_every_postgres_migration_so_far_keeps_the_first_release_running(postgres: Backend) -> None:
    """Migration 1 is the base; each later one adds tables, a nullable column or indexes."""
    store = PostgresStore(PostgresOptions(url=postgres.url, min_size=1))
    await store.open()
    await store.close()
    assert await stored_versions(postgres.url) == [(v, 1) for v in range(1, len(MIGRATIONS) + 1)]


async def test_the_statement_cache_can_be_off_for_pgbouncer_transaction_mode(postgres: Backend) -> None:
    store = with_built_ins(PostgresStore(PostgresOptions(url=postgres.url, min_size=1, statement_cache_size=0)))
    await store.open()
    try:
        await store.records.create_collection("t", "c", "", None, "now")
        assert [c.name for c in (await store.records.list_collections("t", size=10)).items] == ["c"]
    finally:
        await store.close()


async def test_an_unreachable_database_is_a_store_error_that_names_no_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "hunter2-not-logged"
    store = PostgresStore(
        PostgresOptions(url=f"postgresql://someone:{secret}@127.0.0.1:9/db", password=secret, connect_timeout=2)
    )
    with structlog.testing.capture_logs() as logs, caplog.at_level(logging.DEBUG), pytest.raises(StoreError) as failed:
        await store.open()
    assert secret not in str(failed.value)
    assert secret not in repr(logs)
    assert secret not in caplog.text


def test_the_password_comes_from_its_setting_or_its_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "password"
    secret_file.write_text("from-a-file\n", encoding="utf-8")
    assert database_password(StoreSettings(password=SecretStr("direct"))) == "direct"
    assert database_password(StoreSettings(password_file=secret_file)) == "from-a-file"
    assert database_password(StoreSettings()) is None
    with pytest.raises(ConfigError) as missing:
        database_password(StoreSettings(password_file=tmp_path / "absent"))
    assert "AQL_MCP_STORE__PASSWORD_FILE" in str(missing.value)


async def test_a_signal_sent_while_the_listener_was_cut_off_arrives_after_it_reconnects(postgres: Backend) -> None:
    """docs/store.md, "The bus": the signals table is the truth; NOTIFY only wakes a replica up."""
    received: list[Signal] = []

    async def collect(signal: Signal) -> None:
        received.append(signal)

    listener = PostgresStore(PostgresOptions(url=postgres.url, min_size=1))
    listener.bus.listen(collect)
    sender = PostgresStore(PostgresOptions(url=postgres.url, min_size=1))
    await listener.open()
    await sender.open()
    try:
        with anyio.fail_after(10):
            await listener.bus.connected.wait()
            await sender.bus.publish(Signal("cancel", "session-1", "1"))
            while not any(s.kind == "cancel" for s in received):  # noqa: ASYNC110 - another connection's doing
                await anyio.sleep(0.02)
            admin = await asyncpg.connect(postgres.url)
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'aql-mcp-listener' AND datname = current_database()"
            )
            await admin.close()
            await sender.bus.publish(Signal("session_ended", "session-1"))
            while not any(s.kind == "session_ended" for s in received):  # noqa: ASYNC110
                await anyio.sleep(0.02)
    finally:
        await sender.close()
        await listener.close()
    assert Signal.RESYNC in received
    assert [s.kind for s in received if s.kind != "resync"] == ["cancel", "session_ended"]


@pytest.mark.parametrize(("mode", "expected"), [("disable", False), ("prefer", "prefer"), ("require", "require")])
def test_tls_modes_pass_to_asyncpg_as_they_are(mode: str, expected: object) -> None:
    assert PostgresOptions(url="postgresql://db", ssl_mode=mode).ssl() == expected


@pytest.mark.parametrize(("mode", "checks_host"), [("verify-ca", False), ("verify-full", True)])
def test_verifying_tls_modes_check_the_certificate_and_for_verify_full_the_host(mode: str, checks_host: bool) -> None:
    context = PostgresOptions(url="postgresql://db", ssl_mode=mode).ssl()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname is checks_host


async def test_a_malformed_url_is_a_configuration_error_that_does_not_repeat_it() -> None:
    store = PostgresStore(PostgresOptions(url="postgresql://someone:hunter2-secret@[bad-host/db"))
    with pytest.raises(ConfigError) as refused:
        await store.open()
    assert "AQL_MCP_STORE__URL" in str(refused.value)
    assert "hunter2" not in str(refused.value)
    assert refused.value.__cause__ is None


async def test_closing_sends_the_last_wake_ups_and_leaves_no_task_behind(postgres: Backend) -> None:
    """A replica shutting down still sends what it published just before, and its loops end at their
    next wait instead of being cancelled mid-query (a cancelled asyncpg query leaks the error of its
    cancel request when the server is going away: MagicStack/asyncpg#1310)."""
    woken = asyncio.Event()

    async def collect(signal: Signal) -> None:
        if signal.kind == "events" and signal.target == "stream-1":
            woken.set()

    def running_for(bus: object) -> list[asyncio.Task[object]]:
        frames = [(task, task.get_coro().cr_frame) for task in asyncio.all_tasks()]  # type: ignore[union-attr]
        return [task for task, frame in frames if frame is not None and frame.f_locals.get("self") is bus]

    listener = PostgresStore(PostgresOptions(url=postgres.url, min_size=1))
    listener.bus.listen(collect)
    sender = PostgresStore(PostgresOptions(url=postgres.url, min_size=1))
    await listener.open()
    await sender.open()
    try:
        with anyio.fail_after(10):
            await listener.bus.connected.wait()
            await sender.bus.connected.wait()
            await sender.bus.publish(Signal("events", "session-1", "stream-1"))
            assert running_for(sender.bus)
            await sender.close()
            assert running_for(sender.bus) == []
            await woken.wait()
    finally:
        await listener.close()


async def test_closing_lets_the_signal_being_handled_finish(postgres: Backend) -> None:
    entered, release, finished = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def slow(signal: Signal) -> None:
        if signal.kind == "cancel":
            entered.set()
            await release.wait()
            finished.set()

    listener = PostgresStore(PostgresOptions(url=postgres.url, min_size=1))
    listener.bus.listen(slow)
    sender = PostgresStore(PostgresOptions(url=postgres.url, min_size=1))
    await listener.open()
    await sender.open()
    try:
        with anyio.fail_after(10):
            await listener.bus.connected.wait()
            await sender.bus.publish(Signal("cancel", "session-1", "1"))
            await entered.wait()
            closing = asyncio.create_task(listener.close())
            # Callbacks run in the order they were scheduled: close() takes its first step (where a
            # cancelling close would cancel the handler) before the handler is let go.
            asyncio.get_running_loop().call_soon(release.set)
            await closing
        assert finished.is_set()
    finally:
        await sender.close()
