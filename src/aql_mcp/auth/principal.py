"""Who is calling: the verified identity a token stands for."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

ANONYMOUS = "anonymous"


def subject_digest(subject: str) -> str:
    """A stable, non-reversible id of a subject for logs and session ownership."""
    return hashlib.sha256(subject.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Principal:
    """A verified caller. `subject` is the token's `sub`; never log it raw, log `digest`.

    `digest` is computed once, when the principal is built: the verified-token cache hands the same
    principal to every request of a token, and the rate limiter, the session owner check and the
    call log all read it.
    """

    subject: str
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    claims: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    digest: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", subject_digest(self.subject))


def principal_key(principal: Principal | None) -> str:
    """Whose something is (a rate bucket, a task, a request state, a safety run): the principal's
    digest, never its subject; every caller without a token shares the key `anonymous`."""
    return principal.digest if principal is not None else ANONYMOUS
