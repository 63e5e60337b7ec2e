"""The out-of-band verification part of `SafetyStore` on PostgreSQL (MCP-AQL §8.8; docs/safety.md):
challenges, blocks and the failure window, and the helpers the rest of the facet shares.
`PostgresSafetyStore` (safety.py) extends it with runs, approvals and notices. Each method is one
transaction; the conditional changes are decided inside the engine, so two replicas racing cannot
both win."""

from __future__ import annotations

import asyncpg

from aql_mcp.plugin import PostgresEngine
from aql_mcp.plugins.safety.rows import (
    BLOCK_COLUMNS,
    CHALLENGE_COLUMNS,
    challenge_row,
)
from aql_mcp.plugins.safety.store import (
    LIVE_RUNS,
    Block,
    Challenge,
)

CHALLENGE = CHALLENGE_COLUMNS
BLOCK = BLOCK_COLUMNS


def count_of(status: str) -> int:
    return int(status.rsplit(" ", 1)[-1])


async def resume_run(db: asyncpg.Connection, run_id: str, now: float) -> None:
    await db.execute(
        "UPDATE safety_runs SET status = 'running', reason = NULL, updated_at = $2 "
        "WHERE id = $1 AND status IN ('paused', 'blocked')",
        run_id,
        now,
    )


async def clear_ref(db: asyncpg.Connection, ref: str, now: float) -> int:
    status = await db.execute(
        "UPDATE safety_notices SET cleared_at = $2 WHERE ref = $1 AND cleared_at IS NULL", ref, now
    )
    return count_of(status)


async def insert_challenge(db: asyncpg.Connection, c: Challenge) -> None:
    await db.execute(
        f"INSERT INTO safety_challenges ({CHALLENGE}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",  # noqa: S608
        *challenge_row(c),
    )


