"""A store as release 0.2.0 (and main up to the hand-off of the plugins' tables) left it, on either
engine: built from the frozen DDL in tests/support/schema_0_2.py, never from today's migrations,
with one row in every table it has. The upgrade tests open it with today's code."""

from __future__ import annotations

import sqlite3
from typing import Any

import asyncpg
import orjson

from aql_mcp.store.factory import SQLITE_FILE
from tests.support.engines import Backend
from tests.support.schema_0_2 import POSTGRES, SQLITE

NOW = 100.0
LATER = 9e9
WHEN = "2026-01-01T00:00:00Z"
RESPONSE = {"collection": "c", "id": "a", "data": {"n": 1}, "etag": "e", "created_at": WHEN, "updated_at": WHEN}


def _json(value: Any) -> bytes:
    return orjson.dumps(value)


# One row per table, by column name, in values both engines take (BLOB/BYTEA as bytes).
ROWS: dict[str, dict[str, Any]] = {
    "sessions": {
        "id": "s1",
        "owner": "alice",
        "protocol_version": "2025-11-25",
        "client_info": _json({"name": "client", "version": "1"}),
        "client_capabilities": _json({}),
        "log_level": "info",
        "created_at": NOW,
        "last_seen": NOW,
    },
    "events": {"session_id": "s1", "stream_id": "g", "seq": 5, "data": b"x", "created_at": NOW},
    "streams": {"session_id": "s1", "stream_id": "g", "last_seq": 5, "ended": False},
    "subscriptions": {"uri": "file:///a", "session_id": "s1"},
    "confirmations": {
        "token_hash": "h1",
        "operation": "create_record",
        "params_hash": "ph",
        "principal": "alice",
        "session": "s1",
        "expires_at": LATER,
        "consumed_at": None,
    },
    "replicas": {"id": "r1", "seen_at": NOW},
    "signals": {
        "id": 1,
        "origin": "r1",
        "kind": "events",
        "session_id": "s1",
        "target": "g",
        "payload": b"",
        "created_at": NOW,
    },
    "tasks": {
        "id": "t1",
        "owner": "alice",
        "tool": "echo",
        "status": "working",
        "created_at": NOW,
        "updated_at": NOW,
        "expires_at": LATER,
        "ttl_ms": 60_000,
        "poll_ms": 1_000,
        "status_message": None,
        "input_requests": _json({}),
        "answers": _json({}),
        "result": None,
        "error": None,
    },
    "record_collections": {
        "tenant": "t",
        "name": "c",
        "description": "notes",
        "fields": None,
        "created_at": WHEN,
        "next_pos": 2,
        "record_count": 1,
    },
    "records": {
        "seq": 7,
        "tenant": "t",
        "collection": "c",
        "id": "a",
        "data": {"n": 1},
        "size": 8,
        "etag": "e",
        "created_at": WHEN,
        "updated_at": WHEN,
        "pos": 2,
    },
    "record_usage": {"tenant": "t", "records": 1, "bytes": 8},
    "record_idempotency": {
        "tenant": "t",
        "key": "k",
        "request_hash": "rh",
        "response": _json(RESPONSE),
        "created_at": WHEN,
    },
    "executions": {
        "id": "e1",
        "owner": "t",
        "kind": "export",
        "status": "completed",
        "session_id": "s1",
        "params": _json({"collection": "c"}),
        "progress_current": 1,
        "progress_total": 1,
        "progress_message": None,
        "report": _json([]),
        "rejected": 0,
        "error": None,
        "result": _json({"parts": 1}),
        "replica": "old",
        "created_at": NOW,
        "updated_at": NOW,
        "started_at": NOW,
        "finished_at": NOW,
        "attempts": 1,
        "payload": None,
        "output": None,
        "principal": "alice",
    },
    "execution_parts": {"execution_id": "e1", "part": 0, "data": b'{"n": 1}\n'},
    "safety_runs": {
        "id": "run1",
        "agent": "builder",
        "principal": "alice",
        "session": "s1",
        "status": "active",
        "steps": 1,
        "started_at": NOW,
        "updated_at": NOW,
        "ended_at": None,
        "last_action": "read_file",
        "reason": None,
        "settings": _json({"maxAutonomousSteps": 5}),
    },
    "safety_challenges": {
        "id": "ch1",
        "agent": "builder",
        "run_id": "run1",
        "principal": "alice",
        "tier": "hard",
        "action": "deploy",
        "reason": "danger",
        "code": "123456",
        "status": "pending",
        "created_at": NOW,
        "expires_at": LATER,
        "decided_at": None,
        "decided_by": None,
    },
    "safety_blocks": {
        "principal": "alice",
        "agent": "builder",
        "challenge_id": "ch1",
        "reason": "danger",
        "created_at": NOW,
    },
    "safety_approvals": {
        "id": "ap1",
        "agent": "builder",
        "run_id": "run1",
        "principal": "alice",
        "kind": "confirmation",
        "action": "deploy",
        "reason": "asks",
        "status": "pending",
        "created_at": NOW,
        "decided_at": None,
        "decided_by": None,
        "token_hash": "th",
        "used_at": None,
    },
    "safety_notices": {
        "id": 1,
        "agent": "alice",
        "type": "permission_pending",
        "message": "waiting",
        "metadata": _json({"approval_id": "ap1"}),
        "created_at": NOW,
        "cleared_at": None,
        "ref": "ap1",
    },
    "safety_failures": {"principal": "alice", "at": NOW},
    "safety_events": {"id": 1, "at": NOW, "agent": "builder", "kind": "run_started", "actor": "alice", "detail": b"{}"},
    "revoked_tokens": {"token_hash": "rt", "expires_at": LATER},
    "principals": {"principal": "alice", "subject": "alice@example.com", "tenant": "t", "seen_at": NOW},
}


