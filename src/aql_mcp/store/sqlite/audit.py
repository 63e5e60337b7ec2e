"""`AuditStore` on SQLite: a batch is one IMMEDIATE transaction on the writer, which is also every
chain's turn (one writer at a time holds the file)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from aql_mcp.store.audit import COLUMNS, GENESIS, AuditQuery, AuditRow, ChainHead, Checkpoint, Seal, Writers
from aql_mcp.store.sqlite.engine import SqliteEngine

SELECT = f"SELECT {', '.join(COLUMNS)}, id FROM audit_records"  # noqa: S608 - column names of this module
INSERT = f"INSERT INTO audit_records ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})"  # noqa: S608
CHECKPOINT = (
    "INSERT INTO audit_checkpoints (chain, seq, hash, reason, recorded_at, pruned_before) VALUES (?, ?, ?, ?, ?, ?)"
)


class SqliteAuditStore:
    def __init__(self, engine: SqliteEngine, replica: str) -> None:
        self._engine = engine
        self._replica = replica
        self.writers = Writers()

    @property
    def replica(self) -> str:
        return self._replica

    async def append(self, chains: Sequence[str], seal: Seal, *, now: str) -> None:
        def work(db: sqlite3.Connection) -> None:
            heads = {chain: _head(db, chain, self._replica, now) for chain in chains}
            db.executemany(INSERT, [row.values() for row in seal(heads)])

        await self._engine.write(work)

    async def records(
        self, *, since: str | None = None, until: str | None = None, after_id: int = 0, limit: int = 1000
    ) -> list[AuditRow]:
        query = (
            f"{SELECT} WHERE id > ?1 AND (?2 IS NULL OR recorded_at >= ?2) AND (?3 IS NULL OR recorded_at < ?3) "
            "ORDER BY id LIMIT ?4"
        )
        rows = await self._engine.read(lambda db: db.execute(query, (after_id, since, until, limit)).fetchall())
        return [_row(r) for r in rows]

    async def find(self, query: AuditQuery, *, limit: int) -> list[AuditRow]:
        sql = (
            f"{SELECT} WHERE (?1 IS NULL OR resource_id = ?1) AND (?2 IS NULL OR subject = ?2) "
            "AND (?3 IS NULL OR kind = ?3) AND (?4 IS NULL OR outcome = ?4) "
            "AND (?5 IS NULL OR recorded_at >= ?5) AND (?6 IS NULL OR recorded_at < ?6) ORDER BY id DESC LIMIT ?7"
        )
        rows = await self._engine.read(lambda db: db.execute(sql, (*query.values(), limit)).fetchall())
        return [_row(r) for r in rows]

    async def chain(self, chain: str, *, after_seq: int, limit: int) -> list[AuditRow]:
        query = f"{SELECT} WHERE chain = ? AND seq > ? ORDER BY seq LIMIT ?"
        rows = await self._engine.read(lambda db: db.execute(query, (chain, after_seq, limit)).fetchall())
        return [_row(r) for r in rows]

    async def chains(self) -> list[str]:
        query = "SELECT chain FROM audit_records UNION SELECT chain FROM audit_checkpoints ORDER BY 1"
        rows = await self._engine.read(lambda db: db.execute(query).fetchall())
        return [r[0] for r in rows]

    async def checkpoints(self) -> list[Checkpoint]:
        query = "SELECT chain, seq, hash, reason, recorded_at, pruned_before FROM audit_checkpoints ORDER BY id"
        rows = await self._engine.read(lambda db: db.execute(query).fetchall())
        return [Checkpoint(*r) for r in rows]

    async def prune(self, before: str, *, now: str) -> int:
        def work(db: sqlite3.Connection) -> int:
            ends = db.execute(
                "SELECT chain, max(seq) FROM audit_records WHERE recorded_at < ? GROUP BY chain", (before,)
            ).fetchall()
            deleted = 0
            for chain, seq in ends:
                last = db.execute("SELECT hash FROM audit_records WHERE chain = ? AND seq = ?", (chain, seq)).fetchone()
                # The checkpoint first: the delete trigger lets through only what one covers.
                db.execute(CHECKPOINT, (chain, seq, last[0], "prune", now, before))
                deleted += db.execute("DELETE FROM audit_records WHERE chain = ? AND seq <= ?", (chain, seq)).rowcount
            return deleted

        return await self._engine.write(work)


def _head(db: sqlite3.Connection, chain: str, replica: str, now: str) -> ChainHead:
    """Where `chain` ends; a chain new to the store is anchored first (store/audit.py, `Checkpoint`)."""
    last = db.execute("SELECT seq, hash FROM audit_records WHERE chain = ? ORDER BY seq DESC LIMIT 1", (chain,))
    found = last.fetchone()
    if found is None:
        found = db.execute(
            "SELECT seq, hash FROM audit_checkpoints WHERE chain = ? ORDER BY seq DESC, id DESC LIMIT 1", (chain,)
        ).fetchone()
    if found is not None:
        return ChainHead(int(found[0]), found[1])
    previous = db.execute(
        "SELECT hash FROM audit_records WHERE replica = ? ORDER BY id DESC LIMIT 1", (replica,)
    ).fetchone()
    anchor = previous[0] if previous is not None else GENESIS
    db.execute(CHECKPOINT, (chain, 0, anchor, "anchor", now, None))
    return ChainHead(0, anchor)


def _row(r: sqlite3.Row | tuple[object, ...]) -> AuditRow:
    return AuditRow(*r)
