"""The `executions` plugin against a real server on SQLite (MCP-AQL §8.4; docs/executions.md):
imports and exports in the background, their state on get_execution, cancellation, retry, the
session's end, a restart, and every refusal with its MCP-AQL code."""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from aql_mcp.plugins.executions.operations import CLIENT_CANCELLED
from tests.support.aql import Session, session
from tests.support.executions import (
    BIG,
    CREATE,
    EXECUTE,
    READ,
    follow,
    import_params,
    ndjson,
    read_resource,
    record_count,
    rows,
    settled,
)
from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.server import ServerProcess, start_server
from tests.support.wait import until


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("executions"), env=BIG, plugins=()) as started:
        yield started


def error_of(envelope: dict[str, Any]) -> dict[str, Any]:
    assert envelope["success"] is False, envelope
    return dict(envelope["error"])


def test_an_ndjson_import_runs_in_the_background_and_reports_rejected_rows(server: ServerProcess) -> None:
    with session(server, subject="ada") as caller:
        assert caller.call(CREATE, "create_collection", collection="people")["success"]
        payload = [*rows(2500), [1, 2], {"_etag": "x"}, {"id": "forged"}]
        text = base64.b64encode(
            b"".join(orjson.dumps(r) + b"\n" for r in payload[:10])
            + b"{not json\n"
            + b"".join(orjson.dumps(r) + b"\n" for r in payload[10:])
        ).decode()
        started = caller.call(EXECUTE, "execute_import", **import_params("people", text))["data"]
        assert started["status"] in ("pending", "running")
        assert started["execution_id"].startswith("exec_")
        done = settled(caller, started["execution_id"])
        assert done["status"] == "completed"
        assert done["progress"]["current"] == done["progress"]["total"] == 2504
        assert done["rejected"] == 4
        assert done["imported"] == 2500
        assert done["result"] == {"imported": 2500, "rejected": 4, "rows": 2504}
        assert {entry["row"] for entry in done["report"]} == {11, 2502, 2503, 2504}
        assert all(isinstance(entry["reason"], str) and entry["reason"] for entry in done["report"])
        assert done["started_at"].endswith("Z")
        assert done["finished_at"].endswith("Z")
        assert record_count(caller, "people") == 2500


def test_a_csv_import_takes_its_fields_from_the_header_row(server: ServerProcess) -> None:
    with session(server, subject="ada") as caller:
        assert caller.call(CREATE, "create_collection", collection="csv", fields=["name", "city"])["success"]
        body = 'name,city\nAda,London\n"Grace, H",Arlington\nonly-one-value\n'
        content = base64.b64encode(body.encode()).decode()
        started = caller.call(EXECUTE, "execute_import", **import_params("csv", content, "text/csv"))["data"]
        done = settled(caller, started["execution_id"])
        assert (done["status"], done["imported"], done["rejected"]) == ("completed", 2, 1)
        assert done["report"][0]["row"] == 3
        listed = caller.call(READ, "list_records", collection="csv", sort={"field": "name"})["data"]["items"]
        assert [(r["name"], r["city"]) for r in listed] == [("Ada", "London"), ("Grace, H", "Arlington")]


def test_an_export_is_readable_as_a_resource_by_its_owner_only(server: ServerProcess) -> None:
    with session(server, subject="exporter") as caller:
        assert caller.call(CREATE, "create_collection", collection="out")["success"]
        for i in range(3):
            assert caller.call(CREATE, "create_record", collection="out", data={"i": i})["success"]
        started = caller.call(EXECUTE, "execute_export", collection="out")["data"]
        done = settled(caller, started["execution_id"])
        uri = f"records://exports/{started['execution_id']}"
        assert done["status"] == "completed"
        assert done["result"]["exported"] == 3
        assert done["result"]["uri"] == uri
        contents = read_resource(caller, uri).json()["result"]["contents"][0]
        assert contents["mimeType"] == "application/x-ndjson"
        lines = [json.loads(line) for line in contents["text"].splitlines()]
        assert sorted(line["i"] for line in lines) == [0, 1, 2]
        assert all(line["collection"] == "out" for line in lines)
        # A small export is one part, read by its own URI too (docs/executions.md, "Reading an export").
        assert done["result"]["parts"] == 1
        part = read_resource(caller, f"{uri}/parts/0").json()
        assert part["result"]["contents"][0]["text"] == contents["text"]
        for missing in (f"{uri}/parts/1", f"{uri}/parts/00"):
            assert read_resource(caller, missing).json()["error"]["code"] == -32002
    with session(server, subject="intruder") as other:
        for target in (uri, f"{uri}/parts/0", "records://exports/exec_000000000000000000000000"):
            response = read_resource(other, target)
            assert response.status_code == 200
            assert response.json()["error"]["code"] == -32002
        assert error_of(other.call(READ, "get_execution", execution_id=started["execution_id"]))["code"] == (
            "NOT_FOUND_RESOURCE"
        )


