"""The `AutonomyDirective` on the wire (MCP-AQL §8.7.1) and its notifications (§8.7.3).

`continue` and `factors` are in every directive; the optional fields appear when they say
something. Notifications are always a list (empty when nothing happened), each with `type`,
`message`, `metadata` and an ISO 8601 `timestamp`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from aql_mcp.plugins.safety.store import BROADCAST, Notice


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def notification(notice: Notice) -> dict[str, Any]:
    return {
        "type": notice.type,
        "message": notice.message,
        "metadata": notice.metadata,
        "timestamp": iso(notice.created_at),
    }


def directive(
    *,
    proceed: bool,
    factors: Iterable[str],
    notices: Iterable[Notice],
    stopped: bool = False,
    reason: str | None = None,
    steps_remaining: int | None = None,
    risk: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"continue": proceed, "factors": list(factors) or ["No factor recorded"]}
    if stopped:
        out["stopped"] = True
    if reason is not None:
        out["reason"] = reason
    if steps_remaining is not None:
        out["stepsRemaining"] = max(steps_remaining, 0)
    if risk is not None:
        out["nextStepRisk"] = risk
    out["notifications"] = [notification(n) for n in _own_first(list(notices))]
    return {**out, **(extra or {})}


def _own_first(notices: list[Notice]) -> list[Notice]:
    """A hard block is announced twice: in full to the blocked agent, neutrally to everyone
    (verification.py). The blocked agent gets its own copy only."""
    own = {n.ref for n in notices if n.agent != BROADCAST and n.ref is not None}
    return [n for n in notices if n.agent != BROADCAST or n.ref not in own]
