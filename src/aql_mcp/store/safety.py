"""The execution safety loop's state, kept in the store (MCP-AQL §8.6-8.8; docs/safety.md).

Everything a human decision depends on lives here, so that a challenge raised on one replica can be
answered on the operator console served by another and seen by the agent polling a third:

- `AgentRun`: one monitored execution started by `execute_agent` for an agent (`element_name`);
- `Challenge`: an out-of-band verification (verify tier, danger zone, deny pattern). Its code is
  stored so every replica's console can show it; it never leaves the store through an MCP path;
- `Block`: a hard block of an agent (not of a run), persisted until a challenge is verified or an
  operator overrides it, so a restart or a new run does not lift it (§8.8.3);
- `Approval`: something waiting for a human yes/no (a `confirm` tier pause, a gatekeeper
  confirmation during a run), decided by `confirm_operation` from another principal or the console;
- `Notice`: a pull-based notification (§8.7.3) for one agent, or for every executing agent
  (`agent == BROADCAST`), delivered in the next directive until cleared;
- `SafetyEvent`: the audit trail of decisions (denials, pauses, verifications, console actions),
  which the console shows as "recent".

Every method is one transaction on both engines; a conditional update (a challenge used once, an
approval decided once) is decided inside the engine, so two replicas racing cannot both win.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

BROADCAST = "*"

RunStatus = Literal["running", "paused", "blocked", "completed", "aborted"]
ChallengeTier = Literal["verify", "danger_zone", "deny"]
ChallengeStatus = Literal["pending", "verified", "failed", "expired"]
ApprovalKind = Literal["autonomy_pause", "permission_pending"]
ApprovalStatus = Literal["pending", "approved", "denied"]


@dataclass(slots=True)
class AgentRun:
    id: str
    agent: str
    principal: str
    session: str | None
    status: RunStatus
    steps: int
    started_at: float
    updated_at: float
    ended_at: float | None = None
    last_action: str | None = None
    reason: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Challenge:
    id: str
    agent: str
    run_id: str
    principal: str
    tier: ChallengeTier
    action: str
    reason: str
    code: str
    status: ChallengeStatus
    created_at: float
    expires_at: float
    decided_at: float | None = None
    decided_by: str | None = None


@dataclass(slots=True)
class Block:
    agent: str
    challenge_id: str
    reason: str
    created_at: float


@dataclass(slots=True)
class Approval:
    id: str
    agent: str
    run_id: str
    principal: str
    kind: ApprovalKind
    action: str
    reason: str
    status: ApprovalStatus
    created_at: float
    decided_at: float | None = None
    decided_by: str | None = None
    token_hash: str | None = None


@dataclass(slots=True)
class Notice:
    id: int
    agent: str
    type: Literal["permission_pending", "autonomy_pause", "danger_zone", "status", "error"]
    message: str
    metadata: dict[str, Any]
    created_at: float
    cleared_at: float | None = None


@dataclass(slots=True)
class SafetyEvent:
    id: int
    at: float
    agent: str
    kind: str
    actor: str
    detail: dict[str, Any]


@dataclass(slots=True)
class SafetyOverview:
    """What the operator console shows: live runs, pending approvals and challenges (with their
    codes), current blocks and the most recent events, newest first."""

    runs: list[AgentRun]
    approvals: list[Approval]
    challenges: list[Challenge]
    blocks: list[Block]
    events: list[SafetyEvent]


class SafetyStore(Protocol):
    """The facet behind the `safety` plugin and the operator console (methods added with them)."""

    async def overview(self, now: float, *, recent: int = 50) -> SafetyOverview: ...
