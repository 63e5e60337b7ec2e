"""The gatekeeper: trust x danger gating and single-use confirmation tokens.

The matrix is MCP-AQL danger levels §4.1. A `confirm` operation without a token is
answered `CONFIRMATION_REQUIRED` with a token (MCP-AQL confirmation tokens): 128+ bits
from a CSPRNG, bound to the operation, a SHA-256 of its critical parameters, the principal and
the session, single use, expiring. Grants live in the store under the token's SHA-256, so they
survive a restart and a stolen database yields no usable token.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from aql_mcp.operations.models import TRUST_LEVELS, DangerLevel, Operation, TrustLevel
from aql_mcp.operations.results import (
    CONFIRMATION_REQUIRED,
    PERMISSION_DANGER_LEVEL_DENIED,
    TOKEN_ALREADY_USED,
    TOKEN_EXPIRED,
    TOKEN_INVALID,
    TOKEN_SCOPE_MISMATCH,
    OperationError,
)
from aql_mcp.store.confirmations import ConfirmationStore, Grant

# Rows: danger level; columns: trust level, both in increasing order (MCP-AQL danger levels §4.1).
MATRIX: Mapping[DangerLevel, tuple[str, ...]] = {
    "safe": ("introspect_only", "allow", "allow", "allow", "allow"),
    "reversible": ("deny", "deny", "allow", "allow", "allow"),
    "destructive": ("deny", "deny", "confirm", "allow", "allow"),
    "dangerous": ("deny", "deny", "deny", "confirm", "allow"),
    "forbidden": ("deny", "deny", "deny", "deny", "confirm"),
}
TOKEN_PREFIX = "conf_"  # noqa: S105 (a token prefix, not a secret)


class GateWatcher(Protocol):
    """Told of every token issued and asked before any is redeemed: the safety loop (docs/safety.md)
    records a `permission_pending` approval for a token issued during a monitored run and refuses
    the redemption until another principal approved it (§8.7.3 self-approval)."""

    async def issued(self, operation: Operation, principal: str, token_hash: str) -> None: ...
    async def redeeming(self, operation: Operation, principal: str, token_hash: str) -> None:
        """Raise `OperationError` to refuse the redemption."""
        ...

    async def may_elicit(self, principal: str) -> bool:
        """False when the person answering an elicitation could be the agent itself: the call then
        gets a token, which the watcher holds until another principal approves it (§8.7.3)."""
        ...


def behavior(operation: Operation, trust: TrustLevel) -> str:
    """allow, confirm or deny for this operation from a plugin of this trust; the matrix's
    `introspect_only` denies the call (the operation stays visible to `introspect`)."""
    verdict = MATRIX[operation.danger_level][TRUST_LEVELS.index(trust)]
    return "deny" if verdict == "introspect_only" else verdict


def minimum_trust(danger: DangerLevel) -> str:
    row = MATRIX[danger]
    return next((TRUST_LEVELS[i] for i, verdict in enumerate(row) if verdict in ("allow", "confirm")), "none")


class Gatekeeper:
    """Decides whether a call runs, and issues and redeems confirmation tokens."""

    def __init__(self, grants: ConfirmationStore, *, ttl_seconds: int, clock: Callable[[], float] = time.time) -> None:
        self._grants = grants
        self._ttl = ttl_seconds
        self._clock = clock
        self._watchers: list[GateWatcher] = []

    def watch(self, watcher: GateWatcher) -> None:
        self._watchers.append(watcher)

    async def may_elicit(self, principal: str) -> bool:
        """Whether a confirmation may be asked by elicitation: not when a watcher says no."""
        for watcher in self._watchers:
            if not await watcher.may_elicit(principal):
                return False
        return True

    def deny(self, operation: Operation, trust: TrustLevel) -> OperationError:
        danger = operation.danger_level
        return OperationError(
            PERMISSION_DANGER_LEVEL_DENIED,
            f"Operation '{operation.name}' (danger: {danger}) denied for adapter trust level '{trust}'",
            {
                "operation": operation.name,
                "danger_level": danger,
                "adapter_trust": trust,
                "minimum_trust_required": minimum_trust(danger),
                **({"reasons": list(operation.danger_reasons)} if operation.danger_reasons else {}),
            },
        )

    async def require(
        self, operation: Operation, params: Mapping[str, Any], principal: str, session: str
    ) -> OperationError:
        """A CONFIRMATION_REQUIRED error carrying a fresh token bound to this call."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        expires = self._clock() + self._ttl
        grant = Grant(operation.name, params_hash(operation, params), principal, session, expires)
        await self._grants.put_grant(token_digest(token), grant)
        for watcher in self._watchers:
            await watcher.issued(operation, principal, token_digest(token))
        expires_at = iso(expires)
        message = f"Operation '{operation.name}' is {operation.danger_level}; confirm to proceed."
        reasons = list(operation.danger_reasons)
        details: dict[str, Any] = {
            "operation": operation.name,
            "danger_level": operation.danger_level,
            "confirmation_message": message,
            "confirmation_token": token,
            "expires_at": expires_at,
        }
        confirmation: dict[str, Any] = {"token": token, "expires_at": expires_at, "message": message}
        if reasons:
            details["reasons"] = reasons
            confirmation["reasons"] = reasons
        return OperationError(
            CONFIRMATION_REQUIRED, "This operation requires confirmation", details, confirmation=confirmation
        )

    async def redeem(
        self, token: str, operation: Operation, params: Mapping[str, Any], principal: str, session: str
    ) -> None:
        """Consume the token or raise the TOKEN_* error that says why it cannot be used."""
        digest = token_digest(token)
        grant = await self._grants.get_grant(digest)
        if grant is None:
            raise OperationError(TOKEN_INVALID, "Invalid confirmation token", {"token": presented(token)})
        if grant.operation != operation.name:
            raise _mismatch(token, grant.operation, operation.name, "operation")
        if grant.params_hash != params_hash(operation, params):
            raise _mismatch(token, grant.operation, operation.name, "parameters")
        if (grant.principal, grant.session) != (principal, session):
            raise _mismatch(token, grant.operation, operation.name, "caller")
        now = self._clock()
        if now > grant.expires_at:
            raise OperationError(
                TOKEN_EXPIRED,
                "Confirmation token has expired",
                {"token": presented(token), "expired_at": iso(grant.expires_at), "current_time": iso(now)},
            )
        for watcher in self._watchers:
            await watcher.redeeming(operation, principal, digest)
        if grant.consumed_at is not None or not await self._grants.consume_grant(digest, now):
            raise OperationError(
                TOKEN_ALREADY_USED,
                "Confirmation token has already been used",
                {"token": presented(token), "consumed_at": iso(grant.consumed_at or now)},
            )


def presented(token: str) -> str:
    """The `details.token` of a TOKEN_* error: which token the caller sent, never the token itself.

    MCP-AQL's error codes (§5.9-5.12) put the presented token in the details; the corporate standard
    keeps secrets out of every response, and a response travels through gateways and client logs
    that the token must not reach (a token sent by another caller is still live for its owner). The
    last four characters are enough for a caller to tell its tokens apart (docs/aql.md).
    """
    return f"{TOKEN_PREFIX}...{token[-4:]}" if len(token) > len(TOKEN_PREFIX) + 8 else "..."


def _mismatch(token: str, granted: str, requested: str, what: str) -> OperationError:
    return OperationError(
        TOKEN_SCOPE_MISMATCH,
        "Confirmation token scope mismatch",
        {"token": presented(token), "token_operation": granted, "requested_operation": requested, "mismatch": what},
    )


def params_hash(operation: Operation, params: Mapping[str, Any]) -> str:
    """SHA-256 over the canonical JSON of the operation's critical parameters."""
    names = operation.critical if operation.critical is not None else tuple(k for k in params if k != "fields")
    critical = {name: params.get(name) for name in sorted(names)}
    body = orjson.dumps({"operation": operation.name, "params": critical}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(body).hexdigest()


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
