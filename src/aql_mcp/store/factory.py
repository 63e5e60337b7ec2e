"""`open_store(settings)`: the engine `store.url` names, built but not yet connected.

The app's lifespan calls `open()` on it (connect, migrate) and `close()` at shutdown. Engines are
imported here only, on demand, so a SQLite deployment never loads asyncpg. `opened_audit(settings)`
is the audit tables alone, for `aql-mcp audit`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from aql_mcp.exceptions import ConfigError
from aql_mcp.settings import Settings, StoreSettings
from aql_mcp.store.audit import AuditStore
from aql_mcp.store.base import Store

if TYPE_CHECKING:
    from aql_mcp.store.postgres.engine import PostgresOptions

SQLITE_FILE = "aql-mcp.sqlite3"


def open_store(settings: Settings) -> Store:
    store = settings.store
    if not store.is_postgres:
        from aql_mcp.store.sqlite.store import SqliteStore

        return SqliteStore(
            store.path / SQLITE_FILE,
            readers=store.sqlite_readers,
            lock_timeout=store.lock_timeout_seconds,
            wal_limit_bytes=store.sqlite_wal_limit_bytes,
            tenant_share=store.tenant_share,
            scans=store.scan_concurrency,
        )
    from aql_mcp.store.postgres.store import PostgresStore

    return PostgresStore(postgres_options(store))


def postgres_options(store: StoreSettings) -> PostgresOptions:
    from aql_mcp.store.postgres.engine import PostgresOptions

    return PostgresOptions(
        url=store.url.get_secret_value(),
        listen_url=store.listen_url.get_secret_value(),
        password=database_password(store),
        min_size=store.pool_min_size,
        max_size=store.pool_max_size,
        statement_cache_size=store.statement_cache_size,
        connect_timeout=store.connect_timeout_seconds,
        command_timeout=store.command_timeout_seconds,
        lock_timeout=store.lock_timeout_seconds,
        tenant_share=store.tenant_share,
        scan_size=store.scan_concurrency,
        ssl_mode=store.ssl_mode,
        ssl_root_cert=store.ssl_root_cert,
    )


@asynccontextmanager
async def opened_audit(settings: Settings) -> AsyncIterator[AuditStore]:
    """The audit tables of the store `settings` name, for `aql-mcp audit` (docs/audit.md). SQLite is
    opened as the service opens it; PostgreSQL is connected without migrating, so a role granted
    only what the command needs on the audit tables runs it (docs/audit.md, "PostgreSQL roles")."""
    if not settings.store.is_postgres:
        store = open_store(settings)
        await store.open()
        try:
            yield store.audit
        finally:
            await store.close()
        return
    from aql_mcp.store.postgres.audit import PostgresAuditStore
    from aql_mcp.store.postgres.engine import PostgresEngine

    engine = PostgresEngine(postgres_options(settings.store))
    await engine.open(migrate_schema=False)
    try:
        yield PostgresAuditStore(engine)
    finally:
        await engine.close()


def database_password(store: StoreSettings) -> str | None:
    """The password from `store.password` or the file `store.password_file` (a mounted Secret)."""
    if store.password is not None:
        return store.password.get_secret_value()
    if store.password_file is None:
        return None
    try:
        return store.password_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(
            f"store.password_file (AQL_MCP_STORE__PASSWORD_FILE): cannot be read ({exc.strerror})"
        ) from None
