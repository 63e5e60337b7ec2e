"""`AuditStore` on PostgreSQL: a batch is one transaction, holding a transaction-scoped advisory
lock per chain it writes to. Each replica writes chains of its own, so replicas never wait for each
other; two writers of one process on the same chain (the MCP-AQL router and the console) take turns."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from aql_mcp.store.audit import COLUMNS, GENESIS, AuditQuery, AuditRow, ChainHead, Checkpoint, Seal, Writers
from aql_mcp.store.postgres.engine import PostgresEngine

SELECT = f"SELECT {', '.join(COLUMNS)}, id FROM audit_records"  # noqa: S608 - column names of this module
INSERT = (
    f"INSERT INTO audit_records ({', '.join(COLUMNS)}) "  # noqa: S608 - column names of this module
    f"VALUES ({', '.join(f'${n}' for n in range(1, len(COLUMNS) + 1))})"
)
CHECKPOINT = (
    "INSERT INTO audit_checkpoints (chain, seq, hash, reason, recorded_at, pruned_before) "
    "VALUES ($1, $2, $3, $4, $5, $6)"
)
# First key of the two-key pg_advisory_xact_lock of a chain (the second is the chain's hashtext):
# any constant, apart from the one-key locks of the migrations and session admission.
CHAIN_LOCK = 0x61756474  # "audt"


class PostgresAuditStore:
    def __init__(self, engine: PostgresEngine) -> None:
        self._engine = engine
        self.writers = Writers()

    @property
    def replica(self) -> str:
        return self._engine.replica

    async def append(self, chains: Sequence[str], seal: Seal, *, now: str) -> None:
        async def work(db: asyncpg.Connection) -> None:
            heads = {}
            # Sorted: two writers locking the same chains lock them in one order, never in a cycle.
            for chain in sorted(chains):
                await db.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", CHAIN_LOCK, chain)
                heads[chain] = await _head(db, chain, self.replica, now)
            await db.executemany(INSERT, [row.values() for row in seal(heads)])

        await self._engine.run(work)

    async def records(
        self, *, since: str | None = None, until: str | None = None, after_id: int = 0, limit: int = 1000
    ) -> list[AuditRow]:
        query = (
            f"{SELECT} WHERE id > $1 AND ($2::text IS NULL OR recorded_at >= $2) "
            "AND ($3::text IS NULL OR recorded_at < $3) ORDER BY id LIMIT $4"
        )
        return [_row(r) for r in await self._engine.fetch(query, after_id, since, until, limit)]

    async def find(self, query: AuditQuery, *, limit: int) -> list[AuditRow]:
        sql = (
            f"{SELECT} WHERE ($1::text IS NULL OR resource_id = $1) AND ($2::text IS NULL OR subject = $2) "
            "AND ($3::text IS NULL OR kind = $3) AND ($4::text IS NULL OR outcome = $4) "
            "AND ($5::text IS NULL OR recorded_at >= $5) AND ($6::text IS NULL OR recorded_at < $6) "
            "ORDER BY id DESC LIMIT $7"
        )
        return [_row(r) for r in await self._engine.fetch(sql, *query.values(), limit)]

    async def chain(self, chain: str, *, after_seq: int, limit: int) -> list[AuditRow]:
        query = f"{SELECT} WHERE chain = $1 AND seq > $2 ORDER BY seq LIMIT $3"
        return [_row(r) for r in await self._engine.fetch(query, chain, after_seq, limit)]

    async def chains(self) -> list[str]:
        query = "SELECT chain FROM audit_records UNION SELECT chain FROM audit_checkpoints ORDER BY 1"
        return [r[0] for r in await self._engine.fetch(query)]

    async def checkpoints(self) -> list[Checkpoint]:
        query = "SELECT chain, seq, hash, reason, recorded_at, pruned_before FROM audit_checkpoints ORDER BY id"
        return [Checkpoint(*r) for r in await self._engine.fetch(query)]

    async def prune(self, before: str, *, now: str) -> int:
        async def work(db: asyncpg.Connection) -> int:
            ends = await db.fetch(
                "SELECT chain, max(seq) AS seq FROM audit_records WHERE recorded_at < $1 GROUP BY chain", before
            )
            deleted = 0
            for end in ends:
                chain, seq = end["chain"], end["seq"]
                await db.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", CHAIN_LOCK, chain)
                last = await db.fetchval("SELECT hash FROM audit_records WHERE chain = $1 AND seq = $2", chain, seq)
                # The checkpoint first: the delete trigger lets through only what one covers.
                await db.execute(CHECKPOINT, chain, seq, last, "prune", now, before)
                status = await db.execute("DELETE FROM audit_records WHERE chain = $1 AND seq <= $2", chain, seq)
                deleted += int(status.rsplit(" ", 1)[-1])
            return deleted

        return await self._engine.run(work)


async def _head(db: asyncpg.Connection, chain: str, replica: str, now: str) -> ChainHead:
    """Where `chain` ends; a chain new to the database is anchored first (store/audit.py, `Checkpoint`)."""
    found = await db.fetchrow("SELECT seq, hash FROM audit_records WHERE chain = $1 ORDER BY seq DESC LIMIT 1", chain)
    if found is None:
        found = await db.fetchrow(
            "SELECT seq, hash FROM audit_checkpoints WHERE chain = $1 ORDER BY seq DESC, id DESC LIMIT 1", chain
        )
    if found is not None:
        return ChainHead(int(found["seq"]), found["hash"])
    previous = await db.fetchval("SELECT hash FROM audit_records WHERE replica = $1 ORDER BY id DESC LIMIT 1", replica)
    anchor = previous if previous is not None else GENESIS
    await db.execute(CHECKPOINT, chain, 0, anchor, "anchor", now, None)
    return ChainHead(0, anchor)


def _row(r: asyncpg.Record) -> AuditRow:
    return AuditRow(*r)
