"""Modern (MCP 2026-07-28) requests over three PostgreSQL-backed replicas, with no affinity (issue 13).

2026-07-28 has no session and no handshake: every request carries its version, client info and
capabilities in `_meta`, so any replica may answer any request. A request that asks the client is
answered `input_required` and retried by the client (basic/patterns/mrtr, which exists so a server
needs neither "a shared storage layer across server instances" nor "stateful load balancing"): the
retry may land on another replica, which must open the `requestState` the first one sealed. What
the replicas share for that is the store (docs/store.md) and `mcp.request_state_key`
(docs/eras.md, "Asking the client"); the negative test below shows the key is what it takes.

Which replica served a request is never assumed from where it was sent: each request carries its
own X-Request-Id, and `Replicas.served` finds the one replica whose access log has it.
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import orjson
import pytest
from mcp import Client, types
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.replicas import Replicas, RoundRobin, start_replicas

DEADLINE = 20.0
A, B, C = 0, 1, 2
MODERN_ERA = {"AQL_MCP_MCP__MODERN_ERA": "true", "AQL_MCP_AQL__CONFIRM_WITH_ELICITATION": "true"}
# Where the Mcp-Name header comes from (2026-07-28 Streamable HTTP, "Standard Request Headers").
NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
ELICITATION: dict[str, Any] = {"elicitation": {}}
YES = {"action": "accept", "content": {"confirm": True}}


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    root = tmp_path_factory.mktemp("modern-replicas")
    with start_replicas(root, database, env=MODERN_ERA, share_request_state_key=True) as started:
        yield started


class Modern:
    """Raw modern requests to a chosen replica, each checked to be served by that replica and
    answered without a session."""

    def __init__(self, replicas: Replicas, subject: str, capabilities: dict[str, Any] | None = None) -> None:
        self.replicas = replicas
        self.token = replicas.token(subject)
        self.meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "replicas-modern", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        }
        self.ids = itertools.count(1)

    def post(self, replica: int, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        name = (params or {}).get(NAME_PARAM[method]) if method in NAME_PARAM else None
        request_id = f"modern-{secrets.token_hex(8)}"
        arguments = (params or {}).get("arguments") if method == "tools/call" else None
        headers = {**modern_headers(self.token, method, name, arguments=arguments), "x-request-id": request_id}
        body = modern_body(method, params, self.meta, next(self.ids))
        response = httpx.post(self.replicas.servers[replica].url, json=body, headers=headers, timeout=DEADLINE)
        assert self.replicas.served(request_id) == replica
        assert "mcp-session-id" not in response.headers
        return response

    def result(self, replica: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.post(replica, method, params)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()["result"]
        return result

    def aql(self, replica: int, tool: str, operation: str, **params: Any) -> dict[str, Any]:
        """The MCP-AQL envelope of one operation (or the `input_required` result, when it asks)."""
        arguments = {"operation": operation, "params": params}
        return self.result(replica, "tools/call", {"name": tool, "arguments": arguments})


def envelope(result: dict[str, Any]) -> dict[str, Any]:
    assert result["resultType"] == "complete", result
    structured: dict[str, Any] = result["structuredContent"]
    return structured


def test_modern_requests_spread_over_the_replicas_get_the_same_answers_and_see_the_same_data(
    replicas: Replicas,
) -> None:
    """2026-07-28 server/discover and the list, read and get methods answer alike on every replica;
    a record written through one replica is read through the two others."""
    client = Modern(replicas, "spread-" + secrets.token_hex(3))
    discovered = [client.result(replica, "server/discover") for replica in (A, B, C)]
    listed = [client.result(replica, "tools/list") for replica in (B, C, A)]
    read = client.result(C, "resources/read", {"uri": "test://static-text"})
    prompt = client.result(A, "prompts/get", {"name": "test_simple_prompt"})
    envelope(client.aql(A, "mcp_aql_create", "create_collection", collection="notes"))
    created = envelope(client.aql(A, "mcp_aql_create", "create_record", collection="notes", data={"n": 1}))["data"]
    on_b = envelope(client.aql(B, "mcp_aql_read", "get_record", collection="notes", id=created["id"]))["data"]
    on_c = envelope(client.aql(C, "mcp_aql_read", "list_records", collection="notes"))["data"]

    assert all(MODERN in answer["supportedVersions"] for answer in discovered)
    assert discovered[0]["capabilities"] == discovered[1]["capabilities"] == discovered[2]["capabilities"]
    orders = [[tool["name"] for tool in answer["tools"]] for answer in listed]
    assert orders[0] == orders[1] == orders[2]
    assert {"mcp_aql_read", "test_input_required_result_multi_round"} <= set(orders[0])
    assert read["contents"][0]["text"]
    assert prompt["messages"]
    assert on_b["id"] == created["id"]
    assert on_b["n"] == 1
    assert [item["id"] for item in on_c["items"]] == [created["id"]]


def test_a_three_round_request_runs_each_round_on_another_replica(replicas: Replicas) -> None:
    """mrtr "Basic Workflow": each retry echoes the latest `requestState`; round 1 is answered by
    A, round 2 by B and round 3 by C, each opening the state another replica sealed."""
    client = Modern(replicas, "rounds-" + secrets.token_hex(3), ELICITATION)
    call = {"name": "test_input_required_result_multi_round", "arguments": {}}
    one = client.result(A, "tools/call", call)
    name = {"action": "accept", "content": {"name": "Alice"}}
    two = client.result(
        B, "tools/call", {**call, "inputResponses": {"step1": name}, "requestState": one["requestState"]}
    )
    color = {"action": "accept", "content": {"color": "blue"}}
    three = client.result(
        C, "tools/call", {**call, "inputResponses": {"step2": color}, "requestState": two["requestState"]}
    )

    assert (one["resultType"], set(one["inputRequests"])) == ("input_required", {"step1"})
    assert (two["resultType"], set(two["inputRequests"])) == ("input_required", {"step2"})
    assert three["resultType"] == "complete"
    assert three["content"][0]["text"] == "Alice likes blue"


def test_a_dangerous_operation_asked_on_one_replica_is_confirmed_on_another(replicas: Replicas) -> None:
    """The MCP-AQL gatekeeper with `aql.confirm_with_elicitation`: the delete asked on B is
    confirmed by the retry on C, which runs it (its audit line says so), and A sees it gone."""
    client = Modern(replicas, "gate-" + secrets.token_hex(3), ELICITATION)
    envelope(client.aql(A, "mcp_aql_create", "create_collection", collection="doomed"))
    delete = {
        "name": "mcp_aql_delete",
        "arguments": {"operation": "delete_collection", "params": {"collection": "doomed"}},
    }
    asked = client.result(B, "tools/call", delete)
    assert asked["resultType"] == "input_required"
    ((key, question),) = asked["inputRequests"].items()
    assert question["method"] == "elicitation/create"
    retry = client.post(
        C, "tools/call", {**delete, "inputResponses": {key: YES}, "requestState": asked["requestState"]}
    )
    after = envelope(client.aql(A, "mcp_aql_read", "list_collections"))["data"]

    assert retry.status_code == 200, retry.text
    assert envelope(retry.json()["result"])["data"]["deleted"] is True
    assert "doomed" not in {item["name"] for item in after["items"]}
    request_id = retry.headers["x-request-id"]
    assert ("confirmation", "approved") in audit_events(replicas, C, request_id)
    assert all(not audit_events(replicas, other, request_id) for other in (A, B))


def audit_events(replicas: Replicas, replica: int, request_id: str) -> list[tuple[str, str]]:
    """The (kind, outcome) of the audit events a replica logged while serving one request."""
    events = []
    for line in replicas.servers[replica].log_text().splitlines():
        entry = json.loads(line) if line.startswith("{") else {}
        if entry.get("event") == "audit_event" and entry.get("request_id") == request_id:
            events.append((entry["audit"], entry["outcome"]))
    return events


def test_without_a_shared_key_a_state_from_another_replica_is_refused_as_tampered(
    database: str, tmp_path: Path
) -> None:
    """The negative of the tests above: replicas in development mode without
    `mcp.request_state_key` each seal with a random key of their own, so replica B cannot verify
    the state A sealed and refuses it like any forged state (mrtr "Server Requirements": state
    that fails verification MUST be rejected): 400, -32602, `data.field` "requestState",
    `data.reason` "tampered". The very same retry sent back to A completes, so what makes the
    retry work on another replica is the shared key, nothing else."""
    with start_replicas(tmp_path, database, count=2, env=MODERN_ERA) as unshared:
        client = Modern(unshared, "unshared-" + secrets.token_hex(3), ELICITATION)
        call = {"name": "test_input_required_result_elicitation", "arguments": {}}
        asked = client.result(A, "tools/call", call)
        name = {"action": "accept", "content": {"name": "Alice"}}
        retry = {**call, "inputResponses": {"user_name": name}, "requestState": asked["requestState"]}
        refused = client.post(B, "tools/call", retry)
        done = client.result(A, "tools/call", retry)

    assert refused.status_code == 400, refused.text
    assert refused.headers["content-type"].startswith("application/json")
    error = refused.json()["error"]
    assert error["code"] == -32602
    assert (error["data"]["field"], error["data"]["reason"]) == ("requestState", "tampered")
    assert asked["requestState"] not in refused.text
    assert "traceback" not in refused.text.lower()
    assert done["content"][0]["text"] == "Hello, Alice!"


class Wire:
    """What the official client sent, request by request: the JSON-RPC method, the tool, whether it
    was an MRTR retry, and the X-Request-Id this recorder gave it (to find the replica that served
    it); and any session id a response carried."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str | None, bool, str]] = []
        self.session_ids: list[str] = []

    async def request(self, request: httpx2.Request) -> None:
        request_id = f"sdk-{secrets.token_hex(8)}"
        request.headers["x-request-id"] = request_id
        body = orjson.loads(request.content) if request.content else {}
        params = body.get("params") or {}
        self.sent.append((body.get("method", request.method), params.get("name"), "requestState" in params, request_id))

    async def response(self, response: httpx2.Response) -> None:
        if "mcp-session-id" in response.headers:
            self.session_ids.append(response.headers["mcp-session-id"])


