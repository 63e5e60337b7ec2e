"""Who is calling: the verified identity a token stands for."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Principal:
    """A verified caller. `subject` is the token's `sub`; never log it raw, log `digest`."""

    subject: str
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    claims: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def digest(self) -> str:
        """A stable, non-reversible id of the subject for logs and session ownership."""
        return hashlib.sha256(self.subject.encode("utf-8")).hexdigest()[:16]
