"""SQLite off the event loop: one writer thread, a pool of reader threads, a connection each.

Every statement runs on a thread, so a slow listing delays only the call that asked for it, never
the loop that serves everyone else. All writes go through the one writer connection, each as an
IMMEDIATE transaction: this process never contends with itself for SQLite's write lock, and a
read-check-write inside `write()` is atomic against every other writer, other processes included
(they wait up to `busy_timeout`). Readers see the last committed state (WAL). A reader whose caller
is cancelled (the tool timeout, a client's cancellation) is interrupted, so its statement stops too.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import structlog

from aql_mcp.exceptions import StoreError, UpstreamUnavailable
from aql_mcp.store.sqlite.dialect import fold, json_equal
from aql_mcp.store.sqlite.schema import migrate

T = TypeVar("T")
log = structlog.get_logger("aql_mcp.store")


class SqliteEngine:
    """Connections to one database file and the threads that use them."""

    def __init__(self, path: Path, *, readers: int = 4, busy_timeout_ms: int = 5000) -> None:
        self.path = path
        self._readers_wanted = readers
        self._busy_timeout_ms = busy_timeout_ms
        self._writer: ThreadPoolExecutor | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._writer_db: sqlite3.Connection | None = None
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._guard = threading.Lock()

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer")
        self._writer_db = await self._on(self._writer, self._connect)
        await self._on(self._writer, lambda: migrate(self._writer_connection()))
        self._readers = ThreadPoolExecutor(
            self._readers_wanted, thread_name_prefix="sqlite-reader", initializer=self._open_reader
        )

    async def close(self) -> None:
        for pool in (self._readers, self._writer):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        self._readers = self._writer = None
        self._writer_db = None
        with self._guard:
            for db in self._connections:
                db.close()
            self._connections.clear()

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` inside one IMMEDIATE transaction on the writer: committed if it returns, rolled
        back if it raises. IMMEDIATE takes the write lock first, so what `work` reads cannot change
        before it commits."""
        if self._writer is None:
            raise UpstreamUnavailable("Service unavailable: the store is not open")

        def run() -> T:
            db = self._writer_connection()
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result

        return await self._on(self._writer, run)

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on a reader connection; interrupted if the caller is cancelled meanwhile."""
        if self._readers is None:
            raise UpstreamUnavailable("Service unavailable: the store is not open")
        running: list[sqlite3.Connection] = []

        def run() -> T:
            db: sqlite3.Connection = self._local.db
            with self._guard:
                running.append(db)
            try:
                return work(db)
            finally:
                with self._guard:
                    running.clear()

        try:
            return await self._on(self._readers, run)
        except asyncio.CancelledError:
            with self._guard:
                for db in running:
                    db.interrupt()
            raise

    async def _on(self, pool: ThreadPoolExecutor, work: Callable[[], T]) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, work)
        except sqlite3.Error as exc:
            # Translated where it enters: the detail (SQL, path) stays in this log line.
            log.error("store_error", error=type(exc).__name__, detail=str(exc))
            raise StoreError() from exc

    def _writer_connection(self) -> sqlite3.Connection:
        if self._writer_db is None:
            raise UpstreamUnavailable("Service unavailable: the store is not open")
        return self._writer_db

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        db.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_ms)}")
        db.create_function("aql_json_equal", 2, json_equal, deterministic=True)
        db.create_function("aql_fold", 1, fold, deterministic=True)
        with self._guard:
            self._connections.append(db)
        return db

    def _open_reader(self) -> None:
        db = self._connect()
        db.execute("PRAGMA query_only=ON")
        self._local.db = db
