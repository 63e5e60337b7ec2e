"""Both official clients, in both eras, through nginx to three replicas on PostgreSQL (issue 23).

The Python `mcp` client (tests/support/walkthrough.py) and the TypeScript client
(tests/ts_gateway_walkthrough.mjs) each walk through what a user does, once in the 2025-11-25 era
(a session) and once in 2026-07-28 (no session): tools, resources, prompts, an MCP-AQL write and a
read of it, a delete the user confirms by elicitation, changes heard on a stream (the session's GET
stream, or `subscriptions/listen`) that calls on other replicas caused, and a long call whose
progress and result arrive although it is silent for longer than nginx's `proxy_read_timeout`
between two progress notifications: the service's SSE keep-alives (`streams.keepalive_seconds`,
below that timeout) hold the connection, and the stream too, which hears a change after that call.

nginx runs the site example deploy/nginx/aql-mcp.conf, with only its read timeout shortened (the
example sets it inside `location /mcp`, where nothing around the include can override it). The
clients' tokens are JWT access tokens from a real OpenID provider (oidc-provider over HTTPS behind a
CA made for the test, tests/support/oidc.py: client credentials, the audience as RFC 8707 resource),
which the replicas trust through its JWKS. The era is asserted from the wire, never from success
alone: both SDKs quietly fall back to `initialize`. Which replica served a request is read from the
replicas' access logs by its X-Request-Id.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import jwt
import pytest

from tests.support.asgi import CONFORMANCE
from tests.support.modern import modern_body, modern_headers
from tests.support.nginx import Gateway, running_gateway, site_with_read_timeout
from tests.support.oidc import OidcProvider, running_oidc_provider, trust
from tests.support.replicas import SLOW as SLOW_PLUGIN
from tests.support.replicas import Replicas, start_replicas, wait_for_replica_count
from tests.support.server import start_server
from tests.support.sse import Event, iter_events
from tests.support.typescript import TypeScriptClient, install_ts_client
from tests.support.walkthrough import WATCHED, python_walkthrough

pytestmark = pytest.mark.anyio

WALKTHROUGH = Path(__file__).with_name("ts_gateway_walkthrough.mjs")
LEGACY, MODERN = "2025-11-25", "2026-07-28"
CLIENTS = ("python", "typescript")
# The client's own negotiation setting: "auto" probes `server/discover` first, as a dual-era client does.
MODES = {LEGACY: "legacy", MODERN: "auto"}
READ_TIMEOUT_SECONDS = 3
KEEPALIVE_SECONDS = 0.5
# Two progress notifications 3.5 s apart: the call is silent for longer than nginx's read timeout.
STEPS, STEP_SECONDS = 2, 3.5
SLOW = {"steps": STEPS, "step_seconds": STEP_SECONDS}
# One change heard before the long call and one after it, on the same stream.
CAUSES = 2
ENV = {
    "AQL_MCP_MCP__MODERN_ERA": "true",
    "AQL_MCP_AQL__CONFIRM_WITH_ELICITATION": "true",
    "AQL_MCP_STREAMS__KEEPALIVE_SECONDS": str(KEEPALIVE_SECONDS),
    # The site example passes `Host: $host`: the name the client asked for, without its port.
    "AQL_MCP_HTTP__ALLOWED_HOSTS": json.dumps(["127.0.0.1"]),
}
RUN_SECONDS = 60
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "gateway-test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
SCOPES = ("mcp", "aql:read", "aql:write")


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    with running_oidc_provider(tmp_path_factory.mktemp("oidc-provider")) as provider:
        yield provider


@pytest.fixture(scope="module")
def replicas(database: str, idp: OidcProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    """The replicas trust the provider (its issuer, JWKS over HTTPS with the test's CA, the audience)
    and the Host nginx passes. They run in development mode, as `start_replicas` starts them, but
    the development key's tokens name another issuer and are refused (the control below)."""
    root = tmp_path_factory.mktemp("gateway-replicas")
    env = {**ENV, **idp.service_env(introspection=False)}
    with start_replicas(root, database, env=env, share_request_state_key=True) as started:
        wait_for_replica_count(started, 3)
        yield started


@pytest.fixture(scope="module")
def gateway(replicas: Replicas, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    directory = tmp_path_factory.mktemp("gateway")
    site = site_with_read_timeout(directory / "site", READ_TIMEOUT_SECONDS)
    with running_gateway(directory / "nginx", replicas.ports, site=site) as running:
        yield running


@pytest.fixture(scope="module")
def ts_client() -> TypeScriptClient:
    return install_ts_client()


Walks = dict[tuple[str, str], dict[str, Any]]


@pytest.fixture(scope="module")
def walks(gateway: Gateway) -> Walks:
    """The summaries of the walks made through this module's gateway, each made once."""
    return {}


async def walk(client: str, era: str, gateway: Gateway, idp: OidcProvider, ts: TypeScriptClient) -> dict[str, Any]:
    """One client's walk in one era with a token of its own from the provider; the summary notes
    the token's header and claims."""
    token = idp.token(SCOPES)
    if client == "python":
        summary = await python_walkthrough(gateway.url, token, MODES[era], SLOW)
    else:
        summary = await _typescript_walkthrough(ts, gateway.url, token, MODES[era])
    summary["token"] = {**jwt.get_unverified_header(token), **jwt.decode(token, options={"verify_signature": False})}
    return summary


async def _typescript_walkthrough(ts: TypeScriptClient, url: str, token: str, mode: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "TS_CLIENT_PACKAGE": ts.package,
        "MCP_URL": url,
        "MCP_TOKEN": token,
        "MCP_MODE": mode,
        "MCP_SLOW": json.dumps(SLOW),
    }
    with anyio.fail_after(RUN_SECONDS):
        done = await anyio.run_process([ts.node, str(WALKTHROUGH)], env=env, check=False)
    assert done.returncode == 0, f"the TypeScript client failed:\n{done.stderr.decode()}"
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


@pytest.fixture
async def summary(
    request: pytest.FixtureRequest, walks: Walks, gateway: Gateway, idp: OidcProvider, ts_client: TypeScriptClient
) -> dict[str, Any]:
    client, era = request.param
    if (client, era) not in walks:
        walks[client, era] = await walk(client, era, gateway, idp, ts_client)
    return walks[client, era]


EVERY_WALK = pytest.mark.parametrize(
    "summary", [(client, era) for client in CLIENTS for era in (LEGACY, MODERN)], indirect=True, ids="-".join
)


def requests_of(summary: dict[str, Any], method: str) -> list[dict[str, Any]]:
    return [entry for entry in summary["wire"]["requests"] if method in entry["methods"]]


@EVERY_WALK
async def test_the_client_calls_with_a_token_of_the_openid_provider(summary: dict[str, Any], idp: OidcProvider) -> None:
    """Not the replicas' development key: a JWT access token (RFC 9068 `at+jwt`) the provider
    signed with a key it publishes, for the service's audience; every request of the walk carried it."""
    token = summary["token"]
    assert (token["iss"], token["aud"], token["alg"], token["typ"]) == (idp.issuer, idp.audience, "RS256", "at+jwt")
    assert set(SCOPES) <= set(token["scope"].split())
    async with httpx.AsyncClient(verify=trust(idp.tls), timeout=10.0) as http:
        published = (await http.get(idp.jwks_uri)).json()
    assert token["kid"] in {key["kid"] for key in published["keys"]}


async def test_a_token_of_the_replicas_development_key_is_refused(gateway: Gateway, replicas: Replicas) -> None:
    """The control for the test above: the replicas judge tokens by the provider's issuer now."""
    body = modern_body("tools/list", None, META, 1)
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.post(gateway.url, json=body, headers=modern_headers(replicas.token(), "tools/list"))
    assert response.status_code == 401, response.text


@EVERY_WALK
async def test_the_client_negotiates_its_era_through_the_gateway(summary: dict[str, Any]) -> None:
    """What the client says it negotiated, and what went over the wire: a session and its GET
    stream in 2025-11-25; `server/discover`, no `initialize` and no session in 2026-07-28."""
    requests = summary["wire"]["requests"]
    first = requests[0]["methods"]
    if summary["protocolVersion"] == LEGACY:
        assert summary["era"] == "legacy"
        assert first == ["initialize"]
        assert requests[1]["methods"] == ["notifications/initialized"]
        assert len(summary["wire"]["sessionIds"]) == 1
    else:
        assert (summary["era"], summary["protocolVersion"]) == ("modern", MODERN)
        assert first == ["server/discover"]
        assert requests_of(summary, "initialize") == []
        assert summary["wire"]["sessionIds"] == []
        assert [entry for entry in requests if entry["http"] == "GET"] == []
    refused = [entry for entry in requests if entry["status"] not in (200, 202, 204)]
    assert refused == [], "nothing refused, nothing cut by the gateway"


@EVERY_WALK
async def test_tools_resources_and_prompts_are_served_through_the_gateway(summary: dict[str, Any]) -> None:
    assert {"mcp_aql_create", "mcp_aql_read", "mcp_aql_delete", "test_slow"} <= set(summary["tools"])
    assert "test://static-text" in summary["resources"]
    assert summary["resourceText"]
    assert "test_prompt_with_arguments" in summary["prompts"]
    assert summary["prompt"] == ["Prompt with arguments: arg1='one', arg2='two'"]


@EVERY_WALK
async def test_an_aql_write_is_read_back_and_a_delete_runs_once_the_user_confirms(
    summary: dict[str, Any], replicas: Replicas
) -> None:
    """The delete's confirmation is an `elicitation/create` on the call's stream, answered by a
    POST of its own, in 2025-11-25; an `input_required` answer and a retry of the call in 2026-07-28.
    Either way the answer reaches another replica than the one that asked."""
    written = summary["written"]
    assert written["isError"] is False, written
    record = written["envelope"]["data"]
    read_back = summary["readBack"]
    assert read_back["isError"] is False, read_back
    assert read_back["envelope"]["data"]["id"] == record["id"]
    assert read_back["envelope"]["data"]["title"] == "via nginx"
    assert summary["deleted"] == {
        "isError": False,
        "envelope": {"success": True, "data": {"name": summary["collection"], "deleted": True, "deleted_records": 1}},
    }
    [question] = summary["asked"]
    assert "delete_collection" in question["message"]
    assert summary["collection"] not in summary["collectionsAfter"]
    deletes = [entry for entry in requests_of(summary, "tools/call") if entry["name"] == "mcp_aql_delete"]
    answers = requests_of(summary, "(response)")
    if summary["protocolVersion"] == LEGACY:
        assert (len(deletes), len(answers)) == (1, 1)
        asking, answered = replicas.served(deletes[0]["id"]), replicas.served(answers[0]["id"])
    else:
        assert (len(deletes), answers) == (2, []), "the call, then its retry with the user's answer"
        asking, answered = replicas.served(deletes[0]["id"]), replicas.served(deletes[1]["id"])
    # nginx balances round-robin: the answer is the next request, so another replica takes it.
    assert asking != answered


@EVERY_WALK
async def test_the_stream_hears_changes_made_on_other_replicas(summary: dict[str, Any], replicas: Replicas) -> None:
    """Each change of the watched resource is heard once, in turn, on the client's one stream, which
    stays open through the long call (longer than nginx's read timeout) to hear the second; at least
    one change was made by a call the gateway sent to another replica than the stream's."""
    if summary["protocolVersion"] == LEGACY:
        streams = [entry for entry in summary["wire"]["requests"] if entry["http"] == "GET"]
    else:
        streams = requests_of(summary, "subscriptions/listen")
    [stream] = streams
    assert summary["heard"] == [WATCHED] * CAUSES
    assert len(summary["causes"]) == CAUSES
    listening = replicas.served(stream["id"])
    causing = [replicas.served(request_id) for request_id in summary["causes"]]
    assert any(replica != listening for replica in causing), (listening, causing)


@EVERY_WALK
async def test_a_long_call_reports_progress_and_its_result_past_the_gateway_read_timeout(
    summary: dict[str, Any], gateway: Gateway
) -> None:
    """The call is silent for `step_seconds` (longer than `proxy_read_timeout`) after each progress
    notification: nginx would cut it but for the keep-alive comments the service writes meanwhile."""
    assert STEP_SECONDS > READ_TIMEOUT_SECONDS > KEEPALIVE_SECONDS
    assert summary["progress"] == list(range(STEPS))
    assert summary["slow"] == {"isError": False, "text": "done"}
    assert "upstream timed out" not in gateway.error_log.read_text(encoding="utf-8")


async def test_the_control_with_keep_alives_rarer_than_the_read_timeout_nginx_cuts_the_same_call(
    tmp_path: Path,
) -> None:
    """The same gateway and the same silent call, but the service's keep-alive interval above
    nginx's read timeout: nginx gives up on the call, so the walks' long calls above are held by
    the keep-alives and not by a timeout that never bit."""
    env = {"AQL_MCP_MCP__MODERN_ERA": "true", "AQL_MCP_STREAMS__KEEPALIVE_SECONDS": "30"}
    site = site_with_read_timeout(tmp_path / "site", READ_TIMEOUT_SECONDS)
    call = {"name": "test_slow", "arguments": {"steps": 1, "step_seconds": STEP_SECONDS}}
    body = modern_body("tools/call", call, {**META, "progressToken": "p"}, 5)
    events: list[Event] = []

    async def read(response: httpx.Response) -> None:
        async for event in iter_events(response):
            events.append(event)

    (tmp_path / "server").mkdir()
    with (
        start_server(tmp_path / "server", env=env, plugins=(CONFORMANCE, SLOW_PLUGIN)) as server,
        running_gateway(tmp_path / "nginx", [server.port], site=site) as gateway,
    ):
        headers = modern_headers(server.token(), "tools/call", "test_slow")
        async with (
            httpx.AsyncClient(timeout=RUN_SECONDS) as http,
            http.stream("POST", gateway.url, json=body, headers=headers) as response,
        ):
            assert response.status_code == 200
            with pytest.raises(httpx.RemoteProtocolError):
                await read(response)
        error_log = gateway.error_log.read_text(encoding="utf-8")
    assert [event.message["method"] for event in events if event.data] == ["notifications/progress"]
    assert "upstream timed out" in error_log
