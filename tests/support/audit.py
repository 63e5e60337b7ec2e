"""The audit trail as the tests reach it: entries to write, and SQL run on the store's database
outside the service, with the append-only triggers in force or, for a tampering test, without them."""

from __future__ import annotations

import sqlite3
from typing import Any

import asyncpg

from aql_mcp.audit.record import AuditEntry, timestamp
from aql_mcp.store.factory import SQLITE_FILE
from tests.support.engines import Backend


def entry(n: int = 0, *, kind: str = "mutation", at: float | None = None, **fields: Any) -> AuditEntry:
    values: dict[str, Any] = {
        "recorded_at": timestamp(at),
        "kind": kind,
        "operation": "create_record",
        "outcome": "success",
        "subject": "a" * 16,
        "resource_id": f"r{n}",
        **fields,
    }
    return AuditEntry(**values)


async def run_sql(backend: Backend, sql: str, *, bypass: bool = False) -> list[tuple[Any, ...]]:
    """`sql` on a connection of its own (SQLite: `?`-free literals only). `bypass`: as someone who
    can switch the triggers off (the file's owner dropping them, PostgreSQL's superuser through
    `session_replication_role`), the tampering the hash chain must reveal."""
    if backend.engine == "sqlite":
        return _sqlite(backend, sql, bypass=bypass)
    connection = await asyncpg.connect(backend.url)
    try:
        if bypass:
            await connection.execute("SET session_replication_role = replica")
        return [tuple(row) for row in await connection.fetch(sql)]
    finally:
        await connection.close()


def _sqlite(backend: Backend, sql: str, *, bypass: bool) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(backend.path / SQLITE_FILE, isolation_level=None)
    try:
        triggers = [
            row[0] for row in db.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'audit_%'")
        ]
        if not bypass:
            return db.execute(sql).fetchall()
        db.execute("BEGIN IMMEDIATE")
        names = db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'audit_%'").fetchall()
        for name in names:
            db.execute(f"DROP TRIGGER {name[0]}")
        rows = db.execute(sql).fetchall()
        for definition in triggers:
            db.execute(definition)
        db.execute("COMMIT")
        return rows
    finally:
        db.close()
