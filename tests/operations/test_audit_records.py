"""What the MCP-AQL router and `AuditLog` put in the audit trail (operations/audit.py, docs/audit.md):
the era, tool and ids of the request, the subject as `audit.subject` says, reads under `audit.reads`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp.audit.verifier import verify
from aql_mcp.audit.writer import AuditTrail
from aql_mcp.auth.principal import Principal, subject_digest
from aql_mcp.operations.audit import AuditLog, AuditOptions, trail_log
from aql_mcp.settings import AuditSettings, Settings, StoreSettings
from aql_mcp.store.audit import AuditQuery, AuditRow
from aql_mcp.store.base import Store
from aql_mcp.store.factory import open_store
from aql_mcp.testing.client import plugin_client
from tests.operations.client import RECORDS
from tests.support.server import start_server

pytestmark = pytest.mark.anyio


async def _trail(state: Path) -> list[AuditRow]:
    store = open_store(Settings(store=StoreSettings(path=state)))
    await store.open()
    try:
        assert (await verify(store.audit)).ok
        return await store.audit.records()
    finally:
        await store.close()


async def _session(state: Path, era: str, audit: dict[str, Any] | None = None) -> None:
    async with plugin_client(RECORDS, state_dir=state, era=era, settings={"audit": audit or {}}) as client:  # type: ignore[arg-type]
        await client.operation("create_collection", {"collection": "notes"})
        await client.operation("list_records", {"collection": "notes"})
        await client.operation("create_record", {"collection": "missing", "data": {"x": 1}})


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_write_and_a_refusal_are_recorded_with_their_era_tool_and_request(tmp_path: Path, era: str) -> None:
    await _session(tmp_path, era)
    rows = await _trail(tmp_path)
    assert [(r.kind, r.operation, r.outcome) for r in rows] == [
        ("mutation", "create_collection", "success"),
        ("refusal", "create_record", "refused"),
    ]
    assert {r.era for r in rows} == {era}
    assert {r.tool for r in rows} == {"mcp_aql_create"}
    assert {r.subject for r in rows} == {subject_digest("tester")}
    assert None not in {rows[0].request_id, rows[1].request_id}
    assert rows[0].request_id != rows[1].request_id
    assert rows[1].code == "NOT_FOUND_RESOURCE"


async def test_reads_are_recorded_under_audit_reads_and_the_subject_in_clear_under_audit_subject(
    tmp_path: Path,
) -> None:
    await _session(tmp_path, "legacy", {"reads": True, "subject": "clear"})
    # The client introspects first to find each operation's tool: a read as well.
    rows = [r for r in await _trail(tmp_path) if r.operation != "introspect"]
    assert [(r.kind, r.operation) for r in rows] == [
        ("mutation", "create_collection"),
        ("read", "list_records"),
        ("refusal", "create_record"),
    ]
    assert {r.subject for r in rows} == {"tester"}
    assert rows[1].tool == "mcp_aql_read"


async def test_a_delegated_callers_record_carries_its_actor_chain_and_tenant_as_its_issuer_qualifies_them(
    store: Store,
) -> None:
    caller = Principal(subject="alice", actors=("bot-1", "bot-0"), tenant="acme", issuer="https://idp.example")
    log = AuditLog(AuditTrail(store.audit), AuditOptions())
    await log.record(
        "mutation",
        operation="create_record",
        principal=caller.digest,
        outcome="success",
        caller=caller,
        params={"data": {"secret": "s3cr3t"}},
    )
    [row] = await store.audit.records()
    assert row.subject == caller.digest
    assert row.actors == f'["{caller.actor_digests[0]}","{caller.actor_digests[1]}"]'
    assert row.tenant == "https://idp.example#acme"
    assert "s3cr3t" not in repr(row)
    assert row.params_digest is not None
    assert (row.request_id, row.era, row.tool) == (None, None, None)


async def test_a_log_without_reads_records_no_read_and_a_log_without_a_trail_records_nothing(store: Store) -> None:
    log = trail_log(store, AuditSettings())
    log.read(operation="list_records", principal="p")
    AuditLog().event("mutation", operation="create_record", principal="p", outcome="success")
    await log.record("mutation", operation="create_record", principal="p", outcome="success")
    assert [row.kind for row in await store.audit.records()] == ["mutation"]


async def test_every_audit_log_of_a_store_shares_one_writer(store: Store) -> None:
    """The router, the guards, the console and the plugins each build a log: their records of one
    moment go in one batch (docs/audit.md, "Writing")."""
    first, second = trail_log(store, AuditSettings()), trail_log(store, AuditSettings(reads=True))
    assert first.trail is not None
    assert first.trail is second.trail
    await first.record("mutation", operation="create_record", principal="p", outcome="success")
    second.read(operation="get_record", principal="p")
    await first.trail.drain()
    assert [row.kind for row in await store.audit.records()] == ["mutation", "read"]


async def test_with_the_trail_off_nothing_is_recorded_and_the_records_written_before_still_read(tmp_path: Path) -> None:
    await _session(tmp_path, "legacy")
    before = await _trail(tmp_path)
    assert len(before) == 2
    await _session(tmp_path, "modern", {"trail": False, "reads": True})
    assert await _trail(tmp_path) == before
    store = open_store(Settings(store=StoreSettings(path=tmp_path)))
    await store.open()
    try:
        log = trail_log(store, AuditSettings(trail=False, reads=True))
        assert log.trail is None
        assert not log.reads
        await log.record("mutation", operation="create_record", principal="p", outcome="success")
        log.event("execution", operation="execute_import", principal="p", outcome="running")
        log.offer("auth_failure", operation="authenticate", principal="anonymous", outcome="invalid_token")
        found = await log.find(AuditQuery(), limit=10)
        assert [row["operation"] for row in found] == ["create_record", "create_collection"]
        assert len(await store.audit.records()) == 2
    finally:
        await store.close()


@pytest.mark.parametrize("trail", [True, False])
def test_a_trail_that_is_off_is_said_at_start_and_on_ready(tmp_path: Path, trail: bool) -> None:
    """A real server's own log lines: the logger of the start line is cached on first use, so a
    capture inside this process would miss it once another test had started an app."""
    env = {"AQL_MCP_AUDIT__TRAIL": str(trail).lower(), "AQL_MCP_LOGGING__FORMAT": "json"}
    with start_server(tmp_path, env=env) as server:
        body = httpx.get(f"{server.base}/ready", timeout=30).json()
        lines = [json.loads(text) for text in server.log_text().splitlines() if text.startswith("{")]
    assert body["status"] == "ready"
    assert ("audit_trail" in body["checks"]) is not trail
    assert body["checks"].get("audit_trail", "off") == "off"
    started = [line for line in lines if line.get("event") == "service_started"]
    assert [line["audit_trail"] for line in started] == [trail]
    warned = [line for line in lines if line.get("event") == "audit_trail_off"]
    assert [line["level"] for line in warned] == ([] if trail else ["warning"])
