"""`SafetyStore` on PostgreSQL: each method one transaction; the conditional updates are single
`UPDATE ... WHERE status = 'pending'` statements, so two replicas racing cannot both win."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import asyncpg

from aql_mcp.plugins.safety.postgres_challenges import (
    PostgresChallenges,
    clear_ref,
    count_of,
    resume_run,
)
from aql_mcp.plugins.safety.rows import (
    APPROVAL_COLUMNS,
    BLOCK_COLUMNS,
    CHALLENGE_COLUMNS,
    EVENT_COLUMNS,
    NOTICE_COLUMNS,
    RUN_COLUMNS,
    approval_row,
    dumps,
    event_of,
    notice_of,
    run_of,
    run_row,
)
from aql_mcp.plugins.safety.store import (
    BROADCAST,
    ENDED_RUNS,
    LIVE_RUNS,
    ONE_SHOT,
    RUN_STATUSES,
    AgentRun,
    Approval,
    ApprovalKind,
    ApprovalStatus,
    Block,
    Challenge,
    Notice,
    RunStatus,
    SafetyOverview,
)

RUN = RUN_COLUMNS
CHALLENGE = CHALLENGE_COLUMNS
BLOCK = BLOCK_COLUMNS
APPROVAL = APPROVAL_COLUMNS
NOTICE = NOTICE_COLUMNS
EVENT = EVENT_COLUMNS
LIVE = list(LIVE_RUNS)


class PostgresSafetyStore(PostgresChallenges):
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
        ended = now if status in ENDED_RUNS else None
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
        return count_of(result) == 1

    async def live_runs(self, principal: str) -> list[AgentRun]:
        rows = await self._engine.fetch(
            f"SELECT {RUN} FROM safety_runs WHERE status = ANY($1::text[]) AND principal = $2 "  # noqa: S608
            "ORDER BY started_at",
            LIVE,
            principal,
        )
        return [run_of(r) for r in rows]

    async def list_runs(self, principal: str, statuses: Collection[RunStatus] | None, limit: int) -> list[AgentRun]:
        rows = await self._engine.fetch(
            f"SELECT {RUN} FROM safety_runs WHERE principal = $1 AND status = ANY($2::text[]) "  # noqa: S608
            "ORDER BY started_at DESC, id DESC LIMIT $3",
            principal,
            list(statuses if statuses is not None else RUN_STATUSES),
            limit,
        )
        return [run_of(r) for r in rows]

    async def reset_steps(self, run_id: str, now: float) -> bool:
        status = await self._engine.execute(
            "UPDATE safety_runs SET steps = 0, updated_at = $2 WHERE id = $1", run_id, now
        )
        return count_of(status) == 1

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
            await clear_ref(db, approval.id, now)
            if status == "approved":
                await resume_run(db, approval.run_id, now)
            return approval

        return await self._engine.run(decide)

    async def use_approval(self, approval_id: str, now: float) -> bool:
        status = await self._engine.execute(
            "UPDATE safety_approvals SET used_at = $2 "
            "WHERE id = $1 AND status IN ('approved', 'denied') AND used_at IS NULL",
            approval_id,
            now,
        )
        return count_of(status) == 1

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
        return await self._engine.run(lambda db: clear_ref(db, ref, now))

    async def add_event(self, agent: str, kind: str, actor: str, detail: dict[str, Any], now: float) -> None:
        await self._engine.execute(
            "INSERT INTO safety_events (at, agent, kind, actor, detail) VALUES ($1, $2, $3, $4, $5)",
            now,
            agent,
            kind,
            actor,
            dumps(detail),
        )
