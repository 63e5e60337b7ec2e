"""The safety loop's audit trail: every decision as a `SafetyEvent` in the store (the console lists
the recent ones), as one structured log line and, given the service's audit log, as a `safety`
record of its tamper-evident trail (docs/audit.md).

Neither ever carries a verification code (§8.8.4): callers pass ids, tiers, reasons and counts only,
and `detail` is checked here so a slip would fail loudly in the tests instead of reaching a log.
"""

from __future__ import annotations

from typing import Any

import structlog

from aql_mcp.plugin import AuditLog
from aql_mcp.plugins.safety.store import SafetyStore

SAFETY_LOGGER = "aql_mcp.safety"
# Keys a detail may never carry: the code lives in the store's challenge row and nowhere else.
FORBIDDEN = frozenset({"code", "verification_code", "secret"})
# The detail naming what a decision is about, in the order a record's `resource_id` prefers them.
SUBJECTS = ("challenge", "approval", "run")
# Words in an event's kind that make its record's outcome `refused` (docs/audit.md, "What is recorded").
REFUSALS = ("refused", "rejected", "denied")


class Journal:
    def __init__(self, store: SafetyStore, audit: AuditLog | None = None) -> None:
        self._store = store
        self._audit = audit
        self._log = structlog.get_logger(SAFETY_LOGGER)

    async def record(self, agent: str, kind: str, actor: str, now: float, **detail: Any) -> None:
        if FORBIDDEN & detail.keys():
            raise ValueError("a safety event never carries a verification code")
        await self._store.add_event(agent, kind, actor, detail, now)
        self._log.info("safety_event", safety=kind, agent=agent, actor=actor, **detail)
        if self._audit is not None:
            about = next((str(detail[key]) for key in SUBJECTS if key in detail), agent)
            outcome = "refused" if any(word in kind for word in REFUSALS) else "ok"
            await self._audit.record("safety", operation=kind, principal=actor, outcome=outcome, resource_id=about)
