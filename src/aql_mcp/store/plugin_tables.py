"""A plugin's own tables: what a plugin declares, and the store that binds its facet to the engine.

A plugin declares `Tables`: a name (its version counter in `plugin_schema`), its migrations once per
engine, and a factory per engine that builds its facet (the object its handlers call) on the
engine's public surface (`SqliteEngine.read`/`scan`/`write`, `PostgresEngine.run`/`scan`/`fetch`/...). It hands
the declaration to the store before the store opens (`PluginOperations.tables`); the engine applies
the migrations when it opens, in the same transaction and under the same lock as the core's, with
the core's compatibility rule (store/migration.py). docs/store.md, "A plugin's own tables".

A store written before plugins had tables of their own (release 0.2.0: SQLite at core version 13 or
below, PostgreSQL at 8 or below) already holds the built-ins' tables: the engine records the core
version it found (`schema_legacy`), and a plugin seen for the first time on such a store starts at
`adopted(...)`, its migrations whose `legacy_core` that version already applied.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

from aql_mcp.exceptions import ConfigError
from aql_mcp.store.migration import Migration

if TYPE_CHECKING:
    import asyncpg

F = TypeVar("F")
T = TypeVar("T")


class SqliteEngine(Protocol):
    """What a facet may do on the SQLite engine (store/sqlite/engine.py is the one): `read` runs
    `work` on a reader thread in `tenant`'s fair share of them, `write` runs it in one IMMEDIATE
    transaction on the writer thread, committed if it returns (docs/store.md). Declared here, as
    the engine's surface, so that what plugins see does not import the engines."""

    async def read(self, work: Callable[[sqlite3.Connection], T], *, tenant: str = ...) -> T: ...
    async def scan(self, work: Callable[[sqlite3.Connection], T], *, tenant: str = ..., wait: float) -> T:
        """`read` for a query no index answers (a scan), on scan threads of its own, at most
        `store.scan_concurrency` at once: `TurnTimedOut` if none is free within `wait` seconds
        (docs/store.md, "Scan slots")."""
        ...

    async def write(self, work: Callable[[sqlite3.Connection], T], *, lock_timeout: float | None = ...) -> T: ...
    async def maintain(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on a connection of its own, in autocommit, on a thread of its own: neither the
        writer thread nor a reader waits behind it (building an index, docs/store.md)."""
        ...


class PostgresEngine(Protocol):
    """What a facet may do on the PostgreSQL engine (store/postgres/engine.py is the one): `run`
    gives `work` a pooled connection (a transaction is the facet's to open), the others run one
    statement; `replica` names this replica among those sharing the database."""

    @property
    def replica(self) -> str: ...
    async def run(
        self,
        work: Callable[[asyncpg.Connection], Awaitable[T]],
        *,
        lock_timeout: float | None = ...,
        tenant: str = ...,
    ) -> T: ...
    async def scan(self, work: Callable[[asyncpg.Connection], Awaitable[T]], *, tenant: str = ..., wait: float) -> T:
        """`run` for a query no index answers (a scan), on a pool of its own of `store.scan_concurrency`
        connections: `TurnTimedOut` if none is free within `wait` seconds (docs/store.md, "Scan slots")."""
        ...

    async def fetch(self, query: str, *args: Any, tenant: str = ...) -> list[Any]: ...
    async def fetchrow(self, query: str, *args: Any, tenant: str = ...) -> Any: ...
    async def fetchval(self, query: str, *args: Any, tenant: str = ...) -> Any: ...
    async def execute(self, query: str, *args: Any, tenant: str = ...) -> str: ...
    async def maintain(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """`work` on a connection of its own outside the pool and outside any transaction (what
        `CREATE INDEX CONCURRENTLY` needs); the pool's calls go on meanwhile."""
        ...


@dataclass(frozen=True, slots=True, eq=False)
class Tables(Generic[F]):
    """A plugin's tables on both engines and the facet that reads and writes them.

    `name` keys the plugin's version counter (use the plugin's name); `sqlite` and `postgres` are its
    migrations, numbered from 1 per engine like the core's; `on_sqlite` and `on_postgres` build the
    facet on the engine the service runs (import the PostgreSQL one's module inside the function: a
    SQLite deployment never loads asyncpg).
    """

    name: str
    sqlite: Sequence[Migration]
    postgres: Sequence[Migration]
    on_sqlite: Callable[[SqliteEngine], F]
    on_postgres: Callable[[PostgresEngine], F]


class DeclaredTables:
    """The tables plugins declared on one store, each bound once to its engine."""

    def __init__(self, bind: Callable[[Tables[Any]], Any]) -> None:
        self._bind = bind
        self._bound: dict[str, tuple[Tables[Any], Any]] = {}
        self._sealed = False

    def facet(self, tables: Tables[F]) -> F:
        """The facet of `tables` on this store: built on the first call, the same object after
        (a plugin may use the tables another plugin declared, with that plugin's declaration)."""
        found = self._bound.get(tables.name)
        if found is not None:
            if found[0] is not tables:
                raise ConfigError(f"plugin tables {tables.name!r}: declared twice, by two different declarations")
            return cast(F, found[1])
        if self._sealed:
            raise ConfigError(
                f"plugin tables {tables.name!r}: declared after the store opened; declare them when the plugin "
                "registers (PluginOperations.tables)"
            )
        if not tables.name:
            raise ConfigError("plugin tables: the declaration needs a name")
        bound = self._bind(tables)
        self._bound[tables.name] = (tables, bound)
        return cast(F, bound)

    def seal(self) -> list[Tables[Any]]:
        """What the engine migrates as the store opens; nothing may be declared after."""
        self._sealed = True
        return [tables for tables, _ in self._bound.values()]
