"""What a human operator can do about the safety loop, wherever they do it (MCP-AQL §8.7.3, §8.8).

The operator console (`/console`) and the safety plugin's `confirm_operation` / `verify_challenge`
(called by another principal holding the operator scope) both go through an `OperatorDesk`, so the
rules are the same on every path: never the blocked agent's own principal (self-approval,
§8.7.3), a challenge used once, expired challenges refused, failed codes counted per agent.
A refusal raises `OperationError` with the MCP-AQL code that says why; every decision is written to
the store's audit trail with the operator who made it.
"""

from __future__ import annotations

from typing import Protocol

from aql_mcp.store.safety import SafetyOverview


class OperatorDesk(Protocol):
    async def overview(self) -> SafetyOverview: ...
    async def approve(self, approval_id: str, operator: str) -> None: ...
    async def deny(self, approval_id: str, operator: str) -> None: ...
    async def verify(self, challenge_id: str, code: str, operator: str) -> None:
        """Check the code; the right one unblocks or resumes the agent, a wrong one is counted."""
        ...

    async def reject(self, challenge_id: str, operator: str) -> None:
        """The operator refuses: the challenge ends `failed` and a hard block stays."""
        ...
