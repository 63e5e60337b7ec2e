"""The operator console over three PostgreSQL-backed replicas: the store is the truth (docs/console.md).

A challenge raised through replica A shows up, live, on the console served by B and is approved
there; the agent polling C is told to continue. A hard block set through one replica holds on the
two others, a new execution there does not escape it, and the console of a third lifts it. The
single-replica SQLite engine runs the same forms in test_console_e2e.py and test_browser.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.auth.principal import subject_digest
from tests.support.aql import session
from tests.support.console import ConsoleClient, csrf_on, raise_challenge, step
from tests.support.redaction import remember_secret
from tests.support.replicas import AUDIENCE, ISSUER, Replicas, start_replicas
from tests.support.sse import iter_events

A, B, C = 0, 1, 2


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    env = {"AQL_MCP_CONSOLE__REFRESH_SECONDS": "0.3"}
    with start_replicas(tmp_path_factory.mktemp("console-replicas"), database, env=env) as started:
        yield started


def token(replicas: Replicas, subject: str, scopes: tuple[str, ...]) -> str:
    issuer = DevIssuer(state_dir=replicas.key_dir, issuer=ISSUER, audience=AUDIENCE)
    return remember_secret(issuer.mint(subject=subject, scopes=list(scopes), ttl=600))


@pytest.fixture
def agent(replicas: Replicas, request: pytest.FixtureRequest) -> tuple[str, str]:
    """An agent of this test alone: its principal key (what blocks are kept by) and its token."""
    subject = f"agent-{request.node.name[-16:]}"
    return subject_digest(subject), token(replicas, subject, ("mcp",))


def console(replicas: Replicas, replica: int, http: httpx.Client) -> ConsoleClient:
    assert str(http.base_url).rstrip("/") == replicas.servers[replica].base
    return ConsoleClient(http, token(replicas, "olivia", ("aql:operator",)))


@pytest.mark.anyio
async def test_a_challenge_raised_on_a_shows_live_on_b_is_approved_there_and_c_sees_the_agent_go_on(
    replicas: Replicas, agent: tuple[str, str]
) -> None:
    _, agent_token = agent
    a, b, c = (replicas.servers[i] for i in (A, B, C))
    operator = token(replicas, "olivia", ("aql:operator",))
    headers = {"authorization": f"Bearer {operator}"}
    async with (
        httpx.AsyncClient(base_url=b.base, timeout=20) as live,
        live.stream("GET", "/console/events", headers=headers) as stream,
    ):
        assert stream.status_code == 200
        events = iter_events(stream)
        await anext(events)
        with session(a, token=agent_token) as agent_a:
            challenge = raise_challenge(agent_a)
        async for event in events:
            if event.data and f'data-challenge="{challenge}"' in event.data:
                break
    with httpx.Client(base_url=b.base, timeout=20) as http:
        answered = console(replicas, B, http).verify(challenge)
    assert answered.status_code == 303, answered.text
    with session(c, token=agent_token) as agent_c:
        directive = step(agent_c)
    assert directive["continue"] is True
    assert "stopped" not in directive


def test_a_block_set_on_one_replica_holds_on_all_until_the_console_of_another_lifts_it(
    replicas: Replicas, agent: tuple[str, str]
) -> None:
    """MCP-AQL §8.8.3: the block is per agent, persisted, not escaped by a new execution."""
    principal, agent_token = agent
    a, b, c = (replicas.servers[i] for i in (A, B, C))
    with session(a, token=agent_token) as agent_a, session(b, token=agent_token) as agent_b:
        challenge = raise_challenge(agent_a)
        on_b = step(agent_b)
        assert (on_b["stopped"], on_b["verificationId"]) == (True, challenge)
        with session(c, token=agent_token) as agent_c:
            renamed = agent_c.call("mcp_aql_execute", "execute_agent", element_name="another-name")
            assert renamed["success"] is False
            assert (renamed["error"]["code"], renamed["error"]["details"]["reason"]) == (
                "PERMISSION_DENIED",
                "agent_blocked",
            )
            with httpx.Client(base_url=c.base, timeout=20) as http:
                operator = console(replicas, C, http)
                html = operator.page()
                assert f'name="principal" value="{principal}"' in html
                assert operator.post("lift", principal=principal, csrf=csrf_on(html)).status_code == 303
        directive = step(agent_a)
    assert directive["continue"] is True
