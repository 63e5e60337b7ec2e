"""The audit trail behind a real `aql-mcp serve`, on each engine: a scripted session leaves exactly
its records and none of its values; a SIGKILL during writes leaves no acknowledged write without its
record; `aql-mcp audit verify | export` run beside it (docs/audit.md)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp.audit.verifier import verify
from aql_mcp.auth.principal import subject_digest
from aql_mcp.store.audit import AuditRow
from tests.support.aql import session
from tests.support.audit import run_sql
from tests.support.console import ConsoleClient, code_on, csrf_on, raise_challenge
from tests.support.engines import Backend
from tests.support.postgres import create_database, drop_database
from tests.support.server import start_server
from tests.support.wait import until

SECRET = "value-" + secrets.token_hex(8)
CLI = (sys.executable, "-m", "aql_mcp.main", "audit")


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """One engine's empty database for a server and the CLI to share (not the contract suite's)."""
    if request.param == "sqlite":
        yield Backend("sqlite", tmp_path)
        return
    server = request.getfixturevalue("postgres_server")
    name = "audit_" + secrets.token_hex(4)
    url = asyncio.run(create_database(server, name))
    yield Backend("postgres", tmp_path, url)
    asyncio.run(drop_database(server, name))


def _env(backend: Backend) -> dict[str, str]:
    return {"AQL_MCP_STORE__URL": backend.url} if backend.url else {}


def _cli(backend: Backend, *arguments: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "AQL_MCP_STORE__PATH": str(backend.path), **_env(backend)}
    return subprocess.run(
        [*CLI, *arguments, "--dev"], env=environ, capture_output=True, text=True, timeout=60, check=False
    )


def _rows(backend: Backend) -> list[dict[str, Any]]:
    exported = _cli(backend, "export")
    assert exported.returncode == 0, exported.stderr
    return [json.loads(line) for line in exported.stdout.splitlines()]


def test_a_scripted_session_leaves_exactly_its_records_and_none_of_its_values(backend: Backend) -> None:
    with (
        start_server(backend.path, env=_env(backend), plugins=()) as server,
        session(server, subject="lovelace") as ada,
    ):
        ada.call("mcp_aql_create", "create_collection", collection="notes")
        made = ada.call("mcp_aql_create", "create_record", collection="notes", data={"secret": SECRET})
        missing = ada.call("mcp_aql_create", "create_record", collection="absent", data={"secret": SECRET})
        ada.call("mcp_aql_read", "list_records", collection="notes")
        gated = ada.call("mcp_aql_delete", "delete_collection", collection="notes")
        token = gated["error"]["details"]["confirmation_token"]
        deleted = ada.call("mcp_aql_delete", "delete_collection", collection="notes", _confirmation=token)
    assert (made["success"], missing["success"], deleted["success"]) == (True, False, True)
    rows = _rows(backend)
    assert [(r["kind"], r["operation"], r["outcome"], r["code"]) for r in rows] == [
        ("mutation", "create_collection", "success", None),
        ("mutation", "create_record", "success", None),
        ("refusal", "create_record", "refused", missing["error"]["code"]),
        ("token", "delete_collection", "issued", None),
        ("token", "delete_collection", "redeemed", None),
        ("mutation", "delete_collection", "success", None),
    ]
    assert rows[1]["resource_id"] == made["data"]["id"]
    assert {r["subject"] for r in rows} == {subject_digest("lovelace")}
    assert {r["era"] for r in rows} == {"legacy"}
    assert [r["tool"] for r in rows] == ["mcp_aql_create"] * 3 + ["mcp_aql_delete"] * 3
    assert all(r["request_id"] and r["params_digest"] for r in rows)
    # The redeeming call's parameters hold the token: a digest of its own, and no token in sight.
    assert rows[3]["params_digest"] != rows[4]["params_digest"]
    text = "\n".join(json.dumps(r) for r in rows)
    for value in (SECRET, token, "lovelace"):
        assert value not in text
    verified = _cli(backend, "verify")
    assert verified.returncode == 0
    assert verified.stdout.strip().endswith(" chain(s), 6 record(s): ok")  # a chain a day: two across midnight


def test_verify_names_the_record_changed_in_the_database_and_exits_1(backend: Backend) -> None:
    with start_server(backend.path, env=_env(backend), plugins=()) as server, session(server) as caller:
        for name in ("a", "b", "c"):
            caller.call("mcp_aql_create", "create_collection", collection=name)
    chain = _rows(backend)[0]["chain"]
    asyncio.run(run_sql(backend, "UPDATE audit_records SET outcome = 'refused' WHERE seq = 2", bypass=True))
    verified = _cli(backend, "verify")
    assert verified.returncode == 1
    assert verified.stdout.splitlines()[0].startswith(f"broken: chain {chain} record 2: ")


def test_export_follow_prints_new_records_as_they_are_written(backend: Backend) -> None:
    with start_server(backend.path, env=_env(backend), plugins=()) as server, session(server) as caller:
        caller.call("mcp_aql_create", "create_collection", collection="first")
        out = backend.path / "follow.ndjson"
        environ = {**os.environ, "AQL_MCP_STORE__PATH": str(backend.path), **_env(backend)}
        with out.open("wb") as sink:
            follower = subprocess.Popen(
                [*CLI, "export", "--follow", "--every", "0.05", "--dev"], env=environ, stdout=sink
            )
        try:
            until(lambda: _lines(out) == 1, "the follower printed the existing record")
            caller.call("mcp_aql_create", "create_collection", collection="second")
            caller.call("mcp_aql_create", "create_collection", collection="third")
            until(lambda: _lines(out) == 3, "the follower printed the new records")
        finally:
            follower.terminate()
            follower.wait(timeout=10)
    printed = [json.loads(line) for line in out.read_text().splitlines()]
    assert [p["resource_id"] for p in printed] == ["first", "second", "third"]


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


def test_a_sigkill_during_writes_leaves_no_acknowledged_write_without_its_record(backend: Backend) -> None:
    acknowledged: list[str] = []
    with start_server(backend.path, env=_env(backend), plugins=()) as server:
        token = server.token()
        with session(server, token=token) as caller:
            caller.call("mcp_aql_create", "create_collection", collection="notes")
        writers = [
            threading.Thread(target=_write_until_refused, args=(server.base, token, acknowledged)) for _ in range(4)
        ]
        for writer in writers:
            writer.start()
        until(lambda: len(acknowledged) >= 40, "the writers had 40 writes acknowledged")
        server.process.kill()
        for writer in writers:
            writer.join(timeout=30)
    recorded = asyncio.run(_recorded(backend))
    assert set(acknowledged) <= {row.resource_id for row in recorded if row.operation == "create_record"}


def _write_until_refused(base: str, token: str, acknowledged: list[str]) -> None:
    """create_record after create_record in a session of its own, until the server is gone."""
    headers = {"accept": "application/json, text/event-stream", "authorization": f"Bearer {token}"}
    version = "2025-11-25"
    try:
        with httpx.Client(base_url=base, timeout=10, headers=headers) as http:
            init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "w", "version": "1"}}
            opened = http.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
            http.headers.update({"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": version})
            http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            for n in range(10_000):
                arguments = {"operation": "create_record", "params": {"collection": "notes", "data": {"n": n}}}
                body = {
                    "jsonrpc": "2.0",
                    "id": n + 1,
                    "method": "tools/call",
                    "params": {"name": "mcp_aql_create", "arguments": arguments},
                }
                answer = http.post("/mcp", json=body)
                envelope = answer.json()["result"]["structuredContent"]
                if envelope["success"]:
                    acknowledged.append(envelope["data"]["id"])
    except (httpx.HTTPError, KeyError, ValueError):
        return  # the server was killed


async def _recorded(backend: Backend) -> list[AuditRow]:
    store = await backend.open()
    try:
        report = await verify(store.audit)
        assert report.ok, report.broken
        rows: list[AuditRow] = []
        while page := await store.audit.records(after_id=rows[-1].id if rows else 0):
            rows += page
        return rows
    finally:
        await store.close()


def test_a_safety_block_and_its_console_verification_are_recorded_without_the_code(backend: Backend) -> None:
    with (
        start_server(backend.path, env=_env(backend), plugins=()) as server,
        session(server, subject="agent-audited") as agent,
        httpx.Client(base_url=server.base, timeout=20) as http,
    ):
        operator = ConsoleClient(http, server.token(subject="olivia", scopes=("mcp", "aql:operator")))
        challenge = raise_challenge(agent)
        blocked = agent.call("mcp_aql_create", "record_execution_step", element_name="builder", nextActionHint="x")
        html = operator.page()
        code = code_on(html, challenge)
        verified = operator.post("verify", challenge_id=challenge, code=code, csrf=csrf_on(html))
        refused = operator.post("verify", challenge_id=challenge, code=code, csrf=csrf_on(html))
    assert (blocked["success"], verified.status_code, refused.status_code) == (True, 303, 409)
    rows = _rows(backend)
    console = [(r["kind"], r["operation"], r["outcome"], r["resource_id"]) for r in rows if r["tool"] is None]
    assert console == [
        ("safety", "verified", "ok", challenge),
        ("console_action", "verify", "ok", challenge),
        ("console_action", "verify", "refused", challenge),
    ]
    assert {r["subject"] for r in rows if r["tool"] is None} == {subject_digest("olivia")}
    assert [(r["kind"], r["operation"]) for r in rows if r["tool"] is not None] == [
        ("safety", "execution_started"),
        ("mutation", "execute_agent"),
        ("safety", "step_evaluated"),
        ("safety", "challenge_raised"),
        ("mutation", "record_execution_step"),
        ("mutation", "record_execution_step"),
    ]
    assert code not in "\n".join(json.dumps(r) for r in rows)
    assert _cli(backend, "verify").returncode == 0


def test_authentication_failures_and_rate_limit_refusals_are_recorded_with_nothing_of_the_token(
    backend: Backend,
) -> None:
    limits = {
        "AQL_MCP_LIMITS__RATE_BURST": "3",
        "AQL_MCP_LIMITS__RATE_PER_SECOND": "0.001",
        "AQL_MCP_AUTH__REQUIRED_SCOPES": '["mcp"]',
    }
    forged = "forged." + secrets.token_hex(16) + ".token"
    with start_server(backend.path, env={**_env(backend), **limits}, plugins=()) as server:
        token, scopeless = server.token(subject="hopper"), server.token(subject="hopper", scopes=("other",))
        with httpx.Client(base_url=server.base, timeout=20) as http:
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            statuses = [http.post("/mcp", json=ping).status_code]
            statuses += [
                http.post("/mcp", json=ping, headers={"authorization": f"Bearer {value}"}).status_code
                for value in (forged, scopeless, token, token, token, token)
            ]
        assert statuses[:3] == [401, 401, 403]
        assert statuses[-1] == 429
        until(lambda: len(_rows(backend)) >= 4, "the guards' records were not written")
    rows = _rows(backend)
    failures = [(r["kind"], r["operation"], r["outcome"], r["subject"]) for r in rows if r["kind"] == "auth_failure"]
    assert failures == [
        ("auth_failure", "authenticate", "missing_token", "anonymous"),
        ("auth_failure", "authenticate", "invalid_token", "anonymous"),
        ("auth_failure", "authenticate", "insufficient_scope", "anonymous"),
    ]
    refused = [(r["outcome"], r["code"], r["operation"], r["subject"]) for r in rows if r["kind"] == "rate_limit"]
    assert refused == [("refused", "rate", "/mcp", subject_digest("hopper"))] * statuses.count(429)
    assert all(r["request_id"] for r in rows)
    text = "\n".join(json.dumps(r) for r in rows)
    for value in (forged, token, scopeless, "hopper"):
        assert value not in text
    assert _cli(backend, "verify").returncode == 0


def test_a_scripted_session_and_its_console_approval_leave_exactly_their_records_which_the_console_shows(
    backend: Backend,
) -> None:
    with (
        start_server(backend.path, env=_env(backend), plugins=()) as server,
        session(server, subject="babbage") as agent,
        httpx.Client(base_url=server.base, timeout=20) as http,
    ):
        operator = ConsoleClient(http, server.token(subject="olivia", scopes=("mcp", "aql:operator")))
        agent.call("mcp_aql_create", "create_collection", collection="notes")
        agent.call("mcp_aql_create", "create_record", collection="notes", data={"secret": SECRET})
        missing = agent.call("mcp_aql_create", "create_record", collection="absent", data={"secret": SECRET})
        gated = agent.call("mcp_aql_delete", "delete_collection", collection="notes")
        token = gated["error"]["details"]["confirmation_token"]
        agent.call("mcp_aql_delete", "delete_collection", collection="notes", _confirmation=token)
        challenge = raise_challenge(agent)
        blocked = agent.call("mcp_aql_execute", "execute_agent", element_name="builder")
        html = operator.page()
        code = code_on(html, challenge)
        verified = operator.post("verify", challenge_id=challenge, code=code, csrf=csrf_on(html))
        as_json = {"authorization": f"Bearer {operator.token}"}
        shown = http.get("/console/trail", params={"resource_id": challenge}, headers=as_json)
        agents = http.get(
            "/console/trail",
            params={"subject": subject_digest("babbage"), "kind": "refusal", "limit": "5"},
            headers=as_json,
        )
        anonymous = http.get("/console/trail", params={"resource_id": challenge})
        not_operator = http.get(
            "/console/trail",
            params={"resource_id": challenge},
            headers={"authorization": agent.headers["authorization"]},
        )
        typo = http.get("/console/trail", params={"resource": challenge}, headers=as_json)
    assert (blocked["success"], blocked["error"]["code"], verified.status_code) == (False, "PERMISSION_DENIED", 303)
    rows = _rows(backend)
    assert [(r["kind"], r["operation"], r["outcome"], r["code"]) for r in rows] == [
        ("mutation", "create_collection", "success", None),
        ("mutation", "create_record", "success", None),
        ("refusal", "create_record", "refused", missing["error"]["code"]),
        ("token", "delete_collection", "issued", None),
        ("token", "delete_collection", "redeemed", None),
        ("mutation", "delete_collection", "success", None),
        ("safety", "execution_started", "ok", None),
        ("mutation", "execute_agent", "success", None),
        ("safety", "step_evaluated", "ok", None),
        ("safety", "challenge_raised", "ok", None),
        ("mutation", "record_execution_step", "success", None),
        ("safety", "blocked_operation_refused", "refused", None),
        ("refusal", "execute_agent", "refused", "PERMISSION_DENIED"),
        ("safety", "verified", "ok", None),
        ("console_action", "verify", "ok", None),
    ]
    text = "\n".join(json.dumps(r) for r in rows)
    for value in (SECRET, token, code, "babbage", "olivia"):
        assert value not in text
    assert shown.status_code == 200
    # Newest first: everything about the challenge, from the loop raising it to the operator's verify.
    assert [(r["kind"], r["operation"], r["outcome"]) for r in shown.json()["records"]] == [
        ("console_action", "verify", "ok"),
        ("safety", "verified", "ok"),
        ("safety", "blocked_operation_refused", "refused"),
        ("safety", "challenge_raised", "ok"),
    ]
    assert shown.json()["records"][0]["subject"] == subject_digest("olivia")
    refusals = agents.json()["records"]
    assert [(r["operation"], r["code"]) for r in refusals] == [
        ("execute_agent", "PERMISSION_DENIED"),
        ("create_record", missing["error"]["code"]),
    ]
    assert (anonymous.status_code, not_operator.status_code, typo.status_code) == (401, 403, 400)
    assert typo.json()["error"]["data"]["field"] == "resource"
    assert _cli(backend, "verify").returncode == 0