def test_an_export_over_its_size_cap_fails_with_a_clear_error(server: ServerProcess) -> None:
    with session(server, subject="bulky") as caller:
        assert caller.call(CREATE, "create_collection", collection="big")["success"]
        content = ndjson([{"text": "x" * 900, "n": i} for i in range(300)])
        settled(caller, caller.call(EXECUTE, "execute_import", **import_params("big", content))["data"]["execution_id"])
        started = caller.call(EXECUTE, "execute_export", collection="big")["data"]
        done = settled(caller, started["execution_id"])
        assert done["status"] == "failed"
        assert done["error"]["code"] == "VALIDATION_PAYLOAD_TOO_LARGE"


def test_bad_imports_are_refused_with_their_mcp_aql_codes(server: ServerProcess) -> None:
    with session(server, subject="careless") as caller:
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        refusals = {
            "VALIDATION_INVALID_ENCODING": import_params("c", "not base64!"),
            "NOT_FOUND_RESOURCE": import_params("missing", ndjson(rows(1))),
        }
        for code, params in refusals.items():
            assert error_of(caller.call(EXECUTE, "execute_import", **params))["code"] == code
        wrong_type = caller.call(EXECUTE, "execute_import", **import_params("c", ndjson(rows(1)), "text/html"))
        assert error_of(wrong_type)["code"].startswith("VALIDATION_")
        unknown = caller.call(READ, "get_execution", execution_id="exec_000000000000000000000000")
        assert error_of(unknown)["code"] == "NOT_FOUND_RESOURCE"
        malformed = caller.call(READ, "get_execution", execution_id="../../etc")
        assert error_of(malformed)["code"].startswith("VALIDATION_")
        assert caller.call(READ, "list_executions")["data"] == {"items": [], "count": 0}


def test_an_import_over_the_payload_cap_is_refused(tmp_path: Path) -> None:
    env = {"AQL_MCP_EXECUTIONS__MAX_IMPORT_BYTES": "2048"}
    with start_server(tmp_path, env=env, plugins=()) as small, session(small, subject="big") as caller:
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        refused = caller.call(EXECUTE, "execute_import", **import_params("c", ndjson(rows(200))))
        assert error_of(refused)["code"] == "VALIDATION_PAYLOAD_TOO_LARGE"
        assert error_of(refused)["details"]["max_bytes"] == 2048


def test_a_tenant_over_its_retained_bytes_is_refused_an_import_until_it_frees_some(tmp_path: Path) -> None:
    """Failed imports keep their payloads for a retry: the tenant's total kept is capped
    (executions.max_retained_bytes_per_tenant), an import past it refused with nothing stored."""
    env = {
        "AQL_MCP_RECORDS__MAX_RECORDS": "10",
        "AQL_MCP_EXECUTIONS__MAX_RETAINED_BYTES_PER_TENANT": "4096",
    }
    content = ndjson(rows(60))  # about 1.5 KB: each import fails on the record quota, keeping it
    with start_server(tmp_path, env=env, plugins=()) as small, session(small, subject="hoarder") as caller:
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        kept = []
        for _ in range(2):
            started = caller.call(EXECUTE, "execute_import", **import_params("c", content))["data"]
            failed = settled(caller, started["execution_id"])
            assert failed["error"]["code"] == "RATE_LIMIT_QUOTA_EXHAUSTED"
            kept.append(failed["execution_id"])
        refused = error_of(caller.call(EXECUTE, "execute_import", **import_params("c", content)))
        assert refused["code"] == "RATE_LIMIT_QUOTA_EXHAUSTED"
        assert refused["details"]["metric"] == "retained_bytes"
        assert refused["details"]["hard_stop_threshold"] == 4096
        assert refused["details"]["current"] > 2048
        assert caller.call(READ, "list_executions")["data"]["count"] == 2  # nothing stored
        with session(small, subject="other") as other:
            # Another tenant's kept bytes are its own.
            assert other.call(CREATE, "create_collection", collection="c")["success"]
            assert other.call(EXECUTE, "execute_import", **import_params("c", ndjson(rows(5))))["success"]


