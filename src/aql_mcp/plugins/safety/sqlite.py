"""`SafetyStore` on SQLite: each method one transaction on the writer (or one read)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from typing import Any

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
from aql_mcp.plugins.safety.sqlite_challenges import SqliteChallenges, clear_ref, resume_run
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
LIVE_SQL = "(" + ", ".join(f"'{status}'" for status in LIVE_RUNS) + ")"


class SqliteSafetyStore(SqliteChallenges):
    """`SafetyStore` on the service's SQLite engine."""

    async def overview(self, now: float, *, recent: int = 50) -> SafetyOverview:
        def read(db: sqlite3.Connection) -> SafetyOverview:
            return SafetyOverview(
                runs=[
                    run_of(r)
                    for r in db.execute(
                        f"SELECT {RUN} FROM safety_runs WHERE status IN {LIVE_SQL} ORDER BY started_at DESC"  # noqa: S608
                    )
                ],
                approvals=[
                    Approval(*r)
                    for r in db.execute(
                        f"SELECT {APPROVAL} FROM safety_approvals WHERE status = 'pending' ORDER BY created_at DESC"  # noqa: S608
                    )
                ],
                challenges=[
                    Challenge(*r)
                    for r in db.execute(
                        f"SELECT {CHALLENGE} FROM safety_challenges WHERE status = 'pending' AND expires_at > ? "  # noqa: S608
                        "ORDER BY created_at DESC",
                        (now,),
                    )
                ],
                blocks=[
                    Block(*r)
                    for r in db.execute(f"SELECT {BLOCK} FROM safety_blocks ORDER BY created_at DESC")  # noqa: S608
                ],
                events=[
                    event_of(r)
                    for r in db.execute(
                        f"SELECT {EVENT} FROM safety_events ORDER BY id DESC LIMIT ?",  # noqa: S608
                        (recent,),
                    )
                ],
            )

        return await self._engine.read(read)

    # Runs

    async def start_run(self, run: AgentRun) -> None:
        row = run_row(run)
        await self._engine.write(
            lambda db: db.execute(f"INSERT INTO safety_runs ({RUN}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)  # noqa: S608
        )

    async def get_run(self, run_id: str) -> AgentRun | None:
        row = await self._engine.read(
            lambda db: db.execute(f"SELECT {RUN} FROM safety_runs WHERE id = ?", (run_id,)).fetchone()  # noqa: S608
        )
        return run_of(row) if row else None

    async def count_step(self, run_id: str, action: str, now: float) -> AgentRun | None:
        row = await self._engine.write(
            lambda db: db.execute(
                "UPDATE safety_runs SET steps = steps + 1, last_action = ?, updated_at = ? "  # noqa: S608
                f"WHERE id = ? AND status IN {LIVE_SQL} RETURNING {RUN}",
                (action, now, run_id),
            ).fetchone()
        )
        return run_of(row) if row else None

    async def set_run_status(self, run_id: str, status: RunStatus, now: float, *, reason: str | None = None) -> bool:
        ended = now if status in ENDED_RUNS else None
        changed = await self._engine.write(
            lambda db: (
                db.execute(
                    "UPDATE safety_runs SET status = ?, reason = ?, updated_at = ?, ended_at = ? "  # noqa: S608
                    f"WHERE id = ? AND status IN {LIVE_SQL}",
                    (status, reason, now, ended, run_id),
                ).rowcount
            )
        )
        return bool(changed == 1)

    async def live_runs(self, principal: str) -> list[AgentRun]:
        rows = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {RUN} FROM safety_runs WHERE status IN {LIVE_SQL} AND principal = ? "  # noqa: S608
                "ORDER BY started_at",
                (principal,),
            ).fetchall()
        )
        return [run_of(r) for r in rows]

    async def list_runs(self, principal: str, statuses: Collection[RunStatus] | None, limit: int) -> list[AgentRun]:
        wanted = tuple(statuses) if statuses is not None else RUN_STATUSES
        marks = ", ".join("?" for _ in wanted) or "NULL"
        rows = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {RUN} FROM safety_runs WHERE principal = ? AND status IN ({marks}) "  # noqa: S608
                "ORDER BY started_at DESC, id DESC LIMIT ?",
                (principal, *wanted, limit),
            ).fetchall()
        )
        return [run_of(r) for r in rows]

    async def reset_steps(self, run_id: str, now: float) -> bool:
        changed = await self._engine.write(
            lambda db: (
                db.execute("UPDATE safety_runs SET steps = 0, updated_at = ? WHERE id = ?", (now, run_id)).rowcount
            )
        )
        return bool(changed == 1)

    # Approvals

    async def open_approval(self, approval: Approval) -> None:
        row = approval_row(approval)
        await self._engine.write(
            lambda db: db.execute(
                f"INSERT INTO safety_approvals ({APPROVAL}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
                row,
            )
        )

    async def get_approval(self, approval_id: str) -> Approval | None:
        row = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {APPROVAL} FROM safety_approvals WHERE id = ?",  # noqa: S608
                (approval_id,),
            ).fetchone()
        )
        return Approval(*row) if row else None

    async def find_approval(self, principal: str, action: str, kind: ApprovalKind) -> Approval | None:
        row = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {APPROVAL} FROM safety_approvals WHERE principal = ? AND action = ? AND kind = ? "  # noqa: S608
                "AND used_at IS NULL ORDER BY created_at DESC LIMIT 1",
                (principal, action, kind),
            ).fetchone()
        )
        return Approval(*row) if row else None

    async def pending_approvals(self, principal: str) -> list[Approval]:
        rows = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {APPROVAL} FROM safety_approvals WHERE principal = ? AND status = 'pending' "  # noqa: S608
                "ORDER BY created_at",
                (principal,),
            ).fetchall()
        )
        return [Approval(*r) for r in rows]

    async def approval_by_token(self, token_hash: str) -> Approval | None:
        row = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {APPROVAL} FROM safety_approvals WHERE token_hash = ? ORDER BY created_at DESC LIMIT 1",  # noqa: S608
                (token_hash,),
            ).fetchone()
        )
        return Approval(*row) if row else None

    async def decide_approval(
        self, approval_id: str, status: ApprovalStatus, operator: str, now: float
    ) -> Approval | None:
        def decide(db: sqlite3.Connection) -> Approval | None:
            row = db.execute(
                "UPDATE safety_approvals SET status = ?, decided_at = ?, decided_by = ? "  # noqa: S608
                f"WHERE id = ? AND status = 'pending' RETURNING {APPROVAL}",
                (status, now, operator, approval_id),
            ).fetchone()
            if row is None:
                return None
            approval = Approval(*row)
            clear_ref(db, approval.id, now)
            if status == "approved":
                resume_run(db, approval.run_id, now)
            return approval

        return await self._engine.write(decide)

    async def use_approval(self, approval_id: str, now: float) -> bool:
        changed = await self._engine.write(
            lambda db: (
                db.execute(
                    "UPDATE safety_approvals SET used_at = ? "
                    "WHERE id = ? AND status IN ('approved', 'denied') AND used_at IS NULL",
                    (now, approval_id),
                ).rowcount
            )
        )
        return bool(changed == 1)

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
        row = (agent, type_, message, dumps(metadata), now, ref)
        return int(
            await self._engine.write(
                lambda db: db.execute(
                    "INSERT INTO safety_notices (agent, type, message, metadata, created_at, ref) "
                    "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                    row,
                ).fetchone()[0]
            )
        )

    async def take_notices(self, principal: str, now: float) -> list[Notice]:
        one_shot = "(" + ", ".join(f"'{kind}'" for kind in ONE_SHOT) + ")"

        def take(db: sqlite3.Connection) -> list[Notice]:
            rows = db.execute(
                f"SELECT {NOTICE} FROM safety_notices WHERE agent IN (?, ?) AND cleared_at IS NULL ORDER BY id",  # noqa: S608
                (principal, BROADCAST),
            ).fetchall()
            db.execute(
                "UPDATE safety_notices SET cleared_at = ? "  # noqa: S608
                f"WHERE agent = ? AND cleared_at IS NULL AND type IN {one_shot}",
                (now, principal),
            )
            return [notice_of(r) for r in rows]

        return await self._engine.write(take)

    async def clear_notices(self, ref: str, now: float) -> int:
        return await self._engine.write(lambda db: clear_ref(db, ref, now))

    async def add_event(self, agent: str, kind: str, actor: str, detail: dict[str, Any], now: float) -> None:
        row = (now, agent, kind, actor, dumps(detail))
        await self._engine.write(
            lambda db: db.execute(
                "INSERT INTO safety_events (at, agent, kind, actor, detail) VALUES (?, ?, ?, ?, ?)", row
            )
        )
