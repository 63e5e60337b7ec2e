"""Store engines for the contract suite: every store test runs once on SQLite and once on PostgreSQL.

`Backend` is one engine's fresh, empty database: a directory for SQLite, a database of its own on
the suite's PostgreSQL server for PostgreSQL. `backend.open()` builds a `Store` on it exactly as
the service does (`open_store(settings)`), so two stores opened on one backend are two replicas.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
from pydantic import SecretStr

from aql_mcp.settings import Settings, StoreSettings
from aql_mcp.store.base import SessionRecord, Store
from aql_mcp.store.factory import SQLITE_FILE, open_store
from tests.support.plugin_store import with_built_ins
from tests.support.postgres import create_database, drop_database

ENGINES = ("sqlite", "postgres")


@dataclass
class Backend:
    engine: str
    path: Path
    url: str = ""
    opened: list[Store] = field(default_factory=list)

    @property
    def settings(self) -> Settings:
        return self.settings_with()

    def settings_with(self, **store: Any) -> Settings:
        return Settings(store=StoreSettings(path=self.path, url=SecretStr(self.url), pool_min_size=1, **store))

    async def open(self, **store: Any) -> Store:
        """A store on this database, as the service builds it with the built-in plugins loaded
        (tests/support/plugin_store.py); `store` overrides `store.*` settings."""
        settings = self.settings_with(**store)
        opened: Store = with_built_ins(open_store(settings), scan_rows=settings.store.listing_scan_rows)
        await opened.open()
        self.opened.append(opened)
        return opened


async def backend_for(engine: str, tmp_path: Path, postgres_server: str | None) -> AsyncIterator[Backend]:
    """One engine's empty database, dropped (with every store opened on it closed) afterwards."""
    if engine == "sqlite":
        backend = Backend(engine, tmp_path / "state")
        yield backend
        await _close(backend)
        return
    assert postgres_server is not None
    name = "t_" + secrets.token_hex(6)
    backend = Backend(engine, tmp_path / "state", await create_database(postgres_server, name))
    try:
        yield backend
    finally:
        await _close(backend)
        await drop_database(postgres_server, name)


@asynccontextmanager
async def write_lock(backend: Backend, table: str) -> AsyncIterator[None]:
    """Another client holds the lock a write to `table` needs, reads still pass: SQLite's write lock
    (`BEGIN IMMEDIATE` from another connection), or PostgreSQL's `LOCK TABLE ... IN EXCLUSIVE MODE`."""
    if backend.engine == "sqlite":
        outsider = sqlite3.connect(backend.path / SQLITE_FILE, isolation_level=None, timeout=0)
        outsider.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            outsider.execute("ROLLBACK")
            outsider.close()
        return
    locker = await asyncpg.connect(backend.url)
    try:
        async with locker.transaction():
            await locker.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
            yield
    finally:
        await locker.close()


async def _close(backend: Backend) -> None:
    for store in backend.opened:
        await store.close()


def race_in_another_process(backend: Backend, prefix: str, count: int, max_open: int, ready: Any, go: Any) -> None:
    """In a child process: open a store on `backend`'s database, say ready, wait for go, then try to
    create `count` sessions at once (the other side of a two-process race)."""

    async def run() -> None:
        store = await backend.open()
        ready.set()
        go.wait()
        await asyncio.gather(*(admit_one(store, f"{prefix}{index}", max_open) for index in range(count)))
        await store.close()

    asyncio.run(run())


async def admit_one(store: Store, session_id: str, max_open: int) -> str:
    session = SessionRecord(id=session_id, owner=session_id, protocol_version="2025-11-25")
    return await store.create_session(session, max_open=max_open, max_per_owner=max_open)
