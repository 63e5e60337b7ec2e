"""`SafetyStore` on SQLite: each method one transaction on the writer (or one read)."""

from __future__ import annotations

import sqlite3
from typing import Any

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
from aql_mcp.store.sqlite.engine import SqliteEngine

RUN = RUN_COLUMNS
CHALLENGE = CHALLENGE_COLUMNS
BLOCK = BLOCK_COLUMNS
APPROVAL = APPROVAL_COLUMNS
NOTICE = NOTICE_COLUMNS
EVENT = EVENT_COLUMNS
LIVE_SQL = "(" + ", ".join(f"'{status}'" for status in LIVE_RUNS) + ")"


def _resume(db: sqlite3.Connection, run_id: str, now: float) -> None:
    db.execute(
        "UPDATE safety_runs SET status = 'running', reason = NULL, updated_at = ? "
        "WHERE id = ? AND status IN ('paused', 'blocked')",
        (now, run_id),
    )


def _clear(db: sqlite3.Connection, ref: str, now: float) -> int:
    return int(
        db.execute("UPDATE safety_notices SET cleared_at = ? WHERE ref = ? AND cleared_at IS NULL", (now, ref)).rowcount
    )


class SqliteSafetyStore:
    """`SafetyStore` on the service's SQLite engine."""

    def __init__(self, engine: SqliteEngine) -> None:
        self._engine = engine

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
        ended = now if status in ("completed", "aborted") else None
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

    async def live_runs(self) -> list[AgentRun]:
        rows = await self._engine.read(
            lambda db: db.execute(
                f"SELECT {RUN} FROM safety_runs WHERE status IN {LIVE_SQL} ORDER BY started_at"  # noqa: S608
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

    # Challenges and blocks

    async def open_challenge(self, challenge: Challenge, *, block: Block | None = None) -> None:
        def put(db: sqlite3.Connection) -> None:
            _insert_challenge(db, challenge)
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
            _insert_challenge(db, fresh)
            return True

        return await self._engine.write(renew)

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
            _clear(db, challenge.id, now)
            _resume(db, challenge.run_id, now)
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
            _clear(db, challenge_id, now)
            if replacement is not None:
                _insert_challenge(db, replacement)
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
                    _clear(db, challenge.id, now)
                    _resume(db, challenge.run_id, now)
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
            _clear(db, block.challenge_id, now)
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
            _clear(db, approval.id, now)
            if status == "approved":
                _resume(db, approval.run_id, now)
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
        return await self._engine.write(lambda db: _clear(db, ref, now))

    async def add_event(self, agent: str, kind: str, actor: str, detail: dict[str, Any], now: float) -> None:
        row = (now, agent, kind, actor, dumps(detail))
        await self._engine.write(
            lambda db: db.execute(
                "INSERT INTO safety_events (at, agent, kind, actor, detail) VALUES (?, ?, ?, ?, ?)", row
            )
        )


def _insert_challenge(db: sqlite3.Connection, c: Challenge) -> None:
    db.execute(
        f"INSERT INTO safety_challenges ({CHALLENGE}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
        challenge_row(c),
    )
