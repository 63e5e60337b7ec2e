"""PostgreSQL through an asyncpg pool: connections, transactions, and errors translated where they enter.

The pool's `reset` does nothing: asyncpg's default sends four statements on every release
(advisory unlock, CLOSE ALL, UNLISTEN, RESET ALL) to undo session state this service never creates:
its advisory locks are transaction-scoped, it LISTENs only on the bus's own connection (outside the
pool), and it sets no session parameters. A statement cache of 0 (`store.statement_cache_size`)
lets the pool work through PgBouncer in transaction mode.

Every transaction starts with `SET LOCAL lock_timeout` (`store.lock_timeout_seconds`), sent with its
`BEGIN` in one round trip: a statement that waits for a lock another client holds (a `LOCK TABLE`, a
long migration, a row another transaction updates) fails after that long with 503 and frees its
connection, so a lock held elsewhere fails the calls that need the locked table and nothing else,
and the pool never fills with connections waiting for it. A session setting would not pass
PgBouncer in transaction mode; `SET LOCAL` lasts exactly as long as the transaction.

The pool's connections are shared fairly between tenants (`store/fair_share.py`): a transaction
names its tenant, and one tenant holds at most its share of the `store.pool_max_size` connections
while others wait, a freed one going to the tenant holding fewest. asyncpg's own queue is first come
first served, so the turn is taken before the pool is asked. The bus's NOTIFY after a commit takes
a connection outside the turns: it holds it for one round trip.

Listings that scan (no declared index answers them) take a second, smaller pool of
`store.scan_concurrency` connections (`scan`), with turns of their own: they can never hold the
connections every other call needs, and at most that many of the database's backends scan for this
replica at once (docs/store.md, "Scan slots"). The pool opens its connections when scans come.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import structlog

from aql_mcp.exceptions import ConfigError, StoreError, UpstreamUnavailable
from aql_mcp.store.fair_share import SHARED, TENANT_SHARE, FairShare, tenant_share
from aql_mcp.store.migration import PluginSchema, SchemaTooNew
from aql_mcp.store.postgres.schema import migrate

T = TypeVar("T")
LISTENER = "aql-mcp-listener"
MAINTENANCE = "aql-mcp-maintenance"
log = structlog.get_logger("aql_mcp.store")
# What asyncpg raises when the server is away or refuses: translated to StoreError (503).
FAILURES: tuple[type[BaseException], ...] = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """The connection settings of `store.*`; `password` never appears in a log or an error."""

    url: str
    password: str | None = None
    listen_url: str = ""
    min_size: int = 2
    max_size: int = 10
    statement_cache_size: int = 100
    connect_timeout: float = 5.0
    command_timeout: float = 30.0
    lock_timeout: float = 2.0
    tenant_share: float = TENANT_SHARE
    scan_size: int = 4
    ssl_mode: str = "prefer"
    ssl_root_cert: Path | None = None

    def ssl(self) -> ssl.SSLContext | str | bool:
        """asyncpg's `ssl` argument: a verifying context for verify-ca/verify-full, else the mode."""
        if self.ssl_mode == "disable":
            return False
        if self.ssl_mode not in ("verify-ca", "verify-full"):
            return self.ssl_mode
        context = ssl.create_default_context(cafile=str(self.ssl_root_cert) if self.ssl_root_cert else None)
        context.check_hostname = self.ssl_mode == "verify-full"
        return context

    def connect_arguments(self, name: str = "aql-mcp") -> dict[str, Any]:
        """asyncpg's connection arguments; `name` is the application_name an operator sees in
        pg_stat_activity (the pool's connections, or the bus listener's)."""
        return {
            "password": self.password,
            "ssl": self.ssl(),
            "timeout": self.connect_timeout,
            "server_settings": {"application_name": name},
        }


