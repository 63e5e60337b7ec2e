"""Audit events: every mutation, gate decision and confirmation-token event, on its own logger and,
when the log has a trail, as a record of the store's audit trail (docs/audit.md).

An event names its type, the operation, the caller's principal digest, the resource id and the
outcome; never a parameter value (corporate standard: no secrets or payloads in logs), only the
parameters' digest. A call made on a delegated token (RFC 8693 `act`) adds `actors`: the digests of
its actor chain, current actor first, as the principal is a digest (docs/identity.md, "Delegation").
The record adds what the request's log context and its tools/call know: request id, trace id, era
and tool; with the caller's `Principal` given, its tenant (and its subject, under
`audit.subject: clear`).

How to record a decision (docs/audit.md, "Recording a decision"): `await log.record(...)` from async
code, which returns once the record is durable (a write's reply waits for it); `log.event(...)` from
code that cannot wait; `log.read(...)` for a successful read, recorded only under `audit.reads` and
dropped when the queue is full; `log.offer(...)` for a decision that can come in floods (a rate-limit
refusal, an authentication failure), dropped the same way. `log.find(...)` reads records back (the
console's trail).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from aql_mcp.audit.record import READ, AuditEntry, as_json, params_digest, timestamp
from aql_mcp.audit.writer import AuditTrail, shared_trail
from aql_mcp.auth.principal import Principal
from aql_mcp.observability.logging import log_context
from aql_mcp.observability.telemetry import current_call
from aql_mcp.settings import AuditSettings
from aql_mcp.store.audit import AuditQuery, AuditStore
from aql_mcp.store.base import Store

AUDIT_LOGGER = "aql_mcp.audit"


@dataclass(frozen=True, slots=True)
class AuditOptions:
    """`audit.*` as the log uses them."""

    reads: bool = False
    clear_subject: bool = False


class AuditLog:
    def __init__(
        self,
        trail: AuditTrail | None = None,
        options: AuditOptions | None = None,
        *,
        reader: AuditStore | None = None,
    ) -> None:
        self._log = structlog.get_logger(AUDIT_LOGGER)
        self.trail = trail
        self.options = options or AuditOptions()
        # Where `find` reads: the trail's store, or (with `audit.trail` off) the records written before.
        self._reader = trail.store if trail is not None else reader

    @property
    def reads(self) -> bool:
        """Whether successful reads are recorded (`audit.reads`)."""
        return self.trail is not None and self.options.reads

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
        caller: Principal | None = None,
        params: Any = None,
    ) -> None:
        """Log the event and queue its record without waiting for it."""
        entry = self._logged(kind, operation, principal, outcome, resource_id, code, actors, caller, params)
        if self.trail is not None:
            self.trail.put(entry)

    async def record(
        self,
        kind: str,
        *,
        operation: str,
        principal: str,
        outcome: str,
        resource_id: str | None = None,
        code: str | None = None,
        actors: tuple[str, ...] = (),
        caller: Principal | None = None,
        params: Any = None,
    ) -> None:
        """Log the event and return once its record is durable (waiting for room in a full queue)."""
        entry = self._logged(kind, operation, principal, outcome, resource_id, code, actors, caller, params)
        if self.trail is not None:
            await self.trail.append(entry)

    def read(self, *, operation: str, principal: str, caller: Principal | None = None, params: Any = None) -> None:
        """A successful read, under `audit.reads` only: queued, never waited for, dropped (and
        counted) when the queue is full. Not logged: the tool_call line says it already."""
        if self.trail is not None and self.options.reads:
            self.trail.offer(self._entry(READ, operation, principal, "success", None, None, (), caller, params))

    def offer(
        self,
        kind: str,
        *,
        operation: str,
        principal: str,
        outcome: str,
        code: str | None = None,
        caller: Principal | None = None,
    ) -> None:
        """A decision that can come in a flood (a rate-limit refusal, an authentication failure):
        queued, never waited for, dropped (and counted) when the queue is full, so a caller cannot
        make the service write or wait without bound. Not logged: the refusing middleware's own line
        says it already (docs/audit.md, "Writing")."""
        if self.trail is not None:
            self.trail.offer(self._entry(kind, operation, principal, outcome, None, code, (), caller, None))

    async def find(self, query: AuditQuery, *, limit: int) -> list[dict[str, Any]]:
        """Stored records matching `query`, newest first, as `aql-mcp audit export` prints them;
        none without a store to read (docs/console.md, "The audit trail")."""
        if self._reader is None:
            return []
        return [as_json(row) for row in await self._reader.find(query, limit=limit)]

    def _logged(
        self,
        kind: str,
        operation: str,
        principal: str,
        outcome: str,
        resource_id: str | None,
        code: str | None,
        actors: tuple[str, ...],
        caller: Principal | None,
        params: Any,
    ) -> AuditEntry:
        actors = actors or (caller.actor_digests if caller is not None else ())
        fields: dict[str, Any] = {"audit": kind, "operation": operation, "principal": principal, "outcome": outcome}
        if actors:
            fields["actors"] = list(actors)
        if resource_id is not None:
            fields["resource_id"] = resource_id
        if code is not None:
            fields["code"] = code
        self._log.info("audit_event", **fields)
        return self._entry(kind, operation, principal, outcome, resource_id, code, actors, caller, params)

    def _entry(
        self,
        kind: str,
        operation: str,
        principal: str,
        outcome: str,
        resource_id: str | None,
        code: str | None,
        actors: tuple[str, ...],
        caller: Principal | None,
        params: Any,
    ) -> AuditEntry:
        context, call = log_context(), current_call()
        subject = principal
        if caller is not None and self.options.clear_subject:
            subject = caller.qualified(caller.subject)
        return AuditEntry(
            recorded_at=timestamp(),
            kind=kind,
            operation=operation,
            outcome=outcome,
            subject=subject,
            actors=actors or (caller.actor_digests if caller is not None else ()),
            tenant=caller.qualified(caller.tenant) if caller is not None and caller.tenant else None,
            request_id=context.get("request_id"),
            trace_id=context.get("trace_id"),
            era=_era(context),
            tool=call.tool if call is not None else None,
            code=code,
            params_digest=params_digest(params),
            resource_id=resource_id,
        )


def trail_log(store: Store, settings: AuditSettings, *, on_drop: Callable[[int], None] | None = None) -> AuditLog:
    """An audit log writing to `store`'s audit trail as `audit.*` says; `on_drop` counts the reads a
    full queue dropped. With `audit.trail` off it writes nothing, and still logs and reads back."""
    options = AuditOptions(reads=settings.reads, clear_subject=settings.subject == "clear")
    if not settings.trail:
        return AuditLog(None, options, reader=store.audit)
    return AuditLog(shared_trail(store.audit, on_drop=on_drop), options)


def _era(context: Any) -> str | None:
    """The protocol era of the request: the modern edge names it in the log context; the legacy
    edge names only the method (docs/eras.md). None outside an MCP request (the console)."""
    era = context.get("mcp_era")
    if era is not None:
        return str(era)
    return "legacy" if "mcp_method" in context else None
