"""The `executions` plugin's checks of an import payload (MCP-AQL §4.7.4) and its wiring."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import anyio
import pytest

from aql_mcp.builtin_sections import ExecutionSettings
from aql_mcp.operations.models import Call
from aql_mcp.operations.payload import Limits
from aql_mcp.operations.results import OperationError
from aql_mcp.plugins.executions.operations import Executions, _decoded
from aql_mcp.plugins.executions.registration import ExecutionsPlugin, plugin
from aql_mcp.plugins.executions.store import IMPORTING, ExecutionRecord, ExecutionStore
from aql_mcp.plugins.executions.wire import TERMINAL, execution_wire
from aql_mcp.plugins.executions.worker import ExecutionWorker
from aql_mcp.plugins.records.operations import Records
from aql_mcp.plugins.records.store import Quota
from aql_mcp.protocol.context import Context
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from tests.support.wait import DEADLINE, INTERVAL, eventually


def test_a_standard_base64_payload_with_padding_is_decoded() -> None:
    assert _decoded(base64.b64encode(b'{"a": 1}\n').decode(), 1024) == b'{"a": 1}\n'


@pytest.mark.parametrize("content", ["eyJhIjogMX0", "eyJh IjogMX0=", "eyJhIjo-MX0_", "ééé", "===="])
def test_anything_but_strict_standard_base64_is_an_encoding_error(content: str) -> None:
    with pytest.raises(OperationError) as caught:
        _decoded(content, 1024)
    assert caught.value.code == "VALIDATION_INVALID_ENCODING"
    assert caught.value.details == {"param_name": "file_content", "expected_encoding": "base64"}


@pytest.mark.parametrize("size", [1025, 4096])
def test_a_payload_over_the_cap_is_refused_whether_or_not_it_is_decoded_first(size: int) -> None:
    with pytest.raises(OperationError) as caught:
        _decoded(base64.b64encode(b"x" * size).decode(), 1024)
    assert caught.value.code == "VALIDATION_PAYLOAD_TOO_LARGE"
    assert caught.value.details == {"param_name": "file_content", "max_bytes": 1024}


def test_every_service_gets_a_plugin_of_its_own() -> None:
    settings = Settings()
    first, second = plugin(settings), plugin(settings)
    assert isinstance(first, ExecutionsPlugin)
    assert first is not second
    assert first.task_mapper() is None


class _Notes:
    """The call's stream: progress notifications are kept, nothing is asked."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        self.sent.append(params)

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        raise AssertionError("a follower asks nothing")

    def missing_capability(self, capability: str) -> Exception:
        raise AssertionError(capability)

    async def resource_updated(self, uri: str) -> None:
        raise AssertionError(uri)


@pytest.mark.anyio
@pytest.mark.parametrize("by_client", [False, True])
async def test_only_the_clients_cancellation_of_a_following_call_cancels_its_execution(
    store: Store, by_client: bool
) -> None:
    """A shutdown cancels every request in flight before the worker learns it stops: that must
    leave the execution to the worker's stop (failed, replica_shutdown), not cancel it."""
    settings = Settings()
    quota = Quota(settings.records.max_records, settings.records.max_bytes)
    worker = ExecutionWorker(store.executions, store.records, settings.executions, lambda: quota, Limits(10, 10, 10))
    executions = Executions(settings, Records(settings, store.records), worker)
    now = time.time()
    record = ExecutionRecord("exec_f", "alice", "export", "pending", now, now, params={"collection": "c"})
    assert await store.executions.create(record, None, max_live_per_owner=5)
    started = await store.executions.start("exec_f", now)
    assert started is not None  # running, with no worker: only the follower acts on it
    notes = _Notes()
    ctx = Context(request_id="r", message_id=1, peer=None, principal=None, outbound=notes, hub=notes, progress_token=1)
    ctx.cancelled_by_client = lambda: by_client
    follower = asyncio.create_task(executions._follow(started, ctx))
    await eventually(lambda: bool(notes.sent), "the follower sent no progress")
    follower.cancel()
    await asyncio.gather(follower, return_exceptions=True)
    found = await store.executions.load("exec_f")
    assert found is not None
    assert found.status == ("cancelled" if by_client else "running")


