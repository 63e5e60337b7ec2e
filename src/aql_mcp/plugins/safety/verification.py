"""Out-of-band verification (MCP-AQL §8.8): challenges, their codes, expiry and the failure window.

- A code is `secrets.token_urlsafe(24)`: 192 bits from the operating system's CSPRNG (§8.8.2 asks
  for at least 128), unrelated to any id or time. It is written to the store's challenge row and
  read from there by the operator console only; no MCP response, error, `_meta` or log line carries
  it (§8.8.4). The agent gets the challenge id, a UUID v4.
- Codes are compared in constant time (`hmac.compare_digest`).
- A challenge is answered once: the right code verifies it, a wrong one fails it (§8.8.2 "the code
  is invalidated") and, while the agent stays held, a fresh challenge replaces it at once so the
  operator can try again with the new code the console shows.
- A challenge past its expiry (`safety.challenge_ttl_seconds`, 5 minutes by default) is failed and
  counted like a wrong code (§8.8.2 "Expired challenges MUST be treated as failed").
- Failures are counted per agent principal in a sliding window (`safety.max_failed_verifications`
  per `safety.failure_window_seconds`, §8.8.5) in the store, so every replica and a restart see them.
"""

from __future__ import annotations

import hmac
import secrets
import uuid

from aql_mcp.builtin_sections import SafetySettings
from aql_mcp.plugins.safety.journal import Journal
from aql_mcp.plugins.safety.store import BROADCAST, AgentRun, Block, Challenge, ChallengeTier, SafetyStore

CODE_BYTES = 24  # 192 bits


def new_code() -> str:
    return secrets.token_urlsafe(CODE_BYTES)


def codes_match(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def holds_agent(tier: ChallengeTier) -> bool:
    """`danger_zone` and `deny` block the agent (persisted, §8.8.3); `verify` only pauses the run."""
    return tier != "verify"


class Verification:
    """Raising challenges and the notices that announce them; stateless over the store."""

    def __init__(self, store: SafetyStore, settings: SafetySettings, journal: Journal) -> None:
        self._store = store
        self._settings = settings
        self._journal = journal

    def challenge_for(
        self, *, agent: str, run_id: str, principal: str, tier: ChallengeTier, action: str, reason: str, now: float
    ) -> Challenge:
        return Challenge(
            id=str(uuid.uuid4()),
            agent=agent,
            run_id=run_id,
            principal=principal,
            tier=tier,
            action=action,
            reason=reason,
            code=new_code(),
            status="pending",
            created_at=now,
            expires_at=now + self._settings.challenge_ttl_seconds,
        )

    async def raise_for(self, run: AgentRun, tier: ChallengeTier, action: str, reason: str, now: float) -> Challenge:
        """A new challenge for the run's agent; a hard block (kept per principal) for `danger_zone`
        and `deny`, and the notices that carry its id (§8.8.1)."""
        challenge = self.challenge_for(
            agent=run.agent, run_id=run.id, principal=run.principal, tier=tier, action=action, reason=reason, now=now
        )
        block = Block(run.agent, challenge.id, reason, now, run.principal) if holds_agent(tier) else None
        await self._store.open_challenge(challenge, block=block)
        await self.announce(challenge, now)
        await self._journal.record(
            run.agent, "challenge_raised", run.principal, now, challenge=challenge.id, tier=tier, run=run.id
        )
        return challenge

    async def announce(self, challenge: Challenge, now: float) -> None:
        """`danger_zone` for a hard block, `autonomy_pause` to the agent for a `verify` pause; both
        with the challenge id as `verificationId` (§8.7.3). The blocked agent's notice says what it
        did and why; the broadcast to every other executing agent says only that an agent is
        blocked: another principal (another tenant) must not learn its name, action or reason."""
        metadata = {"reason": challenge.reason, "verificationId": challenge.id, "operation": challenge.action}
        if holds_agent(challenge.tier):
            message = f"Agent '{challenge.agent}' is hard-blocked until out-of-band verification"
            await self._store.add_notice(challenge.principal, "danger_zone", message, metadata, now, ref=challenge.id)
            neutral = "Another agent is hard-blocked until out-of-band verification"
            await self._store.add_notice(
                BROADCAST, "danger_zone", neutral, {"verificationId": challenge.id}, now, ref=challenge.id
            )
        else:
            message = "Execution paused until out-of-band verification of the next action"
            await self._store.add_notice(
                challenge.principal, "autonomy_pause", message, metadata, now, ref=challenge.id
            )

    async def replace(self, old: Challenge, actor: str, now: float) -> Challenge:
        """Fail `old` and put a fresh challenge in its place (same agent, tier and action)."""
        fresh = self.challenge_for(
            agent=old.agent,
            run_id=old.run_id,
            principal=old.principal,
            tier=old.tier,
            action=old.action,
            reason=old.reason,
            now=now,
        )
        if await self._store.fail_challenge(old.id, actor, now, replacement=fresh):
            await self.announce(fresh, now)
            return fresh
        return old

    async def renew_block(self, block: Block, now: float) -> Challenge | None:
        """The block's challenge is no longer answerable (expired, failed, refused): a new one, so the
        block can still be lifted; the block itself stays (§8.8.3). The page and the stream of the
        console call this on every replica: the block is re-pointed only if it still holds the old
        challenge, so two replicas racing leave one pending challenge, not two. None: the block was
        lifted since it was read (docs/safety.md, "Races")."""
        current = await self._store.get_challenge(block.challenge_id)
        if current is not None and current.status == "pending" and current.expires_at > now:
            return current
        run_id = current.run_id if current else ""
        fresh = self.challenge_for(
            agent=block.agent,
            run_id=run_id,
            principal=block.principal,
            tier=current.tier if current else "deny",
            action=current.action if current else "",
            reason=block.reason,
            now=now,
        )
        if not await self._store.renew_block(block.challenge_id, fresh):
            # Another replica renewed it (use what it put there), or an operator lifted it meanwhile.
            latest = await self._store.get_block(block.principal)
            return await self._store.get_challenge(latest.challenge_id) if latest is not None else None
        if current is not None and await self._store.fail_challenge(current.id, "expiry", now):
            await self._store.note_failure(current.principal, now, self._settings.failure_window_seconds)
        await self.announce(fresh, now)
        await self._journal.record(block.agent, "challenge_renewed", block.principal, now, challenge=fresh.id)
        return fresh