def build_sqlite(backend: Backend, steps: int) -> None:
    """The file as that release's `migrate` left it after `steps` migrations, with one row in every table."""
    backend.path.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(backend.path / SQLITE_FILE, isolation_level=None)
    try:
        db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        db.execute("ALTER TABLE schema_version ADD COLUMN compatible_from INTEGER")
        for version, (script, needs) in enumerate(SQLITE[:steps], start=1):
            for statement in (s for s in script.split(";") if s.strip()):
                db.execute(statement)
            db.execute("INSERT INTO schema_version VALUES (?, ?)", (version, needs))
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table, row in ROWS.items():
            if table not in tables:
                continue
            columns = [c[1] for c in db.execute(f"PRAGMA table_info({table})")]
            values = [_sqlite_value(row[column]) for column in columns]
            db.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", values)  # noqa: S608
    finally:
        db.close()


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, dict):
        return _json(value)
    if isinstance(value, bool):
        return int(value)
    return value


async def build_postgres(backend: Backend, steps: int) -> None:
    """The database as that release's `migrate` left it after `steps` migrations, with one row in every table."""
    db = await asyncpg.connect(backend.url)
    try:
        await db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        await db.execute("ALTER TABLE schema_version ADD COLUMN compatible_from INTEGER")
        for version, (script, needs) in enumerate(POSTGRES[:steps], start=1):
            await db.execute(script)
            await db.execute("INSERT INTO schema_version VALUES ($1, $2)", version, needs)
        for table, row in ROWS.items():
            columns = [
                r["column_name"]
                for r in await db.fetch(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' "
                    "AND table_name = $1 ORDER BY ordinal_position",
                    table,
                )
            ]
            if not columns:
                continue
            values = [orjson.dumps(row[c]).decode() if isinstance(row[c], dict) else row[c] for c in columns]
            marks = ", ".join(f"${n}" for n in range(1, len(columns) + 1))
            await db.execute(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", *values)  # noqa: S608
    finally:
        await db.close()


def sqlite_dump(backend: Backend) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table but the schema's bookkeeping, by table."""
    db = sqlite3.connect(backend.path / SQLITE_FILE)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: sorted(db.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables if t not in BOOKS}  # noqa: S608
    finally:
        db.close()


async def postgres_dump(backend: Backend) -> dict[str, list[tuple[Any, ...]]]:
    db = await asyncpg.connect(backend.url)
    try:
        tables = [r[0] for r in await db.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        return {
            t: sorted((tuple(r) for r in await db.fetch(f"SELECT * FROM {t}")), key=repr)  # noqa: S608
            for t in tables
            if t not in BOOKS
        }
    finally:
        await db.close()


# The schema's own bookkeeping, which an upgrade writes to; and the sequence table SQLite keeps.
BOOKS = {"schema_version", "plugin_schema", "schema_legacy", "sqlite_sequence"}


def sqlite_schema(backend: Backend) -> list[tuple[Any, ...]]:
    """Tables, columns and indexes, as SQLite keeps their definitions."""
    db = sqlite3.connect(backend.path / SQLITE_FILE)
    try:
        return db.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
        ).fetchall()
    finally:
        db.close()


async def postgres_schema(backend: Backend) -> list[tuple[Any, ...]]:
    """Columns (type, nullability, default, collation), indexes and constraints of the public schema."""
    db = await asyncpg.connect(backend.url)
    try:
        columns = await db.fetch(
            "SELECT table_name, column_name, ordinal_position, data_type, is_nullable, column_default, collation_name "
            "FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
        )
        indexes = await db.fetch(
            "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname"
        )
        constraints = await db.fetch(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2"
        )
        return [tuple(row) for row in [*columns, *indexes, *constraints]]
    finally:
        await db.close()
