"""SQLite off the event loop: one writer thread, a pool of reader threads, a connection each.

Every statement runs on a thread, so a slow listing delays only the call that asked for it, never
the loop that serves everyone else. All writes go through the one writer connection, each as an
IMMEDIATE transaction: this process never contends with itself for SQLite's write lock, and a
read-check-write inside `write()` is atomic against every other writer, other processes included.
Readers see the last committed state (WAL). A reader whose caller is cancelled (the tool timeout, a
client's cancellation) is interrupted, so its statement stops too. The readers are shared fairly
between tenants (`store/fair_share.py`): a read names its tenant, and one tenant holds at most its
share of them while others wait. Listings that scan (no declared index answers them) run apart, on
`store.scan_concurrency` scan threads with connections of their own (`scan`), so the reads every
other call makes never wait behind them (docs/store.md, "Scan slots").

When the file cannot be written (docs/store.md, "When the store cannot write"), the failure stays
on the calls that write, each answered `StoreError` (503) with nothing written:
- another process holds the write lock: a write waits at most `lock_timeout` seconds counted from
  the call, its turn on the writer thread included, so the writes queued behind a blocked one fail
  when their own time is up instead of each waiting the whole timeout in turn;
- the disk is full or failing: the next write first checkpoints the write-ahead log and truncates
  it, so the log gives back the space it holds and any space freed on the disk serves at once;
  `journal_size_limit` cuts the log back after every checkpoint, so it does not keep a size it
  reached once;
- the file turned read-only under the service: the writer connection is opened anew before the
  next write, so the service writes again once the file is writable, without a restart.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import structlog

from aql_mcp.exceptions import StoreError, UpstreamUnavailable
from aql_mcp.store.fair_share import SHARED, TENANT_SHARE, FairShare, tenant_share
from aql_mcp.store.migration import PluginSchema
from aql_mcp.store.sqlite.functions import fold, json_equal
from aql_mcp.store.sqlite.schema import migrate

T = TypeVar("T")
log = structlog.get_logger("aql_mcp.store")
# Startup (the migrations) may wait longer for another process's lock than a call does.
OPEN_BUSY_MS = 30_000
WAL_LIMIT_BYTES = 4 * 1024 * 1024
# SQLite's extended result names start with these (SQLITE_IOERR_WRITE, SQLITE_READONLY_DBMOVED...).
SPACE_ERRORS = ("SQLITE_FULL", "SQLITE_IOERR")
READ_ONLY_ERRORS = ("SQLITE_READONLY", "SQLITE_CANTOPEN")


class LockWaitExpired(sqlite3.OperationalError):
    """A write's time ran out before its turn came: it never started, nothing was written."""