class PostgresEngine:
    """The pool of one replica, and the one place asyncpg's errors become `StoreError`."""

    def __init__(self, options: PostgresOptions) -> None:
        self.options = options
        # This replica's name among those sharing the database: its row in `replicas` (the bus's
        # heartbeat), and what a plugin marks the rows it works on with.
        self.replica = secrets.token_hex(6)
        self._pool: asyncpg.Pool | None = None
        self._scan_pool: asyncpg.Pool | None = None
        self._turns = FairShare(options.max_size, tenant_share(options.max_size, options.tenant_share))
        self.scan_turns = FairShare(options.scan_size, tenant_share(options.scan_size, options.tenant_share))

    async def open(self, plugins: Sequence[PluginSchema] = (), *, migrate_schema: bool = True) -> None:
        """Connect and migrate: the core's schema, then the tables `plugins` declared. Without
        `migrate_schema`, connect only: a tool run by a role that may not migrate (`aql-mcp audit`)."""
        options = self.options
        try:
            self._pool = await self._create_pool(min(options.min_size, options.max_size), options.max_size)
            self._scan_pool = await self._create_pool(0, options.scan_size)
            if migrate_schema:
                async with self._pool.acquire() as connection:
                    await migrate(connection, plugins)
                    await _check_collation(connection)
        except FAILURES as exc:
            await self.close()
            raise _translated(exc) from exc
        except SchemaTooNew:
            await self.close()
            raise
        except ValueError:
            # asyncpg's message about a malformed URL may quote it, password included: not repeated.
            await self.close()
            raise ConfigError("store.url (AQL_MCP_STORE__URL): not a valid postgresql:// URL") from None

    async def _create_pool(self, min_size: int, max_size: int) -> asyncpg.Pool:
        options = self.options
        return await asyncpg.create_pool(
            options.url,
            min_size=min_size,
            max_size=max_size,
            statement_cache_size=options.statement_cache_size,
            command_timeout=options.command_timeout,
            reset=_keep,
            **options.connect_arguments(),
        )

    async def close(self) -> None:
        pools, self._pool, self._scan_pool = (self._pool, self._scan_pool), None, None
        for pool in pools:
            if pool is not None:
                await pool.close()

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise UpstreamUnavailable("Service unavailable: the store is not open")
        return self._pool

    async def run(
        self,
        work: Callable[[asyncpg.Connection], Awaitable[T]],
        *,
        lock_timeout: float | None = None,
        tenant: str = SHARED,
    ) -> T:
        """`work` in one transaction on a pooled connection, in `tenant`'s fair turn: committed if it
        returns, rolled back if it raises. A lock is waited for at most `lock_timeout` (default:
        `store.lock_timeout_seconds`). A domain error (`RecordStoreError`) passes unchanged; an
        engine failure is 503."""
        async with self._turns.turn(tenant):
            return await self._transaction(self.pool, work, lock_timeout)

    async def scan(
        self,
        work: Callable[[asyncpg.Connection], Awaitable[T]],
        *,
        tenant: str = SHARED,
        wait: float,
    ) -> T:
        """`work` as `run` does it, on the scan pool in `tenant`'s fair turn among its connections (a
        listing no index answers): the main pool stays free for every other call. A turn not given
        within `wait` seconds raises `TurnTimedOut`, nothing begun."""
        async with self.scan_turns.turn(tenant, wait=wait):
            if self._scan_pool is None:
                raise UpstreamUnavailable("Service unavailable: the store is not open")
            return await self._transaction(self._scan_pool, work, None)

    async def _transaction(
        self, pool: asyncpg.Pool, work: Callable[[asyncpg.Connection], Awaitable[T]], lock_timeout: float | None
    ) -> T:
        begin = _begin(self.options.lock_timeout if lock_timeout is None else lock_timeout)
        try:
            async with pool.acquire() as connection:
                await connection.execute(begin)
                try:
                    result = await work(connection)
                except BaseException:
                    await _roll_back(connection)
                    raise
                await connection.execute("COMMIT")
                return result
        except FAILURES as exc:
            raise _translated(exc) from exc

    async def fetch(self, query: str, *args: Any, tenant: str = SHARED) -> list[Any]:
        return await self.run(lambda connection: connection.fetch(query, *args), tenant=tenant)

    async def fetchrow(self, query: str, *args: Any, tenant: str = SHARED) -> Any:
        return await self.run(lambda connection: connection.fetchrow(query, *args), tenant=tenant)

    async def fetchval(self, query: str, *args: Any, tenant: str = SHARED) -> Any:
        return await self.run(lambda connection: connection.fetchval(query, *args), tenant=tenant)

    async def execute(self, query: str, *args: Any, tenant: str = SHARED) -> str:
        return await self.run(lambda connection: connection.execute(query, *args), tenant=tenant)

    async def connect(self, url: str | None = None) -> asyncpg.Connection:
        """A connection of its own, outside the pool (the bus's listener)."""
        return await asyncpg.connect(url or self.options.url, **self.options.connect_arguments(LISTENER))

    async def maintain(self, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
        """`work` on a connection of its own, outside the pool and any transaction (plugin_tables.py),
        without the pool's command timeout: an index built concurrently takes as long as it takes,
        and the pool's connections all stay with the calls."""
        try:
            connection = await asyncpg.connect(self.options.url, **self.options.connect_arguments(MAINTENANCE))
        except FAILURES as exc:
            raise _translated(exc) from exc
        try:
            return await work(connection)
        except FAILURES as exc:
            raise _translated(exc) from exc
        finally:
            with contextlib.suppress(*FAILURES):
                await connection.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection outside any transaction (NOTIFY after a commit)."""
        try:
            async with self.pool.acquire() as connection:
                yield connection
        except FAILURES as exc:
            raise _translated(exc) from exc


async def _check_collation(connection: asyncpg.Connection) -> None:
    """Case-insensitive matching folds text with ICU's root collation, as Python's `str.lower` does
    (the database's own `lower()` follows its locale, or folds ASCII only under "C")."""
    if await connection.fetchval("SELECT 1 FROM pg_collation WHERE collname = 'und-x-icu'") is None:
        raise ConfigError(
            "store.url (AQL_MCP_STORE__URL): this PostgreSQL has no ICU collation 'und-x-icu' (a build "
            "without ICU); aql-mcp needs it for case-insensitive search. Use a build with ICU "
            "(Debian's, the official images, RDS and Cloud SQL have it)"
        )


def _begin(lock_timeout: float) -> str:
    # Two statements in one simple-query round trip; the value is a number this module formats.
    return f"BEGIN; SET LOCAL lock_timeout = {max(1, math.ceil(lock_timeout * 1000))}"


async def _roll_back(connection: asyncpg.Connection) -> None:
    # The pool's release would roll back too, but warns about it; a broken connection is dropped there.
    if not connection.is_closed() and connection.is_in_transaction():
        with contextlib.suppress(*FAILURES):
            await connection.execute("ROLLBACK")


async def _keep(connection: asyncpg.Connection) -> None:
    """The pool's reset: nothing to undo (module docstring)."""
    return


def _translated(exc: BaseException) -> StoreError:
    # The detail may name a table or a host; it stays in this log line. asyncpg's messages do not
    # carry the password or the URL.
    log.error("store_error", error=type(exc).__name__, detail=str(exc)[:500])
    return StoreError()
