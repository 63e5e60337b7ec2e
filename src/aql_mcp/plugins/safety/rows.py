"""The safety loop's records as table rows (docs/safety.md): the columns both engines select, in the
order of the dataclasses' fields in store.py, and the conversions between a row and a record."""

from __future__ import annotations

from typing import Any

import orjson

from aql_mcp.plugins.safety.store import AgentRun, Approval, Challenge, Notice, SafetyEvent

# Column lists both engines select, in the order of the dataclasses' fields.
RUN_COLUMNS = (
    "id, agent, principal, session, status, steps, started_at, updated_at, ended_at, last_action, reason, settings"
)
CHALLENGE_COLUMNS = (
    "id, agent, run_id, principal, tier, action, reason, code, status, created_at, expires_at, decided_at, decided_by"
)
BLOCK_COLUMNS = "agent, challenge_id, reason, created_at, principal"
APPROVAL_COLUMNS = (
    "id, agent, run_id, principal, kind, action, reason, status, created_at, decided_at, decided_by, token_hash, "
    "used_at"
)
NOTICE_COLUMNS = "id, agent, type, message, metadata, created_at, cleared_at, ref"
EVENT_COLUMNS = "id, at, agent, kind, actor, detail"


def run_of(row: Any) -> AgentRun:
    return AgentRun(
        id=row[0],
        agent=row[1],
        principal=row[2],
        session=row[3],
        status=row[4],
        steps=int(row[5]),
        started_at=row[6],
        updated_at=row[7],
        ended_at=row[8],
        last_action=row[9],
        reason=row[10],
        settings=loads(row[11]),
    )


def run_row(run: AgentRun) -> tuple[Any, ...]:
    return (
        run.id,
        run.agent,
        run.principal,
        run.session,
        run.status,
        run.steps,
        run.started_at,
        run.updated_at,
        run.ended_at,
        run.last_action,
        run.reason,
        dumps(run.settings),
    )


def challenge_row(c: Challenge) -> tuple[Any, ...]:
    return (
        c.id,
        c.agent,
        c.run_id,
        c.principal,
        c.tier,
        c.action,
        c.reason,
        c.code,
        c.status,
        c.created_at,
        c.expires_at,
        c.decided_at,
        c.decided_by,
    )


def approval_row(a: Approval) -> tuple[Any, ...]:
    return (
        a.id,
        a.agent,
        a.run_id,
        a.principal,
        a.kind,
        a.action,
        a.reason,
        a.status,
        a.created_at,
        a.decided_at,
        a.decided_by,
        a.token_hash,
        a.used_at,
    )


def notice_of(row: Any) -> Notice:
    return Notice(row[0], row[1], row[2], row[3], loads(row[4]), row[5], row[6], row[7])


def event_of(row: Any) -> SafetyEvent:
    return SafetyEvent(row[0], row[1], row[2], row[3], row[4], loads(row[5]))


def dumps(value: dict[str, Any]) -> bytes:
    return orjson.dumps(value)


def loads(value: bytes | None) -> dict[str, Any]:
    loaded = orjson.loads(value) if value else {}
    return loaded if isinstance(loaded, dict) else {}
