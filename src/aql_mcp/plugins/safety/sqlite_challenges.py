"""The out-of-band verification part of `SafetyStore` on SQLite (MCP-AQL §8.8; docs/safety.md):
challenges, blocks and the failure window, and the helpers the rest of the facet shares.
`SqliteSafetyStore` (safety.py) extends it with runs, approvals and notices. Each method is one
transaction; the conditional changes are decided inside the engine, so two replicas racing cannot
both win."""

from __future__ import annotations

import sqlite3

from aql_mcp.plugin import SqliteEngine
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


def resume_run(db: sqlite3.Connection, run_id: str, now: float) -> None:
    db.execute(
        "UPDATE safety_runs SET status = 'running', reason = NULL, updated_at = ? "
        "WHERE id = ? AND status IN ('paused', 'blocked')",
        (now, run_id),
    )


def clear_ref(db: sqlite3.Connection, ref: str, now: float) -> int:
    return int(
        db.execute("UPDATE safety_notices SET cleared_at = ? WHERE ref = ? AND cleared_at IS NULL", (now, ref)).rowcount
    )


def insert_challenge(db: sqlite3.Connection, c: Challenge) -> None:
    db.execute(
        f"INSERT INTO safety_challenges ({CHALLENGE}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
        challenge_row(c),
    )