class PostgresChallenges:
    """Challenges, blocks and failures; each method one transaction."""

    def __init__(self, engine: PostgresEngine) -> None:
        self._engine = engine

    async def open_challenge(self, challenge: Challenge, *, block: Block | None = None) -> None:
        async def put(db: asyncpg.Connection) -> None:
            await insert_challenge(db, challenge)
            if block is not None:
                await db.execute(
                    "INSERT INTO safety_blocks (principal, agent, challenge_id, reason, created_at) "
                    "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (principal) DO UPDATE SET agent = excluded.agent, "
                    "challenge_id = excluded.challenge_id, reason = excluded.reason, created_at = excluded.created_at",
                    block.principal,
                    block.agent,
                    block.challenge_id,
                    block.reason,
                    block.created_at,
                )

        await self._engine.run(put)

    async def renew_block(self, old_challenge_id: str, fresh: Challenge) -> bool:
        async def renew(db: asyncpg.Connection) -> bool:
            changed = await db.execute(
                "UPDATE safety_blocks SET challenge_id = $1 WHERE principal = $2 AND challenge_id = $3",
                fresh.id,
                fresh.principal,
                old_challenge_id,
            )
            if changed != "UPDATE 1":
                return False
            await insert_challenge(db, fresh)
            return True

        return await self._engine.run(renew)

    async def block_run(self, run_id: str, principal: str, reason: str, now: float) -> bool:
        async def block(db: asyncpg.Connection) -> bool:
            # The block's row stays locked until the run is marked: a lift's DELETE either committed
            # before (the locking read finds no row) or waits, then resumes the run blocked here.
            if await db.fetchval("SELECT 1 FROM safety_blocks WHERE principal = $1 FOR SHARE", principal) is None:
                return False
            await db.execute(
                "UPDATE safety_runs SET status = 'blocked', reason = $2, updated_at = $3 "
                "WHERE id = $1 AND status = ANY($4::text[])",
                run_id,
                reason,
                now,
                list(LIVE_RUNS),
            )
            return True

        return await self._engine.run(block)

    async def get_challenge(self, challenge_id: str) -> Challenge | None:
        row = await self._engine.fetchrow(f"SELECT {CHALLENGE} FROM safety_challenges WHERE id = $1", challenge_id)  # noqa: S608
        return Challenge(*row) if row else None

    async def pending_challenge(self, principal: str, now: float) -> Challenge | None:
        row = await self._engine.fetchrow(
            f"SELECT {CHALLENGE} FROM safety_challenges WHERE principal = $1 AND status = 'pending' "  # noqa: S608
            "AND expires_at > $2 ORDER BY created_at DESC LIMIT 1",
            principal,
            now,
        )
        return Challenge(*row) if row else None

    async def pass_challenge(self, challenge_id: str, operator: str, now: float) -> Challenge | None:
        async def verify(db: asyncpg.Connection) -> Challenge | None:
            row = await db.fetchrow(
                "UPDATE safety_challenges SET status = 'verified', decided_at = $2, decided_by = $3 "  # noqa: S608
                f"WHERE id = $1 AND status = 'pending' AND expires_at > $2 RETURNING {CHALLENGE}",
                challenge_id,
                now,
                operator,
            )
            if row is None:
                return None
            challenge = Challenge(*row)
            await db.execute(
                "DELETE FROM safety_blocks WHERE principal = $1 AND challenge_id = $2",
                challenge.principal,
                challenge.id,
            )
            await clear_ref(db, challenge.id, now)
            await resume_run(db, challenge.run_id, now)
            return challenge

        return await self._engine.run(verify)

    async def fail_challenge(
        self, challenge_id: str, operator: str, now: float, *, replacement: Challenge | None = None
    ) -> bool:
        async def fail(db: asyncpg.Connection) -> bool:
            status = await db.execute(
                "UPDATE safety_challenges SET status = CASE WHEN expires_at <= $2 THEN 'expired' ELSE 'failed' END, "
                "decided_at = $2, decided_by = $3 WHERE id = $1 AND status = 'pending'",
                challenge_id,
                now,
                operator,
            )
            if count_of(status) != 1:
                return False
            await clear_ref(db, challenge_id, now)
            if replacement is not None:
                await insert_challenge(db, replacement)
                await db.execute(
                    "UPDATE safety_blocks SET challenge_id = $1 WHERE challenge_id = $2", replacement.id, challenge_id
                )
            return True

        return await self._engine.run(fail)

    async def expire_challenges(self, now: float) -> list[Challenge]:
        async def expire(db: asyncpg.Connection) -> list[Challenge]:
            rows = await db.fetch(
                "UPDATE safety_challenges SET status = 'expired', decided_at = $1 "  # noqa: S608
                f"WHERE status = 'pending' AND expires_at <= $1 RETURNING {CHALLENGE}",
                now,
            )
            expired = [Challenge(*r) for r in rows]
            for challenge in expired:
                if challenge.tier == "verify":
                    await clear_ref(db, challenge.id, now)
                    await resume_run(db, challenge.run_id, now)
            return expired

        return await self._engine.run(expire)

    async def get_block(self, principal: str) -> Block | None:
        row = await self._engine.fetchrow(f"SELECT {BLOCK} FROM safety_blocks WHERE principal = $1", principal)  # noqa: S608
        return Block(*row) if row else None

    async def lift_block(self, principal: str, operator: str, now: float) -> Block | None:
        async def lift(db: asyncpg.Connection) -> Block | None:
            row = await db.fetchrow(f"DELETE FROM safety_blocks WHERE principal = $1 RETURNING {BLOCK}", principal)  # noqa: S608
            if row is None:
                return None
            block = Block(*row)
            await db.execute(
                "UPDATE safety_challenges SET status = 'failed', decided_at = $2, decided_by = $3 "
                "WHERE id = $1 AND status = 'pending'",
                block.challenge_id,
                now,
                operator,
            )
            await clear_ref(db, block.challenge_id, now)
            await db.execute(
                "UPDATE safety_runs SET status = 'running', reason = NULL, updated_at = $2 "
                "WHERE principal = $1 AND status = 'blocked'",
                principal,
                now,
            )
            return block

        return await self._engine.run(lift)

    async def note_failure(self, principal: str, now: float, window: float) -> int:
        async def note(db: asyncpg.Connection) -> int:
            # One principal's failures are counted in turn: two replicas cannot both count nine.
            await db.execute("SELECT pg_advisory_xact_lock(hashtextextended('aql_mcp.safety:' || $1, 0))", principal)
            await db.execute("DELETE FROM safety_failures WHERE principal = $1 AND at <= $2", principal, now - window)
            await db.execute("INSERT INTO safety_failures (principal, at) VALUES ($1, $2)", principal, now)
            return int(await db.fetchval("SELECT count(*) FROM safety_failures WHERE principal = $1", principal))

        return await self._engine.run(note)

    async def failures(self, principal: str, since: float) -> int:
        return int(
            await self._engine.fetchval(
                "SELECT count(*) FROM safety_failures WHERE principal = $1 AND at > $2", principal, since
            )
        )

    async def claim_attempt(self, principal: str, now: float, window: float, limit: int) -> int | None:
        async def claim(db: asyncpg.Connection) -> int | None:
            await db.execute("SELECT pg_advisory_xact_lock(hashtextextended('aql_mcp.safety:' || $1, 0))", principal)
            await db.execute("DELETE FROM safety_failures WHERE principal = $1 AND at <= $2", principal, now - window)
            count = int(await db.fetchval("SELECT count(*) FROM safety_failures WHERE principal = $1", principal))
            if count >= limit:
                return None
            await db.execute("INSERT INTO safety_failures (principal, at) VALUES ($1, $2)", principal, now)
            return count + 1

        return await self._engine.run(claim)

    async def forgive_attempt(self, principal: str, at: float) -> None:
        await self._engine.execute(
            "DELETE FROM safety_failures WHERE ctid IN "
            "(SELECT ctid FROM safety_failures WHERE principal = $1 AND at = $2 LIMIT 1)",
            principal,
            at,
        )
