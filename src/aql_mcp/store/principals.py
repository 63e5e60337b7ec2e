"""Who a principal key stands for, for the humans who decide (docs/safety.md, "Whose agent it is";
issue 27, N8).

The safety loop keys everything by `Principal.digest`, which an operator cannot read, and the agent
names itself (`element_name`), so two callers can pick the same name. When a principal starts a
monitored execution its subject (the token's `sub`) and its records tenant are remembered here
under its digest, and the operator console shows them beside the agent's name. Never a token.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Identity:
    """A principal as an operator sees it: `tenant` only when it is not the subject itself."""

    principal: str
    subject: str
    tenant: str | None = None


class PrincipalDirectory(Protocol):
    async def remember(self, identity: Identity, now: float) -> None:
        """Record (or refresh) who `identity.principal` is."""
        ...

    async def identities(self, principals: Collection[str]) -> dict[str, Identity]:
        """The known identities among these principal keys; the unknown ones are left out."""
        ...