class SqliteChallenges:
    """Challenges, blocks and failures; each method one transaction."""

    def __init__(self, engine: SqliteEngine) -> None:
        self._engine = engine

    async def open_challenge(self, challenge: Challenge, *, block: Block | None = None) -> None:
        def put(db: sqlite3.Connection) -> None:
            insert_challenge(db, challenge)
            if block is not None:
                db.execute(
                    "INSERT INTO safety_blocks (principal, agent, challenge_id, reason, created_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (principal) DO UPDATE SET agent = excluded.agent, "
                    "challenge_id = excluded.challenge_id, reason = excluded.reason, created_at = excluded.created_at",
                    (block.principal, block.agent, block.challenge_id, block.reason, block.created_at),
                )

        await self._engine.write(put)

    async def renew_block(self, old_challenge_id: str, fresh: Challenge) -> bool:
        def renew(db: sqlite3.Connection) -> bool:
            changed = db.execute(
                "UPDATE safety_blocks SET challenge_id = ? WHERE principal = ? AND challenge_id = ?",
                (fresh.id, fresh.principal, old_challenge_id),
            ).rowcount
            if changed != 1:
                return False
            insert_challenge(db, fresh)
            return True

        return await self._engine.write(renew)

    async def block_run(self, run_id: str, principal: str, reason: str, now: float) -> bool:
        def block(db: sqlite3.Connection) -> bool:
            # One IMMEDIATE transaction: a lift is either committed before it (no block, the run left
            # alone) or waits until after it (and then resumes the run it blocked).
            if db.execute("SELECT 1 FROM safety_blocks WHERE principal = ?", (principal,)).fetchone() is None:
                return False
            marks = ", ".join("?" for _ in LIVE_RUNS)
            db.execute(
                "UPDATE safety_runs SET status = 'blocked', reason = ?, updated_at = ? "  # noqa: S608
                f"WHERE id = ? AND status IN ({marks})",
                (reason, now, run_id, *LIVE_RUNS),
            )
            return True

        return await self._engine.write(block)

    async def get_challenge(self, challenge_id: str) -> Challenge | None:
        row = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {CHALLENGE} FROM safety_challenges WHERE id = ?",  # noqa: S608
                (challenge_id,),
            ).fetchone()
        )
        return Challenge(*row) if row else None

    async def pending_challenge(self, principal: str, now: float) -> Challenge | None:
        row = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {CHALLENGE} FROM safety_challenges WHERE principal = ? AND status = 'pending' "  # noqa: S608
                "AND expires_at > ? ORDER BY created_at DESC LIMIT 1",
                (principal, now),
            ).fetchone()
        )
        return Challenge(*row) if row else None

    async def pass_challenge(self, challenge_id: str, operator: str, now: float) -> Challenge | None:
        def verify(db: sqlite3.Connection) -> Challenge | None:
            row = db.execute(
                "UPDATE safety_challenges SET status = 'verified', decided_at = ?, decided_by = ? "  # noqa: S608
                f"WHERE id = ? AND status = 'pending' AND expires_at > ? RETURNING {CHALLENGE}",
                (now, operator, challenge_id, now),
            ).fetchone()
            if row is None:
                return None
            challenge = Challenge(*row)
            db.execute(
                "DELETE FROM safety_blocks WHERE principal = ? AND challenge_id = ?",
                (challenge.principal, challenge.id),
            )
            clear_ref(db, challenge.id, now)
            resume_run(db, challenge.run_id, now)
            return challenge

        return await self._engine.write(verify)

    async def fail_challenge(
        self, challenge_id: str, operator: str, now: float, *, replacement: Challenge | None = None
    ) -> bool:
        def fail(db: sqlite3.Connection) -> bool:
            changed = db.execute(
                "UPDATE safety_challenges SET status = CASE WHEN expires_at <= ? THEN 'expired' ELSE 'failed' END, "
                "decided_at = ?, decided_by = ? WHERE id = ? AND status = 'pending'",
                (now, now, operator, challenge_id),
            ).rowcount
            if changed != 1:
                return False
            clear_ref(db, challenge_id, now)
            if replacement is not None:
                insert_challenge(db, replacement)
                db.execute(
                    "UPDATE safety_blocks SET challenge_id = ? WHERE challenge_id = ?", (replacement.id, challenge_id)
                )
            return True

        return await self._engine.write(fail)

    async def expire_challenges(self, now: float) -> list[Challenge]:
        def expire(db: sqlite3.Connection) -> list[Challenge]:
            rows = db.execute(
                "UPDATE safety_challenges SET status = 'expired', decided_at = ? "  # noqa: S608
                f"WHERE status = 'pending' AND expires_at <= ? RETURNING {CHALLENGE}",
                (now, now),
            ).fetchall()
            expired = [Challenge(*r) for r in rows]
            for challenge in expired:
                if challenge.tier == "verify":
                    clear_ref(db, challenge.id, now)
                    resume_run(db, challenge.run_id, now)
            return expired

        return await self._engine.write(expire)

    async def get_block(self, principal: str) -> Block | None:
        row = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {BLOCK} FROM safety_blocks WHERE principal = ?",  # noqa: S608
                (principal,),
            ).fetchone()
        )
        return Block(*row) if row else None

    async def lift_block(self, principal: str, operator: str, now: float) -> Block | None:
        def lift(db: sqlite3.Connection) -> Block | None:
            row = db.execute(
                f"DELETE FROM safety_blocks WHERE principal = ? RETURNING {BLOCK}",  # noqa: S608
                (principal,),
            ).fetchone()
            if row is None:
                return None
            block = Block(*row)
            db.execute(
                "UPDATE safety_challenges SET status = 'failed', decided_at = ?, decided_by = ? "
                "WHERE id = ? AND status = 'pending'",
                (now, operator, block.challenge_id),
            )
            clear_ref(db, block.challenge_id, now)
            db.execute(
                "UPDATE safety_runs SET status = 'running', reason = NULL, updated_at = ? "
                "WHERE principal = ? AND status = 'blocked'",
                (now, principal),
            )
            return block

        return await self._engine.write(lift)

    async def note_failure(self, principal: str, now: float, window: float) -> int:
        def note(db: sqlite3.Connection) -> int:
            db.execute("DELETE FROM safety_failures WHERE principal = ? AND at <= ?", (principal, now - window))
            db.execute("INSERT INTO safety_failures (principal, at) VALUES (?, ?)", (principal, now))
            return int(
                db.execute("SELECT count(*) FROM safety_failures WHERE principal = ?", (principal,)).fetchone()[0]
            )

        return await self._engine.write(note)

    async def failures(self, principal: str, since: float) -> int:
        return int(
            await self._engine.read(
                lambda db: db.execute(
                    "SELECT count(*) FROM safety_failures WHERE principal = ? AND at > ?", (principal, since)
                ).fetchone()[0]
            )
        )

    async def claim_attempt(self, principal: str, now: float, window: float, limit: int) -> int | None:
        def claim(db: sqlite3.Connection) -> int | None:
            db.execute("DELETE FROM safety_failures WHERE principal = ? AND at <= ?", (principal, now - window))
            count = int(
                db.execute("SELECT count(*) FROM safety_failures WHERE principal = ?", (principal,)).fetchone()[0]
            )
            if count >= limit:
                return None
            db.execute("INSERT INTO safety_failures (principal, at) VALUES (?, ?)", (principal, now))
            return count + 1

        return await self._engine.write(claim)

    async def forgive_attempt(self, principal: str, at: float) -> None:
        await self._engine.write(
            lambda db: db.execute(
                "DELETE FROM safety_failures WHERE rowid IN "
                "(SELECT rowid FROM safety_failures WHERE principal = ? AND at = ? LIMIT 1)",
                (principal, at),
            )
        )
