"""Who is calling: the verified identity a token stands for."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ANONYMOUS = "anonymous"
# Why the delegation policy (`auth.delegation`) withholds a scope the token carries.
# `refused`: the scope may not be used by a delegated token; `required`: only by a delegated one.
Withheld = Literal["refused", "required"]


def subject_digest(subject: str) -> str:
    """A stable, non-reversible id of a subject for logs and session ownership."""
    return hashlib.sha256(subject.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Principal:
    """A verified caller. `subject` is the token's subject (`sub`, or the claim its issuer's mapping
    names); never log it raw, log `digest`.

    `digest` is computed once, when the principal is built: the verified-token cache hands the same
    principal to every request of a token, and the rate limiter, the session owner check and the
    call log all read it.

    `issuer` is set for a caller of an `auth.issuers` entry: a subject is unique only within its
    issuer (OpenID Connect Core §2), so such a caller's digest and records owner are qualified by it
    and two issuers' `alice` never share a session, a rate budget or records (docs/identity.md). The
    single-issuer settings leave it None, which keeps their digests and owners as they were.
    `actors` is the RFC 8693 `act` chain, current actor first; `withheld` the scopes the token
    carries that the delegation policy took away, and why.
    """

    subject: str
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    claims: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    tenant: str | None = None
    actors: tuple[str, ...] = ()
    issuer: str | None = None
    withheld: Mapping[str, Withheld] = field(default_factory=dict, compare=False, repr=False)
    digest: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", subject_digest(self.qualified(self.subject)))

    def qualified(self, name: str) -> str:
        """`name` (a subject, an actor, a tenant) as unique across issuers: `issuer#name` for a listed
        issuer (an issuer has no fragment, RFC 8414 §2, so `#` cannot be forged into it)."""
        return name if self.issuer is None else f"{self.issuer}#{name}"

    @property
    def actor_digests(self) -> tuple[str, ...]:
        """The actor chain as digests, current actor first: what logs, audit lines and spans carry."""
        return tuple(subject_digest(self.qualified(actor)) for actor in self.actors)


def withheld_reason(principal: Principal | None, missing: tuple[str, ...]) -> Withheld | None:
    """Why the token lacks `missing` when it carries one of them but the delegation policy withheld it."""
    if principal is None or not principal.withheld:
        return None
    return next((principal.withheld[scope] for scope in missing if scope in principal.withheld), None)


def principal_key(principal: Principal | None) -> str:
    """Whose something is (a rate bucket, a task, a request state, a safety run): the principal's
    digest, never its subject; every caller without a token shares the key `anonymous`."""
    return principal.digest if principal is not None else ANONYMOUS


def tenant_key(principal: Principal, claim: str) -> str | None:
    """Whose records `principal` works on (`records.tenant_claim`, docs/identity.md "Tenants").

    `sub` (the default): the subject itself. Any other claim: the tenant the caller's issuer maps
    (`auth.issuers[].claims.tenant`) when it maps one, else the named claim. None when there is none.
    """
    if claim == "sub":
        value: Any = principal.subject
    elif principal.tenant is not None:
        value = principal.tenant
    else:
        value = principal.claims.get(claim)
    return principal.qualified(value) if isinstance(value, str) and value else None
