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

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

from aql_mcp.plugin import Identity

BROADCAST = "*"
# Runs still inside the loop: what a danger_zone broadcast reaches and what the console lists.
LIVE_RUNS = ("running", "paused", "blocked")
# Notices delivered once (the rest stay until what they announce is resolved, §8.7.3).
ONE_SHOT = ("status", "error")

RunStatus = Literal["running", "paused", "blocked", "completed", "aborted", "cancelled"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
# The states a run ends in (MCP-AQL §8.4.2 terminal states): nothing moves a run out of one.
ENDED_RUNS: tuple[RunStatus, ...] = ("completed", "aborted", "cancelled")
# What `set_run_status` allows (docs/safety.md, "Agent runs and the execution lifecycle"): a live run
# may move to any state, its own included (a new reason); an ended one to none. Which of these a
# caller may ask for is the loop's to decide (a hard-blocked agent cannot complete, say).
RUN_TRANSITIONS: frozenset[tuple[RunStatus, RunStatus]] = frozenset(
    (source, target) for source in RUN_STATUSES if source in LIVE_RUNS for target in RUN_STATUSES
)
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
    """A hard block. It is keyed by `principal` (the caller's stable identity, `Principal.digest`):
    `agent` is the element name the agent gave itself, kept for display only, so neither a new
    execution nor a new name escapes it (§8.8.3, docs/safety.md)."""

    agent: str
    challenge_id: str
    reason: str
    created_at: float
    principal: str = ""


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
    used_at: float | None = None


@dataclass(slots=True)
class Notice:
    """`agent` is the recipient: a principal key (`Principal.digest`) or `BROADCAST`; `ref` is the
    challenge or approval the notice is about, which clears it when resolved."""

    id: int
    agent: str
    type: Literal["permission_pending", "autonomy_pause", "danger_zone", "status", "error"]
    message: str
    metadata: dict[str, Any]
    created_at: float
    cleared_at: float | None = None
    ref: str | None = None


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
    codes), current blocks and the most recent events, newest first; and who the principals of
    those rows are, where known (store/principals.py; the desk fills it in)."""

    runs: list[AgentRun]
    approvals: list[Approval]
    challenges: list[Challenge]
    blocks: list[Block]
    events: list[SafetyEvent]
    identities: dict[str, Identity] = field(default_factory=dict)

    def principals(self) -> set[str]:
        """The principal keys the rows an operator decides on belong to."""
        rows: list[AgentRun | Approval | Challenge | Block] = [*self.runs, *self.approvals, *self.challenges]
        return {row.principal for row in [*rows, *self.blocks]}


class SafetyStore(Protocol):
    """The facet behind the `safety` plugin and the operator console. Every method is one
    transaction; the conditional ones (a challenge or an approval decided once, a run that ended
    stays ended) decide inside the engine and report whether they won."""

    async def overview(self, now: float, *, recent: int = 50) -> SafetyOverview:
        """Live runs, pending approvals, pending unexpired challenges, blocks, the newest events."""
        ...

    # Runs
    async def start_run(self, run: AgentRun) -> None: ...
    async def get_run(self, run_id: str) -> AgentRun | None: ...
    async def count_step(self, run_id: str, action: str, now: float) -> AgentRun | None:
        """One more step of a live run, its action remembered; None if the run is not live."""
        ...

    async def set_run_status(self, run_id: str, status: RunStatus, now: float, *, reason: str | None = None) -> bool:
        """Move a live run to `status` (`RUN_TRANSITIONS`; `completed`, `aborted` and `cancelled`
        end it); False if it had ended."""
        ...

    async def list_runs(self, principal: str, statuses: Collection[RunStatus] | None, limit: int) -> list[AgentRun]:
        """The principal's runs in any state (only in `statuses` when given), newest first by
        `(started_at, id)`, at most `limit` (`list_executions`)."""
        ...

    async def live_runs(self, principal: str) -> list[AgentRun]:
        """The principal's live runs, oldest first (the `(status, principal)` index serves it)."""
        ...

    async def reset_steps(self, run_id: str, now: float) -> bool:
        """An operator let a run past its step limit: its count starts again."""
        ...

    # Challenges and blocks
    async def open_challenge(self, challenge: Challenge, *, block: Block | None = None) -> None:
        """Store the challenge and, for a hard block, put the block (replacing the principal's
        previous one) in the same transaction."""
        ...

    async def renew_block(self, old_challenge_id: str, fresh: Challenge) -> bool:
        """Point the block held by `old_challenge_id` at `fresh` and store `fresh`, in one
        transaction and only if the block still holds the old one: of two replicas renewing the
        same block, one wins; the loser stores nothing and reads the winner's challenge."""
        ...

    async def block_run(self, run_id: str, principal: str, reason: str, now: float) -> bool:
        """Whether the principal's block still holds; if so, a live run marked `blocked` in the same
        transaction, the block's row held, so a lift committed after the block was read stands."""
        ...

    async def get_challenge(self, challenge_id: str) -> Challenge | None: ...
    async def pending_challenge(self, principal: str, now: float) -> Challenge | None:
        """The principal's newest challenge still pending and unexpired."""
        ...

    async def pass_challenge(self, challenge_id: str, operator: str, now: float) -> Challenge | None:
        """The right code: `verified` if still pending and unexpired, the block it holds lifted, its
        notices cleared and its run resumed, all at once. None if someone else decided it first."""
        ...

    async def fail_challenge(
        self, challenge_id: str, operator: str, now: float, *, replacement: Challenge | None = None
    ) -> bool:
        """A wrong code or a refusal: `failed` if still pending (`expired` if past its expiry), its
        notices cleared; with `replacement`, the new challenge takes over the block. False if it had
        been decided already."""
        ...

    async def expire_challenges(self, now: float) -> list[Challenge]:
        """Mark pending challenges past their expiry `expired` and return them; a `verify` pause
        lifts with its challenge (notices cleared, run resumed), a block stays (§8.8.3)."""
        ...

    async def get_block(self, principal: str) -> Block | None: ...
    async def lift_block(self, principal: str, operator: str, now: float) -> Block | None:
        """An operator's override: the block removed, its challenge `failed`, its notices cleared."""
        ...

    async def note_failure(self, principal: str, now: float, window: float) -> int:
        """Count a failed verification; return the principal's failures within the last `window`
        seconds, this one included (older ones are forgotten)."""
        ...

    async def failures(self, principal: str, since: float) -> int: ...
    async def claim_attempt(self, principal: str, now: float, window: float, limit: int) -> int | None:
        """Before a code is compared: count the attempt as a failure and return the count within
        the window, this one included, or None (nothing counted) when `limit` failures are there
        already. Checked and counted in one transaction, so concurrent guesses cannot all pass the
        check before any is counted (§8.8.5)."""
        ...

    async def forgive_attempt(self, principal: str, at: float) -> None:
        """Take back the attempt claimed at `at`: the code was right."""
        ...

    # Approvals
    async def open_approval(self, approval: Approval) -> None: ...
    async def get_approval(self, approval_id: str) -> Approval | None: ...
    async def find_approval(self, principal: str, action: str, kind: ApprovalKind) -> Approval | None:
        """The principal's newest unused approval for this action, pending or decided."""
        ...

    async def pending_approvals(self, principal: str) -> list[Approval]:
        """The principal's approvals still waiting for a decision, oldest first."""
        ...

    async def approval_by_token(self, token_hash: str) -> Approval | None:
        """The `permission_pending` approval recorded for a gatekeeper token, whatever its status."""
        ...

    async def decide_approval(
        self, approval_id: str, status: ApprovalStatus, operator: str, now: float
    ) -> Approval | None:
        """`approved` or `denied` if still pending, its notices cleared and (approved) its run
        resumed; None if it had been decided already."""
        ...

    async def use_approval(self, approval_id: str, now: float) -> bool:
        """A decision is applied once (an approved action taken, a denied one refused): False if it
        was used already or is still pending."""
        ...

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
    ) -> int: ...
    async def take_notices(self, principal: str, now: float) -> list[Notice]:
        """The uncleared notices for the principal and the broadcasts, oldest first; the one-shot
        ones (`status`, `error`) addressed to the principal are cleared by this delivery."""
        ...

    async def clear_notices(self, ref: str, now: float) -> int: ...
    async def add_event(self, agent: str, kind: str, actor: str, detail: dict[str, Any], now: float) -> None: ...
