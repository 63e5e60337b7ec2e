"""The database goes away and comes back while a replica runs (issue 11, "Database away").

The replica keeps its process: `/health` stays 200, `/ready` turns 503 so Kubernetes takes it out of
the Service, calls that need the store answer 503 with `Retry-After` (and nothing internal), and
when PostgreSQL is back the same process serves again, with every acknowledged write intact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.asgi import MCP_HEADERS, rpc
from tests.support.postgres import pause_postgres, start_postgres, stop_postgres
from tests.support.server import ServerProcess, start_server
from tests.support.wait import until


@pytest.fixture
def own_postgres(tmp_path: Path) -> Any:
    directory = tmp_path / "pg"
    url = start_postgres(directory, own=True)
    yield directory, url
    stop_postgres(directory, own=True)


def aql(operation: str, **params: Any) -> dict[str, Any]:
    family = "mcp_aql_create" if operation.startswith("create") else "mcp_aql_read"
    return rpc("tools/call", {"name": family, "arguments": {"operation": operation, "params": params}})


def envelope(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    return dict(json.loads(answer.json()["result"]["content"][0]["text"]))


def open_session(http: httpx.Client, server: ServerProcess) -> dict[str, str]:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    answer = http.post(server.url, json=rpc("initialize", init), headers=headers)
    return {**headers, "mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}


def test_while_the_database_is_away_calls_are_503_and_the_replica_recovers_by_itself(
    own_postgres: tuple[Path, str], tmp_path: Path
) -> None:
    directory, url = own_postgres
    (tmp_path / "state").mkdir()
    with start_server(tmp_path / "state", env={"AQL_MCP_STORE__URL": url}) as server, httpx.Client(timeout=10) as http:
        session = open_session(http, server)
        assert envelope(http.post(server.url, json=aql("create_collection", collection="notes"), headers=session))[
            "success"
        ]
        before = envelope(
            http.post(server.url, json=aql("create_record", collection="notes", data={"n": 1}), headers=session)
        )
        pause_postgres(directory)

        until(lambda: http.get(f"{server.base}/ready").status_code == 503, "/ready stayed 200 without a database")
        assert http.get(f"{server.base}/health").status_code == 200
        refused = http.post(server.url, json=aql("create_record", collection="notes", data={"n": 2}), headers=session)
        assert refused.status_code == 503
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.json()["error"]["code"] == -32006
        assert "postgres" not in refused.text.lower()
        assert "select" not in refused.text.lower()

        start_postgres(directory, own=True)
        until(lambda: http.get(f"{server.base}/ready").status_code == 200, "/ready did not recover", seconds=20)

        def write_works() -> bool:
            answer = http.post(
                server.url, json=aql("create_record", collection="notes", data={"n": 3}), headers=session
            )
            return answer.status_code == 200

        until(write_works, "writes did not recover", seconds=20)
        listed = envelope(http.post(server.url, json=aql("list_records", collection="notes"), headers=session))
        assert server.process.poll() is None, "the replica restarted"
    numbers = [item["n"] for item in listed["data"]["items"]]
    assert before["data"]["id"] in {item["id"] for item in listed["data"]["items"]}
    assert 2 not in numbers
    assert 3 in numbers
