"""`SafetyStore` on PostgreSQL: each method one transaction; the conditional updates are single
`UPDATE ... WHERE status = 'pending'` statements, so two replicas racing cannot both win."""

from __future__ import annotations

from typing import Any

import asyncpg

from aql_mcp.store.postgres.engine import PostgresEngine
from aql_mcp.store.safety import (
    APPROVAL_COLUMNS,
    BLOCK_COLUMNS,
    BROADCAST,
    CHALLENGE_COLUMNS,
    EVENT_COLUMNS,
    LIVE_RUNS,
    NOTICE_COLUMNS,
    ONE_SHOT,
    RUN_COLUMNS,
    AgentRun,
    Approval,
    ApprovalKind,
    ApprovalStatus,
    Block,
    Challenge,
    Notice,
    RunStatus,
    SafetyOverview,
    approval_row,
    challenge_row,
    dumps,
    event_of,
    notice_of,
    run_of,
    run_row,
)

RUN = RUN_COLUMNS
CHALLENGE = CHALLENGE_COLUMNS
BLOCK = BLOCK_COLUMNS
APPROVAL = APPROVAL_COLUMNS
NOTICE = NOTICE_COLUMNS
EVENT = EVENT_COLUMNS
LIVE = list(LIVE_RUNS)


def _count(status: str) -> int:
    return int(status.rsplit(" ", 1)[-1])


async def _resume(db: asyncpg.Connection, run_id: str, now: float) -> None:
    await db.execute(
        "UPDATE safety_runs SET status = 'running', reason = NULL, updated_at = $2 "
        "WHERE id = $1 AND status IN ('paused', 'blocked')",
        run_id,
        now,
    )


async def _clear(db: asyncpg.Connection, ref: str, now: float) -> int:
    status = await db.execute(
        "UPDATE safety_notices SET cleared_at = $2 WHERE ref = $1 AND cleared_at IS NULL", ref, now
    )
    return _count(status)


async def _insert_challenge(db: asyncpg.Connection, c: Challenge) -> None:
    await db.execute(
        f"INSERT INTO safety_challenges ({CHALLENGE}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",  # noqa: S608
        *challenge_row(c),
    )


