"""Audit events: every mutation, gate decision and confirmation-token event, on its own logger.

An event names its type, the operation, the caller's principal digest, the resource id and the
outcome; never a parameter value (corporate standard: no secrets or payloads in logs). A call made
on a delegated token (RFC 8693 `act`) adds `actors`: the digests of its actor chain, current actor
first, as the principal is a digest (docs/identity.md, "Delegation").
"""

from __future__ import annotations

from typing import Any

import structlog

AUDIT_LOGGER = "aql_mcp.audit"


class AuditLog:
    def __init__(self) -> None:
        self._log = structlog.get_logger(AUDIT_LOGGER)

    def event(
        self,
        kind: str,
        *,
        operation: str,
        principal: str,
        outcome: str,
        resource_id: str | None = None,
        code: str | None = None,
        actors: tuple[str, ...] = (),
    ) -> None:
        fields: dict[str, Any] = {"audit": kind, "operation": operation, "principal": principal, "outcome": outcome}
        if actors:
            fields["actors"] = list(actors)
        if resource_id is not None:
            fields["resource_id"] = resource_id
        if code is not None:
            fields["code"] = code
        self._log.info("audit_event", **fields)