def test_too_many_live_executions_are_refused_and_cancel_frees_a_slot(server: ServerProcess) -> None:
    with session(server, subject="busy") as caller:
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        content = ndjson(rows(100_000))
        ids = [
            caller.call(EXECUTE, "execute_import", **import_params("c", content))["data"]["execution_id"]
            for _ in range(3)
        ]
        refused = error_of(caller.call(EXECUTE, "execute_import", **import_params("c", content)))
        assert refused["code"] == "RATE_LIMIT_QUOTA_EXHAUSTED"
        assert refused["details"]["hard_stop_threshold"] == 3
        for execution_id in ids:
            cancelled = caller.call(EXECUTE, "cancel_execution", execution_id=execution_id)["data"]
            assert (cancelled["status"], cancelled["cancelled"]) == ("cancelled", True)
        again = caller.call(EXECUTE, "cancel_execution", execution_id=ids[0])["data"]
        assert (again["status"], again["cancelled"]) == ("cancelled", False)
        retried = error_of(caller.call(EXECUTE, "retry_execution", execution_id=ids[0]))
        assert retried["code"] == "CONFLICT_INVALID_STATE"
        assert retried["details"]["status"] == "cancelled"
        finished = settled(caller, ids[0])
        assert finished["progress"]["current"] % 1000 == 0
        listed = caller.call(READ, "list_executions", status="cancelled")["data"]
        assert {item["execution_id"] for item in listed["items"]} == set(ids)
        assert record_count(caller, "c") == sum(settled(caller, i)["progress"]["current"] for i in ids)


def test_introspection_shows_the_lifecycle_of_the_execute_operations(server: ServerProcess) -> None:
    """MCP-AQL §8.4.5."""
    with session(server) as caller:
        for name in ("execute_import", "execute_export", "cancel_execution", "retry_execution"):
            lifecycle = caller.details(name)["lifecycle"]
            assert lifecycle == {
                "states": ["pending", "running", "completed", "failed", "cancelled"],
                "supports_cancel": True,
                "supports_retry": True,
                "progress_reporting": True,
            }


def test_an_import_of_100000_rows_reports_progress_and_a_cancel_midway_leaves_whole_batches(
    server: ServerProcess,
) -> None:
    """notifications/cancelled of the following call reaches the worker; every batch is atomic."""
    with session(server, subject="hundred") as caller:
        assert caller.call(CREATE, "create_collection", collection="big")["success"]
        arguments = {"operation": "execute_import", "params": import_params("big", ndjson(rows(100_000)))}
        seen: list[float] = []
        for message in follow(caller, arguments, "imp-1"):
            if message.get("method") == "notifications/progress":
                assert message["params"]["progressToken"] == "imp-1"
                seen.append(message["params"]["progress"])
                if message["params"]["progress"] >= 20_000:
                    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
                    assert caller.http.post("/mcp", json=cancel, headers=caller.headers).status_code == 202
                    break
        assert seen == sorted(set(seen)), "progress must increase"
        assert seen[-1] >= 20_000
        execution_id = caller.call(READ, "list_executions")["data"]["items"][0]["execution_id"]
        done = settled(caller, execution_id)
        assert done["status"] == "cancelled"
        current = done["progress"]["current"]
        assert 20_000 <= current < 100_000
        assert current % 1000 == 0
        assert record_count(caller, "big") == current == done["imported"]


def test_deleting_the_session_cancels_its_running_import(server: ServerProcess) -> None:
    """MCP-AQL §2.3.3: in-progress executions do not survive their session."""
    with session(server, subject="leaver") as caller:
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        started = caller.call(EXECUTE, "execute_import", **import_params("c", ndjson(rows(100_000))))["data"]
        assert caller.http.delete("/mcp", headers=caller.headers).status_code in (200, 204)
    with session(server, subject="leaver") as again:
        done = settled(again, started["execution_id"])
        assert done["status"] == "cancelled"
        assert done["progress"]["current"] % 1000 == 0
        assert record_count(again, "c") == done["progress"]["current"]


def test_a_restart_fails_the_running_import_with_a_reason_and_retry_resumes_it(tmp_path: Path) -> None:
    with start_server(tmp_path, env=BIG, plugins=()) as first, session(first, subject="phoenix") as caller:
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        started = caller.call(EXECUTE, "execute_import", **import_params("c", ndjson(rows(100_000))))["data"]
        execution_id = started["execution_id"]
        until(
            lambda: caller.call(READ, "get_execution", execution_id=execution_id)["data"]["progress"]["current"] > 0,
            "the import did not start",
        )
        first.process.kill()  # no shutdown at all: the next start finds it running
        first.process.wait()
    with start_server(tmp_path, env=BIG, plugins=()) as second, session(second, subject="phoenix") as caller:
        failed = caller.call(READ, "get_execution", execution_id=execution_id)["data"]
        assert failed["status"] == "failed"
        assert failed["error"]["details"]["reason"] == "replica_stopped"
        kept = failed["progress"]["current"]
        assert kept % 1000 == 0
        assert record_count(caller, "c") == kept
        resumed = caller.call(EXECUTE, "retry_execution", execution_id=execution_id)["data"]
        assert resumed["status"] == "running"
        assert resumed["attempts"] == 2
        done = settled(caller, execution_id, 120.0)
        assert done["status"] == "completed"
        assert record_count(caller, "c") == 100_000 == done["imported"]


