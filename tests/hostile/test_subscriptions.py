"""Subscribing to what one cannot read (issue 27, N5): `resources/subscribe` (MCP 2025-11-25
server/resources, "Subscriptions") and `subscriptions/listen` (MCP 2026-07-28
basic/patterns/subscriptions) acknowledged another tenant's export and a URI that names nothing,
although docs/eras.md says the check is the one `resources/read` makes.

What must hold against a real `aql-mcp serve`: both refuse exactly what `resources/read` refuses
for the same caller and URI, with the same status and code, and still accept the owner's own export.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.aql import LEAKS, Session, session
from tests.support.executions import CREATE, EXECUTE, settled
from tests.support.listen import META, listen_body, open_listen
from tests.support.modern import modern_headers
from tests.support.server import ServerProcess, start_server

NOWHERE = "records://exports/exec_000000000000000000000000"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("subscriptions"), plugins=()) as started:
        yield started


@pytest.fixture(scope="module")
def export_uri(server: ServerProcess) -> str:
    """A completed export of the tenant `owner`."""
    with session(server, subject="owner") as caller:
        assert caller.call(CREATE, "create_collection", collection="secrets")["success"]
        assert caller.call(CREATE, "create_record", collection="secrets", data={"pin": 1234})["success"]
        started = caller.call(EXECUTE, "execute_export", collection="secrets")["data"]
        assert settled(caller, started["execution_id"])["status"] == "completed"
        return f"records://exports/{started['execution_id']}"


def legacy(caller: Session, method: str, uri: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": {"uri": uri}}
    response = caller.http.post("/mcp", json=body, headers=caller.headers)
    assert not any(leak in response.text for leak in LEAKS), response.text
    return response


def read_modern(server: ServerProcess, token: str, uri: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": uri, "_meta": META}}
    return httpx.post(server.url, json=body, headers=modern_headers(token, "resources/read", uri), timeout=10)


def refusal(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC error without the request id every answer carries."""
    error = dict(response.json()["error"])
    error["data"] = {key: value for key, value in error.get("data", {}).items() if key != "requestId"}
    return error


def test_legacy_subscribe_refuses_what_read_refuses(server: ServerProcess, export_uri: str) -> None:
    with session(server, subject="intruder") as other:
        for uri in (export_uri, NOWHERE):
            read = legacy(other, "resources/read", uri)
            subscribed = legacy(other, "resources/subscribe", uri)
            assert read.json()["error"]["code"] == -32002
            assert subscribed.status_code == read.status_code
            assert refusal(subscribed) == refusal(read)


def test_legacy_subscribe_still_accepts_the_owners_own_export(server: ServerProcess, export_uri: str) -> None:
    with session(server, subject="owner") as caller:
        assert legacy(caller, "resources/subscribe", export_uri).json()["result"] == {}


def test_listen_refuses_what_read_refuses(server: ServerProcess, export_uri: str) -> None:
    token = server.token(subject="intruder")
    for uri in (export_uri, NOWHERE):
        read = read_modern(server, token, uri)
        body = listen_body({"resourceSubscriptions": [uri]}, 5)
        headers = modern_headers(token, "subscriptions/listen")
        # Streamed, so a stream the server wrongly opened fails the test at once instead of hanging it.
        with httpx.stream("POST", server.url, json=body, headers=headers, timeout=10) as listen:
            assert read.status_code == 400
            assert listen.status_code == read.status_code
            assert listen.headers["content-type"].startswith("application/json")
            listen.read()
            assert refusal(listen) == refusal(read)


@pytest.mark.anyio
async def test_listen_still_acknowledges_the_owners_own_export(server: ServerProcess, export_uri: str) -> None:
    token = server.token(subject="owner")
    async with (
        httpx.AsyncClient(timeout=10) as http,
        open_listen(http, server.url, token, {"resourceSubscriptions": [export_uri]}) as stream,
    ):
        assert stream.response.status_code == 200
        acknowledged = await stream.next()
        assert acknowledged["params"]["notifications"] == {"resourceSubscriptions": [export_uri]}
