"""The delegation policy (`auth.delegation`, docs/identity.md "Delegation"): which scopes a delegated
token (one carrying RFC 8693 `act`) may not use, and which only a delegated token may use.

The policy does not refuse tokens: it withholds scopes. A scope the token carries but may not use
as delegated (or undelegated) is taken out of the principal's scopes and named in its `withheld`,
so every place that checks scopes (the required scopes before the body is read, `auth.policy` for
tools, prompts, resources and operations) refuses a call that needs it, and only such a call, with
its usual 403 or PERMISSION_DENIED; the refusal then says delegation was the reason (docs/errors.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from aql_mcp.auth.principal import Principal, Withheld


class DelegationRules:
    def __init__(self, *, require: Iterable[str] = (), refuse: Iterable[str] = ()) -> None:
        self._require = frozenset(require)
        self._refuse = frozenset(refuse)
        self.empty = not (self._require or self._refuse)

    def apply(self, principal: Principal) -> Principal:
        """`principal` with the scopes it may not use taken out and named in `withheld`."""
        if self.empty:
            return principal
        reason: Withheld
        if principal.actors:
            taken, reason = principal.scopes & self._refuse, "refused"
        else:
            taken, reason = principal.scopes & self._require, "required"
        if not taken:
            return principal
        withheld = {scope: reason for scope in sorted(taken)}
        return dataclasses.replace(principal, scopes=principal.scopes - taken, withheld=withheld)