def test_a_graceful_stop_fails_the_running_import_with_a_reason(tmp_path: Path) -> None:
    with start_server(tmp_path, env=BIG, plugins=()) as first, session(first, subject="calm") as caller:
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        execution_id = caller.call(EXECUTE, "execute_import", **import_params("c", ndjson(rows(100_000))))["data"][
            "execution_id"
        ]
    with start_server(tmp_path, env=BIG, plugins=()) as second, session(second, subject="calm") as caller:
        stopped = caller.call(READ, "get_execution", execution_id=execution_id)["data"]
        assert stopped["status"] == "failed"
        assert stopped["error"]["details"]["reason"] == "replica_shutdown"
        assert record_count(caller, "c") == stopped["progress"]["current"]


def test_a_graceful_stop_fails_a_followed_import_rather_than_cancelling_it(tmp_path: Path) -> None:
    """Only notifications/cancelled cancels a followed execution: the shutdown cancelling the
    following call leaves it to the worker's stop (failed, replica_shutdown), which a retry resumes."""
    seen = threading.Event()

    def follow_until_cut(caller: Session, arguments: dict[str, Any]) -> None:
        with contextlib.suppress(httpx.HTTPError):
            for message in follow(caller, arguments, "f-1"):
                if message.get("method") == "notifications/progress":
                    seen.set()

    # No grace: the shutdown cancels the following call at once, long before the import could end.
    quick = {**BIG, "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0", "AQL_MCP_SHUTDOWN__GRACE_SECONDS": "0"}
    with start_server(tmp_path, env=quick, plugins=()) as first, session(first, subject="followed") as caller:
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        arguments = {"operation": "execute_import", "params": import_params("c", ndjson(rows(100_000)))}
        follower = threading.Thread(target=follow_until_cut, args=(caller, arguments), daemon=True)
        follower.start()
        assert seen.wait(60), "no progress before the stop"
    follower.join(60)
    with start_server(tmp_path, env=BIG, plugins=()) as second, session(second, subject="followed") as caller:
        execution_id = caller.call(READ, "list_executions")["data"]["items"][0]["execution_id"]
        stopped = caller.call(READ, "get_execution", execution_id=execution_id)["data"]
        assert stopped["status"] == "failed"
        assert stopped["error"]["details"]["reason"] == "replica_shutdown"


def test_an_execution_answers_on_the_modern_era_too(server: ServerProcess) -> None:
    token = server.token(subject="modern")
    with httpx.Client(base_url=server.base, timeout=20) as http:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": READ,
                "arguments": {"operation": "list_executions", "params": {}},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                },
            },
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "authorization": f"Bearer {token}",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "tools/call",
            "mcp-name": READ,
            "mcp-param-operation": "list_executions",
        }
        answer = http.post("/mcp", json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["structuredContent"]["data"] == {"items": [], "count": 0}


def test_closing_a_modern_followed_import_cancels_it(server: ServerProcess) -> None:
    """On the 2026-07-28 wire closing the request is the client's cancellation (docs/executions.md,
    "Following an execution"): the import it followed is cancelled, whole batches kept."""
    token = server.token(subject="closer")
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "progressToken": "closed-1",
    }
    arguments = {"operation": "execute_import", "params": import_params("c", ndjson(rows(100_000)))}
    body = modern_body("tools/call", {"name": EXECUTE, "arguments": arguments}, meta, 5)
    with session(server, subject="closer") as caller:
        assert caller.call(CREATE, "create_collection", collection="c")["success"]
        with httpx.Client(base_url=server.base, timeout=60) as http:
            headers = modern_headers(token, "tools/call", EXECUTE, arguments=arguments)
            with http.stream("POST", "/mcp", json=body, headers=headers) as response:
                assert response.status_code == 200
                execution_id = _first_progress(response)
            # Leaving the stream unread closes the connection: the follow is cancelled.
        done = settled(caller, execution_id)
        assert done["status"] == "cancelled", done
        assert done["progress"]["message"] == CLIENT_CANCELLED
        assert done["progress"]["current"] < 100_000
        assert record_count(caller, "c") == done["progress"]["current"]


def _first_progress(response: httpx.Response) -> str:
    """The execution id the first progress notification of a following call names."""
    for line in response.iter_lines():
        payload = line.removeprefix("data:").strip()
        if line.startswith("data:") and payload:
            message = json.loads(payload)
            if message.get("method") == "notifications/progress":
                return str(message["params"]["message"]).split()[0]
    raise AssertionError("the following call ended without progress")