class SqliteEngine:
    """Connections to one database file and the threads that use them."""

    def __init__(
        self,
        path: Path,
        *,
        readers: int = 4,
        lock_timeout: float = 2.0,
        wal_limit_bytes: int = WAL_LIMIT_BYTES,
        share: float = TENANT_SHARE,
        scans: int = 4,
    ) -> None:
        self.path = path
        self._readers_wanted = readers
        self._turns = FairShare(readers, tenant_share(readers, share))
        self._scans_wanted = scans
        self.scan_turns = FairShare(scans, tenant_share(scans, share))
        self._lock_timeout = lock_timeout
        self._wal_limit = wal_limit_bytes
        self._writer: ThreadPoolExecutor | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._scanners: ThreadPoolExecutor | None = None
        self._writer_db: sqlite3.Connection | None = None
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        # Only the writer thread reads and sets these two.
        self._wal_to_truncate = False
        self._writer_stale = False

    async def open(self, plugins: Sequence[PluginSchema] = ()) -> None:
        """Connect and migrate: the core's schema, then the tables `plugins` declared."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer")
        self._writer_db = await self._on(self._writer, self._open_writer)
        await self._on(self._writer, lambda: migrate(self._writer_connection(), plugins))
        self._readers = ThreadPoolExecutor(
            self._readers_wanted, thread_name_prefix="sqlite-reader", initializer=self._open_reader
        )
        # Threads start (and open their connection) on first use: a replica that never scans has none.
        self._scanners = ThreadPoolExecutor(
            self._scans_wanted, thread_name_prefix="sqlite-scanner", initializer=self._open_reader
        )

    async def close(self) -> None:
        for pool in (self._scanners, self._readers, self._writer):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        self._scanners = self._readers = self._writer = None
        self._writer_db = None
        with self._guard:
            for db in self._connections:
                db.close()
            self._connections.clear()

    async def write(self, work: Callable[[sqlite3.Connection], T], *, lock_timeout: float | None = None) -> T:
        """`work` inside one IMMEDIATE transaction on the writer: committed if it returns, rolled
        back if it raises. IMMEDIATE takes the write lock first, so what `work` reads cannot change
        before it commits. The lock is waited for until `lock_timeout` (default: the engine's) after
        this call, the wait for the writer thread included."""
        if self._writer is None:
            raise UpstreamUnavailable("Service unavailable: the store is not open")
        deadline = time.monotonic() + (self._lock_timeout if lock_timeout is None else lock_timeout)
        return await self._on(self._writer, lambda: self._transaction(work, deadline))

    async def read(self, work: Callable[[sqlite3.Connection], T], *, tenant: str = SHARED) -> T:
        """`work` on a reader connection, in `tenant`'s fair turn; interrupted if the caller is
        cancelled meanwhile."""
        # As many turns as reader threads: an admitted read never queues in the executor.
        async with self._turns.turn(tenant):
            if self._readers is None:
                raise UpstreamUnavailable("Service unavailable: the store is not open")
            return await self._interruptible(self._readers, work)

    async def scan(self, work: Callable[[sqlite3.Connection], T], *, tenant: str = SHARED, wait: float) -> T:
        """`work` on a scan thread, in `tenant`'s fair turn among the `store.scan_concurrency` scan
        turns (a listing no index answers): the readers stay free for every other call. A turn not
        given within `wait` seconds raises `TurnTimedOut`; interrupted if the caller is cancelled."""
        async with self.scan_turns.turn(tenant, wait=wait):
            if self._scanners is None:
                raise UpstreamUnavailable("Service unavailable: the store is not open")
            return await self._interruptible(self._scanners, work)

    async def maintain(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on a connection of its own, in autocommit, on a thread of its own (plugin_tables.py):
        a long statement there (an index build) leaves the writer thread and the readers free; a write
        that needs the write lock meanwhile waits for it as for another process's."""
        if self._writer is None:
            raise UpstreamUnavailable("Service unavailable: the store is not open")

        def run() -> T:
            db = self._connect()
            db.execute(f"PRAGMA busy_timeout={OPEN_BUSY_MS}")
            try:
                return work(db)
            finally:
                with self._guard:
                    self._connections.remove(db)
                db.close()

        maintenance = ThreadPoolExecutor(1, thread_name_prefix="sqlite-maintenance")
        try:
            return await self._on(maintenance, run)
        finally:
            maintenance.shutdown(wait=False)

    async def _interruptible(self, readers: ThreadPoolExecutor, work: Callable[[sqlite3.Connection], T]) -> T:
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
            return await self._on(readers, run)
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
            log.error("store_error", error=_name(exc), detail=str(exc))
            raise StoreError() from exc

    # On the writer thread ------------------------------------------------------------------

    def _transaction(self, work: Callable[[sqlite3.Connection], T], deadline: float) -> T:
        db = self._prepared_writer(deadline)
        db.execute("BEGIN IMMEDIATE")
        try:
            result = work(db)
            db.execute("COMMIT")
        except BaseException as exc:
            self._roll_back(db)
            self._note_failure(exc)
            raise
        return result

    def _prepared_writer(self, deadline: float) -> sqlite3.Connection:
        """The writer connection, repaired after an earlier failure, set to wait for the lock no
        longer than what is left until `deadline`."""
        if self._writer_stale:
            self._reopen_writer()
        db = self._writer_connection()
        if self._wal_to_truncate:
            self._truncate_wal(db)
        left = deadline - time.monotonic()
        if left <= 0:
            raise LockWaitExpired("the write's lock timeout ran out before its turn")
        db.execute(f"PRAGMA busy_timeout={math.ceil(left * 1000)}")
        return db

    def _roll_back(self, db: sqlite3.Connection) -> None:
        # SQLITE_FULL and SQLITE_IOERR may have rolled the transaction back already.
        if not db.in_transaction:
            return
        try:
            db.execute("ROLLBACK")
        except sqlite3.Error:
            # A connection stuck in a transaction would refuse every later BEGIN: replace it.
            self._writer_stale = True

    def _note_failure(self, exc: BaseException) -> None:
        name = _name(exc)
        if name.startswith(SPACE_ERRORS):
            self._wal_to_truncate = True
        elif name.startswith(READ_ONLY_ERRORS):
            self._writer_stale = True

    def _truncate_wal(self, db: sqlite3.Connection) -> None:
        """Move the log into the database and cut it to zero bytes, giving its space back. Does not
        wait: if a reader still needs the log, the next write tries again."""
        db.execute("PRAGMA busy_timeout=0")
        try:
            busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.Error as exc:
            log.warning("store_checkpoint_failed", error=_name(exc))
            return
        self._wal_to_truncate = bool(busy)

    def _reopen_writer(self) -> None:
        old, self._writer_db = self._writer_db, None
        if old is not None:
            with self._guard:
                self._connections.remove(old)
            old.close()
        self._writer_db = self._open_writer()
        self._writer_stale = False

    def _writer_connection(self) -> sqlite3.Connection:
        if self._writer_db is None:
            raise UpstreamUnavailable("Service unavailable: the store is not open")
        return self._writer_db

    def _open_writer(self) -> sqlite3.Connection:
        db = self._connect()
        db.execute(f"PRAGMA journal_size_limit={int(self._wal_limit)}")
        db.execute(f"PRAGMA busy_timeout={OPEN_BUSY_MS}")
        return db

    # Connections -----------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        _enter_wal(db, OPEN_BUSY_MS / 1000)
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        db.execute(f"PRAGMA busy_timeout={math.ceil(self._lock_timeout * 1000)}")
        db.create_function("aql_json_equal", 2, json_equal, deterministic=True)
        db.create_function("aql_fold", 1, fold, deterministic=True)
        with self._guard:
            self._connections.append(db)
        return db

    def _open_reader(self) -> None:
        db = self._connect()
        db.execute("PRAGMA query_only=ON")
        self._local.db = db


def _enter_wal(db: sqlite3.Connection, seconds: float) -> None:
    """Switch the file to write-ahead logging, waiting for other openers.

    Switching needs the file to itself for a moment, and SQLite answers "database is locked" at once,
    without its busy wait, when another connection is switching too (it would deadlock): replicas
    starting together on a new file, or a rolling update, would fail their start. So the switch is
    tried again until `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if _name(exc) not in ("SQLITE_BUSY", "SQLITE_LOCKED") or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _name(exc: BaseException) -> str:
    """SQLite's extended result name (`SQLITE_FULL`), or the exception's type for any other."""
    return getattr(exc, "sqlite_errorname", None) or type(exc).__name__