class _SweptAfterCreate:
    """The real execution store, with this replica's sweep run right after a creation returns:
    the moment a pending row of this replica has no worker yet (between `create` and `start`)."""

    def __init__(self, store: ExecutionStore) -> None:
        self._store = store
        self.worker: ExecutionWorker | None = None
        self.swept = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def create(self, *args: Any, **kwargs: Any) -> bool:
        created = await self._store.create(*args, **kwargs)
        assert self.worker is not None
        await self.worker._sweep()
        self.swept += 1
        return created


@pytest.mark.anyio
async def test_the_sweep_leaves_an_execution_being_created_alone(store: Store) -> None:
    """The sweep cancels a pending row of this replica whose start failed; one still between its
    creation and its start is not such a row (its launch follows)."""
    settings = Settings()
    quota = Quota(settings.records.max_records, settings.records.max_bytes)
    swept = _SweptAfterCreate(store.executions)
    # The sweep's clock is ahead, so the row just created is older than its `before`.
    worker = ExecutionWorker(
        swept,  # type: ignore[arg-type]
        store.records,
        settings.executions,
        lambda: quota,
        Limits(10, 10, 10),
        clock=lambda: time.time() + 60,
    )
    swept.worker = worker
    executions = Executions(settings, Records(settings, store.records), worker)
    notes = _Notes()
    ctx = Context(request_id="r", message_id=1, peer=None, principal=None, outbound=notes, hub=notes)
    call = Call(principal=None, session_id=None, ctx=ctx)
    try:
        answer = await executions._launch(call, "alice", "export", {"collection": "c"}, None)
        found = await store.executions.load(answer["execution_id"])
    finally:
        await worker.stop()
    assert swept.swept == 1
    assert answer["status"] != "cancelled", answer
    assert found is not None
    assert found.status != "cancelled"


@pytest.mark.anyio
async def test_get_execution_says_what_an_import_does_and_why_it_failed(store: Store) -> None:
    """Issue 22, item 4: not `pending` while the import runs, nor after it failed."""
    settings = Settings(executions=ExecutionSettings(batch_size=1, batch_pause_seconds=5))
    quota = Quota(settings.records.max_records, settings.records.max_bytes)
    worker = ExecutionWorker(store.executions, store.records, settings.executions, lambda: quota, Limits(10, 10, 10))
    executions = Executions(settings, Records(settings, store.records), worker)
    await store.records.create_collection("alice", "c", "", None, "now")
    ctx = Context(request_id="r", message_id=1, peer=None, principal=None, outbound=_Notes(), hub=_Notes())
    call = Call(principal=None, session_id=None, ctx=ctx)
    payload = b'{"n": 1}\n{"n": 2}\n'
    details = {"collection": "c", "file_mime_type": "application/x-ndjson"}
    try:
        running = await executions._launch(call, "alice", "import", details, payload)
        gone = await executions._launch(call, "alice", "import", {**details, "collection": "gone"}, payload)
        failed = await _ended(store, gone["execution_id"])
        now = await store.executions.get(running["execution_id"], "alice")
    finally:
        await worker.stop()
    assert running["progress"]["message"] == IMPORTING
    assert now is not None
    assert (now.status, execution_wire(now)["progress"]["message"]) == ("running", IMPORTING)
    assert failed["status"] == "failed"
    assert failed["progress"]["message"] == f"failed: {failed['error']['message']}"
    assert "'gone'" in failed["progress"]["message"]


async def _ended(store: Store, execution_id: str) -> dict[str, Any]:
    """The execution as get_execution shows it, once it ended: the row is read again until then,
    within the suite's deadline (the worker ends it on its own task, with no event to await here)."""
    with anyio.fail_after(DEADLINE):
        while True:
            found = await store.executions.get(execution_id, "alice")
            assert found is not None
            if found.status in TERMINAL:
                return execution_wire(found)
            await anyio.sleep(INTERVAL)
