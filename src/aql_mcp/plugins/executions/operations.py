"""The built-in `executions` plugin: imports and exports of records that run in the background
(MCP-AQL §8.4; docs/executions.md).

`execute_import` and `execute_export` answer at once with the execution's id and state; the work
runs on the replica that accepted the call (plugins/executions/worker.py) while `get_execution` and
`list_executions` read it and `cancel_execution` / `retry_execution` change it on any replica, the
store's row being the truth. A call that carries `_meta.progressToken` follows its execution
instead: progress notifications on its stream, and the final state as the answer (or the state at
the tool timeout's approach); `notifications/cancelled` for that call cancels the execution.

Executions belong to the records tenant (`records.tenant_claim`) whose records they write or read.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from aql_mcp.plugin import (
    NOT_FOUND_RESOURCE,
    RATE_LIMIT_QUOTA_EXHAUSTED,
    VALIDATION_INVALID_ENCODING,
    VALIDATION_PAYLOAD_TOO_LARGE,
    Call,
    Content,
    Context,
    ExecutionSources,
    OperationError,
    Principal,
    ResourceNotFound,
    Settings,
    SourcedExecution,
    new_execution_id,
)
from aql_mcp.plugins.executions.export import has_part, read_export, read_part
from aql_mcp.plugins.executions.legacy_tasks import (
    AS_TASK,
    principal_digest,
)
from aql_mcp.plugins.executions.params import ExecutionRef, ExportParams, ImportParams, ListExecutions
from aql_mcp.plugins.executions.rows import FORMATS
from aql_mcp.plugins.executions.store import ExecutionRecord, ExecutionStore, Progress, RetainedBytesExceeded
from aql_mcp.plugins.executions.wire import TERMINAL, execution_wire
from aql_mcp.plugins.executions.worker import ExecutionWorker
from aql_mcp.plugins.records.operations import Records
from aql_mcp.plugins.records.store import StoredCollection

# A following call answers this long before the tool timeout, with the state it has reached.
FOLLOW_MARGIN_SECONDS = 2.0
# An execution not in a state the operation acts on (MCP-AQL error codes §3: a CONFLICT_ code, 409).
CONFLICT_INVALID_STATE = "CONFLICT_INVALID_STATE"
# A follower rereads the row at least this often (the worker wakes one on its replica sooner).
FOLLOW_POLL_SECONDS = 0.25
# A followed execution's message once its client cancelled the call (notifications/cancelled, or
# closing the request on the 2026-07-28 wire).
CLIENT_CANCELLED = "cancelled by the client: it cancelled the call following the execution"


@dataclass
class Executions:
    """The operations over the store's executions, run by `worker` on this replica, and over the
    executions other plugins keep (`sources`: the safety plugin's agent runs; docs/executions.md,
    "Agent runs")."""

    settings: Settings
    records: Records
    worker: ExecutionWorker
    sources: ExecutionSources = field(default_factory=ExecutionSources)

    @property
    def store(self) -> ExecutionStore:
        return self.worker.store

    async def _collection(self, tenant: str, name: str) -> StoredCollection:
        found = await self.records.store.get_collection(tenant, name)
        if found is None:
            raise OperationError(
                NOT_FOUND_RESOURCE,
                f"Resource 'collection' not found: '{name}'",
                {"resource_type": "collection", "resource_id": name},
            )
        return found

    async def execute_import(self, params: ImportParams, call: Call) -> dict[str, Any]:
        tenant = self.records.tenant(call)
        payload = _decoded(params.file_content, self.settings.executions.max_import_bytes)
        collection = await self._collection(tenant, params.collection)
        details = {
            "collection": params.collection,
            "format": FORMATS[params.file_mime_type],
            "mime_type": params.file_mime_type,
            "bytes": len(payload),
            "fields": list(collection.fields) if collection.fields is not None else None,
        }
        return await self._launch(call, tenant, "import", details, payload)

    async def execute_export(self, params: ExportParams, call: Call) -> dict[str, Any]:
        tenant = self.records.tenant(call)
        await self._collection(tenant, params.collection)
        return await self._launch(call, tenant, "export", {"collection": params.collection}, None)

    async def get_execution(self, params: ExecutionRef, call: Call) -> dict[str, Any]:
        tenant, refusal = self._tenant_or_refusal(call)
        record = None if tenant is None else await self.store.get(params.execution_id, tenant)
        if record is not None:
            return execution_wire(record)
        for source in self.sources:
            found = await source.get_execution(params.execution_id, call)
            if found is not None:
                return found
        raise refusal or _not_found(params.execution_id)

    async def list_executions(self, params: ListExecutions, call: Call) -> dict[str, Any]:
        """The caller's executions of every kind, newest first: the store's and each source's."""
        tenant, refusal = self._tenant_or_refusal(call)
        merged: list[SourcedExecution] = []
        if tenant is not None:
            found = await self.store.list_executions(tenant, status=params.status, limit=params.first)
            merged = [SourcedExecution(r.created_at, execution_wire(r, report=False)) for r in found]
        for source in self.sources:
            merged.extend(await source.list_executions(call, status=params.status, limit=params.first))
        if refusal is not None and not merged:
            raise refusal
        merged.sort(key=lambda item: (item.created_at, item.wire["execution_id"]), reverse=True)
        items = [item.wire for item in merged[: params.first]]
        return {"items": items, "count": len(items)}

    async def cancel_execution(self, params: ExecutionRef, call: Call) -> dict[str, Any]:
        tenant, refusal = self._tenant_or_refusal(call)
        outcome = "unknown"
        if tenant is not None:
            outcome = await self.store.cancel(params.execution_id, tenant, time.time(), "cancelled by cancel_execution")
        if outcome == "unknown":
            for source in self.sources:
                found = await source.cancel_execution(params.execution_id, call)
                if found is not None:
                    return found
            raise refusal or _not_found(params.execution_id)
        record = await self._own(params.execution_id, call)
        wire = execution_wire(record, report=False)
        wire["cancelled"] = outcome == "cancelled"
        return wire

    async def retry_execution(self, params: ExecutionRef, call: Call) -> dict[str, Any]:
        tenant, refusal = self._tenant_or_refusal(call)
        current = None if tenant is None else await self.store.get(params.execution_id, tenant)
        if current is None or tenant is None:
            await self._refuse_sourced_retry(params.execution_id, call)
            raise refusal or _not_found(params.execution_id)
        if current.params.get("task"):
            raise OperationError(
                CONFLICT_INVALID_STATE,
                "An execution started as an MCP task is not retried (a task that failed stays failed)",
                {"resource_id": current.id, "status": current.status, "reason": "task"},
            )
        with self.worker.starting():
            retried = await self.store.retry(params.execution_id, tenant, time.time())
            if retried is not None:
                # Launched from the row the retry returned: nothing between the two may fail.
                self.worker.launch(retried)
        if retried is None:
            record = await self._own(params.execution_id, call)
            raise OperationError(
                CONFLICT_INVALID_STATE,
                f"Only a failed execution can be retried; this one is {record.status}",
                {"resource_id": record.id, "status": record.status, "allowed_from": ["failed"]},
            )
        return await self._answer(retried, call.ctx)

    async def check_export(self, uri: str, variables: dict[str, str], principal: Principal | None) -> None:
        """ResourceNotFound unless `uri` is the caller's own completed export: what a read of it would
        refuse, found without loading the output (the template's check; issue 27, N5)."""
        record = await self.store.get(variables["execution_id"], self._export_owner(uri, principal))
        if record is None or record.kind != "export" or record.status != "completed":
            raise ResourceNotFound(data={"uri": uri})
        if "part" in variables and not has_part(record, variables["part"]):
            raise ResourceNotFound(data={"uri": uri})

    async def read_export(self, uri: str, variables: dict[str, str], ctx: Context) -> list[Content]:
        """`records://exports/{execution_id}` (whole, when it fits in one answer) and
        `.../parts/{part}` (plugins/executions/export.py)."""
        owner = self._export_owner(uri, ctx.principal)
        limit = self.settings.limits.max_result_bytes
        execution_id = variables["execution_id"]
        if "part" in variables:
            return await read_part(self.store, uri, execution_id, variables["part"], owner, max_result_bytes=limit)
        return await read_export(self.store, uri, execution_id, owner, max_result_bytes=limit)

    def _export_owner(self, uri: str, principal: Principal | None) -> str:
        try:
            return self.records.tenant_of(principal)
        except OperationError:
            # A caller without a tenant owns no export: as unknown to it as another tenant's.
            raise ResourceNotFound(data={"uri": uri}) from None

    def _tenant_or_refusal(self, call: Call) -> tuple[str | None, OperationError | None]:
        """The caller's records tenant, or why it has none: a caller without one may still own
        another plugin's executions (an agent run belongs to its principal)."""
        try:
            return self.records.tenant(call), None
        except OperationError as exc:
            return None, exc

    async def _refuse_sourced_retry(self, execution_id: str, call: Call) -> None:
        """A source's execution (an agent run) is found but not retried: its operation's lifecycle
        has `supports_retry: false`, a new one is started instead."""
        for source in self.sources:
            found = await source.get_execution(execution_id, call)
            if found is not None:
                raise OperationError(
                    CONFLICT_INVALID_STATE,
                    f"An execution of kind '{source.kind}' is not retried (its operation's lifecycle has "
                    "supports_retry false); start a new one",
                    {"resource_id": execution_id, "status": found.get("status"), "reason": "not_retryable"},
                )

    async def _own(self, execution_id: str, call: Call) -> ExecutionRecord:
        record = await self.store.get(execution_id, self.records.tenant(call))
        if record is None:
            raise _not_found(execution_id)
        return record

    async def _launch(
        self, call: Call, tenant: str, kind: str, details: dict[str, Any], payload: bytes | None
    ) -> dict[str, Any]:
        if call.ctx.memo.get(AS_TASK):
            # An MCP task's state machine has no way back from failed: its execution is never retried.
            details = {**details, "task": True}
        now = time.time()
        record = ExecutionRecord(
            id=new_execution_id(),
            owner=tenant,
            kind=kind,
            status="pending",
            created_at=now,
            updated_at=now,
            session_id=call.session_id,
            params=details,
            progress=Progress(0, None, "pending"),
            principal=principal_digest(call.principal),
        )
        cap = self.settings.executions.max_live_per_principal
        kept = self.settings.executions.max_retained_bytes_per_tenant
        # From its creation to its launch the row is `pending` on this replica with no worker: the
        # sweep (worker.py) would take it for one whose start failed and cancel it.
        with self.worker.starting():
            try:
                created = await self.store.create(record, payload, max_live_per_owner=cap, max_retained_bytes=kept)
            except RetainedBytesExceeded as exc:
                raise OperationError(
                    RATE_LIMIT_QUOTA_EXHAUSTED,
                    f"Quota exhausted: this tenant's executions may keep at most {exc.limit} bytes of import payloads "
                    "and export outputs (executions.max_retained_bytes_per_tenant); they are freed as executions "
                    "complete, are cancelled or expire",
                    {"metric": "retained_bytes", "current": exc.current, "hard_stop_threshold": exc.limit},
                ) from None
            if not created:
                raise OperationError(
                    RATE_LIMIT_QUOTA_EXHAUSTED,
                    f"Too many executions: at most {cap} may be pending or running at once "
                    "(executions.max_live_per_principal)",
                    {"metric": "live_executions", "hard_stop_threshold": cap, "retry_after_seconds": 5},
                )
            started = await self.store.start(record.id, time.time())
            if started is not None:
                # Launched from the row the start returned: nothing between the two may fail.
                self.worker.launch(started)
        if started is None:
            # Cancelled in the instant since its creation (its session ended, say): say so.
            started = await self.store.load(record.id)
        return await self._answer(started or record, call.ctx)

    async def _answer(self, record: ExecutionRecord, ctx: Context) -> dict[str, Any]:
        """At once, or, when the call asked for progress, once the execution ended (docs/executions.md)."""
        if ctx.progress_token is None or ctx.memo.get(AS_TASK):
            return execution_wire(record, report=False)
        return await self._follow(record, ctx)

    async def _follow(self, record: ExecutionRecord, ctx: Context) -> dict[str, Any]:
        wake = self.worker.changed(record.id)
        deadline = time.monotonic() + max(0.0, self.settings.limits.tool_timeout_seconds - FOLLOW_MARGIN_SECONDS)
        try:
            while True:
                wake.clear()
                latest = await self.store.load(record.id)
                if latest is None:
                    raise _not_found(record.id)
                progress = latest.progress
                # The message names the execution: a following client learns its id from the first one.
                await ctx.progress(progress.current, progress.total, f"{latest.id} {latest.status}")
                left = deadline - time.monotonic()
                if latest.status in TERMINAL or left <= 0:
                    return execution_wire(latest)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), min(FOLLOW_POLL_SECONDS, left))
        except asyncio.CancelledError:
            # The client cancelling the following call (notifications/cancelled; on the 2026-07-28
            # wire, closing the request) cancels its execution; anything else that cancels the call
            # does not: a replica's shutdown cancels in-flight requests before the lifespan stops
            # the worker, which then fails the execution with a reason a retry can act on
            # (replica_shutdown).
            if ctx.cancelled_by_client():
                cancel = self.store.cancel(record.id, record.owner, time.time(), CLIENT_CANCELLED)
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.shield(asyncio.ensure_future(cancel))
            raise
        finally:
            self.worker.forget(record.id)


def _decoded(content: str, cap: int) -> bytes:
    # The encoded size bounds the decoded one: refuse before decoding what cannot fit.
    if len(content) > (cap + 2) // 3 * 4 + 4:
        raise _too_large(cap)
    try:
        payload = binascii.a2b_base64(content.encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise OperationError(
            VALIDATION_INVALID_ENCODING,
            "file_content is not valid base64 (RFC 4648, standard alphabet, with padding)",
            {"param_name": "file_content", "expected_encoding": "base64"},
        ) from None
    if len(payload) > cap:
        raise _too_large(cap)
    return payload


def _too_large(cap: int) -> OperationError:
    return OperationError(
        VALIDATION_PAYLOAD_TOO_LARGE,
        f"The import payload exceeds {cap} bytes (executions.max_import_bytes)",
        {"param_name": "file_content", "max_bytes": cap},
    )


def _not_found(execution_id: str) -> OperationError:
    return OperationError(
        NOT_FOUND_RESOURCE,
        f"Resource 'execution' not found: '{execution_id}'",
        {"resource_type": "execution", "resource_id": execution_id},
    )
