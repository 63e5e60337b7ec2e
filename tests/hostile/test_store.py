"""A store that cannot write (issue 12): another process holds the write lock, the disk is full, the
file is read-only, the PostgreSQL database refuses writes or a table is locked by another client.

What must hold against a real `aql-mcp serve` (docs/store.md, "When the store cannot write"): only
the calls that write fail, each with 503 + `Retry-After` and JSON-RPC -32006 (corporate standard
Appendix B) within a bounded wait and with nothing internal in the answer; `ping`, `/health` and
reads keep answering; `/ready` turns 503 (corporate §16.2) so the replica leaves the rotation while
`/health` stays 200 (liveness must not restart it); when the cause goes away the same process
writes again, with every acknowledged write intact.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.store.factory import SQLITE_FILE
from tests.support.asgi import MCP_HEADERS, initialize_params, rpc
from tests.support.filesystem import fill, mount_read_only, small_filesystem, unmount
from tests.support.postgres import start_postgres, stop_postgres
from tests.support.redaction import remember_secret
from tests.support.server import ServerProcess, start_server
from tests.support.wait import until

# Generous for one call, far below what the writes queued behind an outside lock took before the
# fix (each waited the whole busy timeout in turn): a stalled server times the client out.
CLIENT_SECONDS = 15.0
# No client-side rate limit gets in the way of filling a disk.
UNLIMITED = {"AQL_MCP_LIMITS__RATE_PER_SECOND": "100000", "AQL_MCP_LIMITS__RATE_BURST": "100000"}
BLOB = "x" * 50_000


def aql(operation: str, **params: Any) -> dict[str, Any]:
    family = "mcp_aql_create" if operation.startswith("create") else "mcp_aql_read"
    return rpc("tools/call", {"name": family, "arguments": {"operation": operation, "params": params}})


def envelope(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    return dict(json.loads(answer.json()["result"]["content"][0]["text"]))


def open_session(http: httpx.Client, server: ServerProcess, token: str | None = None) -> dict[str, str]:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token or server.token()}"}
    answer = http.post(server.url, json=rpc("initialize", initialize_params()), headers=headers)
    assert answer.status_code == 200, answer.text
    return {**headers, "mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}


def create(http: httpx.Client, server: ServerProcess, session: dict[str, str], **data: Any) -> httpx.Response:
    return http.post(server.url, json=aql("create_record", collection="notes", data=data), headers=session)


def assert_store_unavailable(answer: httpx.Response) -> None:
    """503 + Retry-After + -32006, and nothing of the engine in the answer."""
    assert answer.status_code == 503, answer.text
    assert int(answer.headers["retry-after"]) >= 1
    assert answer.json()["error"]["code"] == -32006
    for internal in ("sqlite", "postgres", "locked", "disk", "select", "insert", "traceback", ".py", "/tmp"):
        assert internal not in answer.text.lower(), internal


def status(http: httpx.Client, url: str) -> int:
    return http.get(url).status_code


def writes_again(http: httpx.Client, server: ServerProcess, session: dict[str, str]) -> bool:
    return create(http, server, session, n=-1).status_code == 200


# --- SQLite: a write lock held by another process ------------------------------------------------


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[ServerProcess]:
    (tmp_path / "state").mkdir()
    with start_server(tmp_path / "state") as server:
        yield server


def test_an_outside_write_lock_fails_only_the_writes_and_lifts_by_itself(sqlite_server: ServerProcess) -> None:
    server = sqlite_server
    with httpx.Client(timeout=CLIENT_SECONDS) as http:
        session = open_session(http, server)
        assert envelope(http.post(server.url, json=aql("create_collection", collection="notes"), headers=session))[
            "success"
        ]
        kept = envelope(create(http, server, session, n=1))["data"]["id"]
        outsider = sqlite3.connect(server.state / SQLITE_FILE, isolation_level=None, timeout=0)
        outsider.execute("BEGIN EXCLUSIVE")
        try:
            assert http.post(server.url, json=rpc("ping"), headers=session).status_code == 200
            assert status(http, f"{server.base}/health") == 200
            read = envelope(http.post(server.url, json=aql("get_record", collection="notes", id=kept), headers=session))
            assert read["data"]["n"] == 1
            # Eight writes at once: each fails on its own within the lock timeout, none waits for
            # the others' timeouts in turn (the client would time out first).
            with ThreadPoolExecutor(8) as pool:
                refused = list(pool.map(lambda n: create(http, server, session, n=n), range(2, 10)))
            for answer in refused:
                assert_store_unavailable(answer)
            assert_store_unavailable(
                http.post(
                    server.url,
                    json=rpc("initialize", initialize_params()),
                    headers={**MCP_HEADERS, "authorization": session["authorization"]},
                )
            )
            until(lambda: status(http, f"{server.base}/ready") == 503, "/ready stayed 200 under an outside write lock")
        finally:
            outsider.execute("ROLLBACK")
            outsider.close()
        until(lambda: writes_again(http, server, session), "writes did not recover after the lock went away")
        until(lambda: status(http, f"{server.base}/ready") == 200, "/ready did not recover after the lock went away")
        listed = envelope(http.post(server.url, json=aql("list_records", collection="notes"), headers=session))
    assert server.process.poll() is None, "the server restarted"
    numbers = {item["n"] for item in listed["data"]["items"]}
    assert numbers <= {-1, 1}, "a refused write was stored"
    assert 1 in numbers


# --- SQLite: a full disk --------------------------------------------------------------------------


def test_a_full_disk_fails_writes_and_readiness_and_writes_resume_when_space_is_freed(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    with small_filesystem(tmp_path / "disk", "16m") as disk:
        env = {**UNLIMITED, "AQL_MCP_STORE__PATH": str(disk)}
        # The log stays off the small disk: only the store fills it.
        with start_server(tmp_path / "state", env=env) as server, httpx.Client(timeout=CLIENT_SECONDS) as http:
            token = remember_secret(
                DevIssuer(state_dir=disk, issuer=server.base, audience=server.url).mint(
                    subject="tester", scopes=["mcp"], ttl=600
                )
            )
            session = open_session(http, server, token)
            assert envelope(http.post(server.url, json=aql("create_collection", collection="notes"), headers=session))[
                "success"
            ]
            acknowledged = {envelope(create(http, server, session, n=n))["data"]["id"]: n for n in range(3)}
            filler = fill(disk)
            refused = None
            for n in range(3, 600):
                answer = create(http, server, session, n=n, blob=BLOB)
                if answer.status_code != 200:
                    refused = answer
                    break
                acknowledged[envelope(answer)["data"]["id"]] = n
            assert refused is not None, "the full disk took every write"
            assert_store_unavailable(refused)
            until(lambda: status(http, f"{server.base}/ready") == 503, "/ready stayed 200 on a full disk")
            assert status(http, f"{server.base}/health") == 200
            assert http.post(server.url, json=rpc("ping"), headers=session).status_code == 200

            filler.unlink()
            until(lambda: writes_again(http, server, session), "writes did not resume after space was freed")
            until(lambda: status(http, f"{server.base}/ready") == 200, "/ready did not recover after space was freed")
            for record_id, n in acknowledged.items():
                stored = envelope(
                    http.post(server.url, json=aql("get_record", collection="notes", id=record_id), headers=session)
                )
                assert stored["data"]["n"] == n
                assert stored["data"].get("blob", BLOB) == BLOB
            assert server.process.poll() is None, "the server restarted"
        assert "Traceback" not in server.log_text()


# --- SQLite: a read-only file ---------------------------------------------------------------------


def test_a_read_only_store_file_is_not_ready_and_writes_resume_once_it_is_writable(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with start_server(state) as server, httpx.Client(timeout=CLIENT_SECONDS) as http:
        session = open_session(http, server)
        envelope(http.post(server.url, json=aql("create_collection", collection="notes"), headers=session))
        kept = envelope(create(http, server, session, n=1))["data"]["id"]
    mount_read_only(state / SQLITE_FILE)
    try:
        with start_server(state) as server, httpx.Client(timeout=CLIENT_SECONDS) as http:
            assert open_session_or_none(http, server) is None, "a session was stored in a read-only file"
            until(lambda: status(http, f"{server.base}/ready") == 503, "/ready stayed 200 on a read-only file")
            body = http.get(f"{server.base}/ready").json()
            assert body == {"status": "not_ready", "checks": {"store": "ok", "store_write": "unavailable"}}
            assert status(http, f"{server.base}/health") == 200

            unmount(state / SQLITE_FILE)
            until(lambda: open_session_or_none(http, server) is not None, "writes did not resume")
            until(lambda: status(http, f"{server.base}/ready") == 200, "/ready did not recover")
            session = open_session(http, server)
            read = envelope(http.post(server.url, json=aql("get_record", collection="notes", id=kept), headers=session))
            assert read["data"]["n"] == 1
            assert server.process.poll() is None, "the server restarted"
    finally:
        unmount(state / SQLITE_FILE)


def open_session_or_none(http: httpx.Client, server: ServerProcess) -> dict[str, str] | None:
    """`initialize` writes the session: on a store that cannot write it is a clean 503."""
    headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
    answer = http.post(server.url, json=rpc("initialize", initialize_params()), headers=headers)
    if answer.status_code == 200:
        return {**headers, "mcp-session-id": answer.headers["mcp-session-id"]}
    assert_store_unavailable(answer)
    return None


# --- PostgreSQL: a database that refuses writes, a table locked by another client ----------------


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[str]:
    directory = tmp_path / "pg"
    url = start_postgres(directory, own=True)
    yield url
    stop_postgres(directory, own=True)


def run_sql(url: str, *statements: str) -> None:
    async def run() -> None:
        connection = await asyncpg.connect(url)
        try:
            for statement in statements:
                await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(run())


def test_a_read_only_postgres_takes_the_replica_out_of_rotation_while_reads_work(
    own_postgres: str, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    env = {"AQL_MCP_STORE__URL": own_postgres}
    with start_server(tmp_path / "state", env=env) as server, httpx.Client(timeout=CLIENT_SECONDS) as http:
        session = open_session(http, server)
        envelope(http.post(server.url, json=aql("create_collection", collection="notes"), headers=session))
        kept = envelope(create(http, server, session, n=1))["data"]["id"]
        # What a replica meets on a standby, or an operator's read-only switch: every new transaction
        # of every session, the pool's open connections included, is read-only.
        run_sql(own_postgres, "ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()")
        try:
            until(lambda: status(http, f"{server.base}/ready") == 503, "/ready stayed 200 on a read-only database")
            assert http.get(f"{server.base}/ready").json()["checks"]["store_write"] == "unavailable"
            assert status(http, f"{server.base}/health") == 200
            read = envelope(http.post(server.url, json=aql("get_record", collection="notes", id=kept), headers=session))
            assert read["data"]["n"] == 1
            assert_store_unavailable(create(http, server, session, n=2))
        finally:
            run_sql(own_postgres, "ALTER SYSTEM RESET default_transaction_read_only", "SELECT pg_reload_conf()")
        until(lambda: status(http, f"{server.base}/ready") == 200, "/ready did not recover")
        until(lambda: writes_again(http, server, session), "writes did not recover")
        assert server.process.poll() is None, "the replica restarted"


def test_a_table_locked_by_another_client_fails_its_calls_after_the_lock_timeout_not_the_replica(
    database: str, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    env = {"AQL_MCP_STORE__URL": database, "AQL_MCP_STORE__POOL_MAX_SIZE": "4"}
    with start_server(tmp_path / "state", env=env) as server, httpx.Client(timeout=CLIENT_SECONDS) as http:
        session = open_session(http, server)
        envelope(http.post(server.url, json=aql("create_collection", collection="notes"), headers=session))

        async def hold_and_call() -> list[httpx.Response]:
            locker = await asyncpg.connect(database)
            try:
                async with locker.transaction():
                    await locker.execute("LOCK TABLE records IN ACCESS EXCLUSIVE MODE")
                    # More calls than the pool has connections: none may hold one past its lock timeout.
                    async with httpx.AsyncClient(timeout=CLIENT_SECONDS) as client:
                        writes = [
                            client.post(
                                server.url,
                                json=aql("create_record", collection="notes", data={"n": n}),
                                headers=session,
                            )
                            for n in range(8)
                        ]
                        answers = await asyncio.gather(*writes)
                        answers.append(await client.post(server.url, json=rpc("ping"), headers=session))
                        answers.append(await client.get(f"{server.base}/health"))
                        return answers
            finally:
                await locker.close()

        *refused, ping, health = asyncio.run(hold_and_call())
        for answer in refused:
            assert_store_unavailable(answer)
        assert ping.status_code == 200
        assert health.status_code == 200
        until(lambda: writes_again(http, server, session), "writes did not recover after the lock went away")
        assert server.process.poll() is None
