"""An execution store that records every state change in the audit trail (docs/audit.md, kind
`execution`): one record per transition, its outcome the new status, its resource id the execution.

The worker changes states long after the call that started the execution, so the record's subject
is the principal digest the row keeps (`ExecutionRecord.principal`), not whoever is being served
now; `anonymous` for an execution started without a token. A client's own transition (create,
retry, cancel) waits for its record before the call is answered, as any write does; the worker's
and the sweep's are queued without waiting, so a slow trail never holds up an import.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from aql_mcp.plugin import AuditLog
from aql_mcp.plugins.executions.store import (
    Batch,
    BatchOutcome,
    Cancelled,
    ExecutionRecord,
    ExecutionStatus,
    ExecutionStore,
    Progress,
    Takeover,
)

KIND = "execution"


class AuditedExecutionStore:
    """`ExecutionStore` over another one, adding an audit record of each transition it makes."""

    def __init__(self, inner: ExecutionStore, audit: AuditLog) -> None:
        self.inner = inner
        self.audit = audit
        # Hears of every status this replica moves an execution into (the metrics count the ends).
        self.on_status: list[Callable[[str], None]] = []

    @property
    def replica(self) -> str:
        return self.inner.replica

    async def create(
        self,
        record: ExecutionRecord,
        payload: bytes | None,
        *,
        max_live_per_owner: int,
        max_retained_bytes: int | None = None,
    ) -> bool:
        created = await self.inner.create(
            record, payload, max_live_per_owner=max_live_per_owner, max_retained_bytes=max_retained_bytes
        )
        if created:
            await self._record(record, record.status)
        return created

    async def get(self, execution_id: str, owner: str) -> ExecutionRecord | None:
        return await self.inner.get(execution_id, owner)

    async def load(self, execution_id: str) -> ExecutionRecord | None:
        return await self.inner.load(execution_id)

    async def payload(self, execution_id: str) -> bytes | None:
        return await self.inner.payload(execution_id)

    async def list_executions(
        self,
        owner: str,
        *,
        status: ExecutionStatus | None,
        limit: int,
        principal: str | None = None,
        before: tuple[float, str] | None = None,
    ) -> list[ExecutionRecord]:
        return await self.inner.list_executions(owner, status=status, limit=limit, principal=principal, before=before)

    async def start(self, execution_id: str, now: float) -> ExecutionRecord | None:
        started = await self.inner.start(execution_id, now)
        if started is not None:
            self._queue(started, started.status)
        return started

    async def retry(self, execution_id: str, owner: str, now: float) -> ExecutionRecord | None:
        retried = await self.inner.retry(execution_id, owner, now)
        if retried is not None:
            await self._record(retried, retried.status)
        return retried

    async def transition(
        self,
        execution_id: str,
        to: ExecutionStatus,
        now: float,
        *,
        error: dict[str, Any] | None = None,
        result: dict[str, Any] | None = None,
        message: str | None = None,
        attempt: int | None = None,
    ) -> bool:
        moved = await self.inner.transition(
            execution_id, to, now, error=error, result=result, message=message, attempt=attempt
        )
        if moved:
            found = await self.inner.load(execution_id)
            if found is not None:
                # `to`, not the row's status now: a later transition may already have followed.
                self._queue(found, to)
        return moved

    async def cancel(self, execution_id: str, owner: str, now: float, message: str) -> Cancelled:
        outcome = await self.inner.cancel(execution_id, owner, now, message)
        if outcome == "cancelled":
            found = await self.inner.load(execution_id)
            if found is not None:
                await self._record(found, "cancelled")
        return outcome

    async def cancel_session(self, session_id: str, now: float) -> int:
        ended = await self.end_session(session_id, now)
        return len(ended)

    async def end_session(self, session_id: str, now: float) -> list[ExecutionRecord]:
        ended = await self.inner.end_session(session_id, now)
        for record in ended:
            self._queue(record, record.status)
        return ended

    async def import_batch(self, execution_id: str, batch: Batch, now: float, *, attempt: int) -> BatchOutcome:
        return await self.inner.import_batch(execution_id, batch, now, attempt=attempt)

    async def set_progress(self, execution_id: str, progress: Progress, now: float, *, attempt: int) -> bool:
        return await self.inner.set_progress(execution_id, progress, now, attempt=attempt)

    async def clear_output(self, execution_id: str, *, attempt: int) -> bool:
        return await self.inner.clear_output(execution_id, attempt=attempt)

    async def store_part(self, execution_id: str, part: int, data: bytes, *, attempt: int) -> bool:
        return await self.inner.store_part(execution_id, part, data, attempt=attempt)

    async def output_part(self, execution_id: str, owner: str, part: int) -> bytes | None:
        return await self.inner.output_part(execution_id, owner, part)

    async def recover(self, now: float, live_seconds: float) -> list[str]:
        recovered = await self.inner.recover(now, live_seconds)
        await self._queue_loaded(recovered)
        return recovered

    async def renew(self, lease_seconds: float, now: float) -> int:
        return await self.inner.renew(lease_seconds, now)

    async def take_over(self, now: float, *, lease_seconds: float, max_takeovers: int) -> Takeover:
        taken = await self.inner.take_over(now, lease_seconds=lease_seconds, max_takeovers=max_takeovers)
        for record in taken.resumed:
            self._queue(record, record.status)
        await self._queue_loaded(taken.ended)
        return taken

    async def fail_abandoned(self, keep: Collection[str], before: float, now: float) -> list[str]:
        abandoned = await self.inner.fail_abandoned(keep, before, now)
        await self._queue_loaded(abandoned)
        return abandoned

    async def purge(self, before: float) -> int:
        return await self.inner.purge(before)

    async def _queue_loaded(self, execution_ids: Collection[str]) -> None:
        """Queue the record of each execution's new status, read back from its row."""
        for execution_id in execution_ids:
            found = await self.inner.load(execution_id)
            if found is not None:
                self._queue(found, found.status)

    async def _record(self, record: ExecutionRecord, status: str) -> None:
        self._announce(status)
        await self.audit.record(KIND, **_fields(record, status))

    def _queue(self, record: ExecutionRecord, status: str) -> None:
        self._announce(status)
        self.audit.event(KIND, **_fields(record, status))

    def _announce(self, status: str) -> None:
        for listener in self.on_status:
            listener(status)


def _fields(record: ExecutionRecord, status: str) -> dict[str, Any]:
    return {
        "operation": f"execute_{record.kind}",
        "principal": record.principal or "anonymous",
        "outcome": status,
        "resource_id": record.id,
    }
