"""Reading who a token stands for out of its claims: subject, tenant, scopes and the actor chain.

IdPs name these differently (Entra: `oid`, `tid`, `scp` or `roles`; Okta: `sub`, a custom tenant
claim, `scp`; Keycloak: `sub`, `realm_access.roles`), so each trusted issuer has a `ClaimMapping`
(docs/identity.md, "Claim mapping"). A claim path names a top-level claim as written; only when the
token has no claim of that exact name do its dots separate nested names (`realm_access.roles`),
so a URL-shaped claim name such as `https://example.com/tenant` still works.

The actor chain is RFC 8693 §4.1's `act`: the current actor outermost, each earlier one nested in
its `act`. A malformed `act` makes the whole token invalid rather than undelegated: a policy that
refuses delegated tokens must not be passed by a token that spells `act` badly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aql_mcp.auth.principal import Principal
from aql_mcp.exceptions import InvalidToken

# How deep an `act` chain may nest; real delegation chains are one or two links long.
MAX_ACTORS = 8
_ABSENT = object()


def claim_at(claims: Mapping[str, Any], path: str) -> Any:
    """The value at `path` (a claim name, else dotted nested names); None when there is none."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for name in path.split("."):
        value = value.get(name, _ABSENT) if isinstance(value, Mapping) else _ABSENT
        if value is _ABSENT:
            return None
    return value


def scopes_of(value: Any) -> frozenset[str]:
    """Scopes from a space-separated string (`scope`, RFC 8693 §4.2) or a list of strings (`scp`, `roles`)."""
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list):
        return frozenset(str(s) for s in value)
    return frozenset()


def actors_of(claims: Mapping[str, Any]) -> tuple[str, ...]:
    """The `act` chain's subjects, current actor first (RFC 8693 §4.1); InvalidToken when malformed."""
    chain: list[str] = []
    act = claims.get("act")
    while act is not None:
        subject = act.get("sub") if isinstance(act, Mapping) else None
        if not isinstance(subject, str) or not subject or len(chain) == MAX_ACTORS:
            raise InvalidToken()
        chain.append(subject)
        act = act.get("act")
    return tuple(chain)


@dataclass(frozen=True, slots=True)
class ClaimMapping:
    """Where one issuer puts the subject, the tenant and the scopes; `scopes` are tried in order and
    the first path the token carries gives them. `namespace` is the issuer a listed entry qualifies
    its subjects with (auth/principal.py); None for the single-issuer settings."""

    subject: str = "sub"
    tenant: str | None = None
    scopes: tuple[str, ...] = ("scope", "scp")
    namespace: str | None = None

    def principal(self, claims: dict[str, Any], *, expires_at: float | None) -> Principal:
        subject = claim_at(claims, self.subject)
        if not isinstance(subject, str) or not subject:
            raise InvalidToken()
        tenant = claim_at(claims, self.tenant) if self.tenant else None
        found = next((v for path in self.scopes if (v := claim_at(claims, path)) is not None), None)
        return Principal(
            subject=subject,
            scopes=scopes_of(found),
            expires_at=expires_at,
            claims=claims,
            tenant=tenant if isinstance(tenant, str) and tenant else None,
            actors=actors_of(claims),
            issuer=self.namespace,
        )


# The single-issuer settings: `sub`, and `scope` or else `scp`, as before there were several issuers.
DEFAULT_MAPPING = ClaimMapping()
# An RFC 7662 answer names its scopes `scope` (§2.2).
INTROSPECTION_MAPPING = ClaimMapping(scopes=("scope",))