class PostgresSafetyStore:
    def __init__(self, engine: PostgresEngine) -> None:
        self._engine = engine

    async def overview(self, now: float, *, recent: int = 50) -> SafetyOverview:
        async def read(db: asyncpg.Connection) -> SafetyOverview:
            runs = await db.fetch(
                f"SELECT {RUN} FROM safety_runs WHERE status = ANY($1::text[]) ORDER BY started_at DESC",  # noqa: S608
                LIVE,
            )
            approvals = await db.fetch(
                f"SELECT {APPROVAL} FROM safety_approvals WHERE status = 'pending' ORDER BY created_at DESC"  # noqa: S608
            )
            challenges = await db.fetch(
                f"SELECT {CHALLENGE} FROM safety_challenges WHERE status = 'pending' AND expires_at > $1 "  # noqa: S608
                "ORDER BY created_at DESC",
                now,
            )
            blocks = await db.fetch(f"SELECT {BLOCK} FROM safety_blocks ORDER BY created_at DESC")  # noqa: S608
            events = await db.fetch(f"SELECT {EVENT} FROM safety_events ORDER BY id DESC LIMIT $1", recent)  # noqa: S608
            return SafetyOverview(
                runs=[run_of(r) for r in runs],
                approvals=[Approval(*r) for r in approvals],
                challenges=[Challenge(*r) for r in challenges],
                blocks=[Block(*r) for r in blocks],
                events=[event_of(r) for r in events],
            )

        return await self._engine.run(read)

    # Runs

    async def start_run(self, run: AgentRun) -> None:
        await self._engine.execute(
            f"INSERT INTO safety_runs ({RUN}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",  # noqa: S608
            *run_row(run),
        )

    async def get_run(self, run_id: str) -> AgentRun | None:
        row = await self._engine.fetchrow(f"SELECT {RUN} FROM safety_runs WHERE id = $1", run_id)  # noqa: S608
        return run_of(row) if row else None

    async def count_step(self, run_id: str, action: str, now: float) -> AgentRun | None:
        row = await self._engine.fetchrow(
            "UPDATE safety_runs SET steps = steps + 1, last_action = $2, updated_at = $3 "  # noqa: S608
            f"WHERE id = $1 AND status = ANY($4::text[]) RETURNING {RUN}",
            run_id,
            action,
            now,
            LIVE,
        )
        return run_of(row) if row else None

    async def set_run_status(self, run_id: str, status: RunStatus, now: float, *, reason: str | None = None) -> bool:
        ended = now if status in ("completed", "aborted") else None
        result = await self._engine.execute(
            "UPDATE safety_runs SET status = $2, reason = $3, updated_at = $4, ended_at = $5 "
            "WHERE id = $1 AND status = ANY($6::text[])",
            run_id,
            status,
            reason,
            now,
            ended,
            LIVE,
        )
        return _count(result) == 1

    async def live_runs(self) -> list[AgentRun]:
        rows = await self._engine.fetch(
            f"SELECT {RUN} FROM safety_runs WHERE status = ANY($1::text[]) ORDER BY started_at",  # noqa: S608
            LIVE,
        )
        return [run_of(r) for r in rows]

    async def reset_steps(self, run_id: str, now: float) -> bool:
        status = await self._engine.execute(
            "UPDATE safety_runs SET steps = 0, updated_at = $2 WHERE id = $1", run_id, now
        )
        return _count(status) == 1

    # Challenges and blocks

    async def open_challenge(self, challenge: Challenge, *, block: Block | None = None) -> None:
        async def put(db: asyncpg.Connection) -> None:
            await _insert_challenge(db, challenge)
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
            await _insert_challenge(db, fresh)
            return True

        return await self._engine.run(renew)

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
            await _clear(db, challenge.id, now)
            await _resume(db, challenge.run_id, now)
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
            if _count(status) != 1:
                return False
            await _clear(db, challenge_id, now)
            if replacement is not None:
                await _insert_challenge(db, replacement)
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
                    await _clear(db, challenge.id, now)
                    await _resume(db, challenge.run_id, now)
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
            await _clear(db, block.challenge_id, now)
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

    # Approvals

    async def open_approval(self, approval: Approval) -> None:
        await self._engine.execute(
            f"INSERT INTO safety_approvals ({APPROVAL}) "  # noqa: S608
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            *approval_row(approval),
        )

    async def get_approval(self, approval_id: str) -> Approval | None:
        row = await self._engine.fetchrow(f"SELECT {APPROVAL} FROM safety_approvals WHERE id = $1", approval_id)  # noqa: S608
        return Approval(*row) if row else None

    async def find_approval(self, principal: str, action: str, kind: ApprovalKind) -> Approval | None:
        row = await self._engine.fetchrow(
            f"SELECT {APPROVAL} FROM safety_approvals WHERE principal = $1 AND action = $2 AND kind = $3 "  # noqa: S608
            "AND used_at IS NULL ORDER BY created_at DESC LIMIT 1",
            principal,
            action,
            kind,
        )
        return Approval(*row) if row else None

    async def pending_approvals(self, principal: str) -> list[Approval]:
        rows = await self._engine.fetch(
            f"SELECT {APPROVAL} FROM safety_approvals WHERE principal = $1 AND status = 'pending' "  # noqa: S608
            "ORDER BY created_at",
            principal,
        )
        return [Approval(*r) for r in rows]

    async def approval_by_token(self, token_hash: str) -> Approval | None:
        row = await self._engine.fetchrow(
            f"SELECT {APPROVAL} FROM safety_approvals WHERE token_hash = $1 ORDER BY created_at DESC LIMIT 1",  # noqa: S608
            token_hash,
        )
        return Approval(*row) if row else None

    async def decide_approval(
        self, approval_id: str, status: ApprovalStatus, operator: str, now: float
    ) -> Approval | None:
        async def decide(db: asyncpg.Connection) -> Approval | None:
            row = await db.fetchrow(
                "UPDATE safety_approvals SET status = $2, decided_at = $3, decided_by = $4 "  # noqa: S608
                f"WHERE id = $1 AND status = 'pending' RETURNING {APPROVAL}",
                approval_id,
                status,
                now,
                operator,
            )
            if row is None:
                return None
            approval = Approval(*row)
            await _clear(db, approval.id, now)
            if status == "approved":
                await _resume(db, approval.run_id, now)
            return approval

        return await self._engine.run(decide)

    async def use_approval(self, approval_id: str, now: float) -> bool:
        status = await self._engine.execute(
            "UPDATE safety_approvals SET used_at = $2 "
            "WHERE id = $1 AND status IN ('approved', 'denied') AND used_at IS NULL",
            approval_id,
            now,
        )
        return _count(status) == 1

    # Notices and the audit trail

    async def add_notice(
        self,
        agent: str,
        type_: str,
        message: str,
        metadata: dict[str, Any],
        now: float,
        *,
        ref: str | None = None,
    ) -> int:
        return int(
            await self._engine.fetchval(
                "INSERT INTO safety_notices (agent, type, message, metadata, created_at, ref) "
                "VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                agent,
                type_,
                message,
                dumps(metadata),
                now,
                ref,
            )
        )

    async def take_notices(self, principal: str, now: float) -> list[Notice]:
        async def take(db: asyncpg.Connection) -> list[Notice]:
            rows = await db.fetch(
                f"SELECT {NOTICE} FROM safety_notices WHERE agent IN ($1, $2) AND cleared_at IS NULL ORDER BY id",  # noqa: S608
                principal,
                BROADCAST,
            )
            await db.execute(
                "UPDATE safety_notices SET cleared_at = $2 "
                "WHERE agent = $1 AND cleared_at IS NULL AND type = ANY($3::text[])",
                principal,
                now,
                list(ONE_SHOT),
            )
            return [notice_of(r) for r in rows]

        return await self._engine.run(take)

    async def clear_notices(self, ref: str, now: float) -> int:
        return await self._engine.run(lambda db: _clear(db, ref, now))

    async def add_event(self, agent: str, kind: str, actor: str, detail: dict[str, Any], now: float) -> None:
        await self._engine.execute(
            "INSERT INTO safety_events (at, agent, kind, actor, detail) VALUES ($1, $2, $3, $4, $5)",
            now,
            agent,
            kind,
            actor,
            dumps(detail),
        )
