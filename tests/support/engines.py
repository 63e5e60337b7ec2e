"""Store engines for the contract suite: every store test runs once on SQLite and once on PostgreSQL.

`Backend` is one engine's fresh, empty database: a directory for SQLite, a database of its own on
the suite's PostgreSQL server for PostgreSQL. `backend.open()` builds a `Store` on it exactly as
the service does (`open_store(settings)`), so two stores opened on one backend are two replicas.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from aql_mcp.settings import Settings, StoreSettings
from aql_mcp.store.base import SessionRecord, Store
from aql_mcp.store.factory import open_store
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
        return Settings(store=StoreSettings(path=self.path, url=SecretStr(self.url), pool_min_size=1))

    async def open(self) -> Store:
        store = open_store(self.settings)
        await store.open()
        self.opened.append(store)
        return store


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