@pytest.mark.anyio
async def test_the_official_client_pinned_modern_confirms_through_mrtr_across_replicas(replicas: Replicas) -> None:
    """`mcp` 2.3 with `mode="2026-07-28"`, each request sent to the next replica: it lists and
    calls tools, and a dangerous MCP-AQL operation is confirmed through its elicitation callback,
    the client retrying the `input_required` answer on another replica than the first attempt.
    Never an `initialize`, never an `Mcp-Session-Id`."""
    questions: list[str] = []

    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        questions.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    wire = Wire()
    transport = RoundRobin(replicas.ports)
    http = httpx2.AsyncClient(
        transport=transport,
        headers={"authorization": f"Bearer {replicas.token('sdk-' + secrets.token_hex(3))}"},
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        event_hooks={"request": [wire.request], "response": [wire.response]},
    )
    connection = streamable_http_client(replicas.servers[A].url, http_client=http)
    with anyio.fail_after(DEADLINE):
        async with http, Client(connection, mode=MODERN, elicitation_callback=elicit) as client:
            tools = await client.list_tools()
            simple = await client.call_tool("test_simple_text", {})
            create = {"operation": "create_collection", "params": {"collection": "sdk"}}
            created = await client.call_tool("mcp_aql_create", create)
            delete = {"operation": "delete_collection", "params": {"collection": "sdk"}}
            deleted = await client.call_tool("mcp_aql_delete", delete)

    assert "mcp_aql_delete" in {tool.name for tool in tools.tools}
    assert not simple.is_error
    assert not created.is_error
    assert not deleted.is_error
    assert deleted.structured_content is not None
    assert deleted.structured_content["data"]["deleted"] is True
    assert len(questions) == 1
    assert "delete_collection" in questions[0]
    served = [(method, name, retried, replicas.served(request_id)) for method, name, retried, request_id in wire.sent]
    assert [port for _, port, _ in transport.sent] == [replicas.ports[replica] for *_, replica in served]
    deletes = [(retried, replica) for method, name, retried, replica in served if name == "mcp_aql_delete"]
    assert [retried for retried, _ in deletes] == [False, True]
    assert deletes[0][1] != deletes[1][1], "the retry went to the replica of the first attempt"
    assert {replica for *_, replica in served} == {A, B, C}
    assert "initialize" not in [method for method, *_ in served]
    assert wire.session_ids == []
