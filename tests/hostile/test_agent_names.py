"""Two agents under one name (issue 27, N8): the operator console's pending challenges and approvals
named an agent only by the `element_name` it chose itself, so a hostile agent could take the name of
a trusted one and have its pending action approved in the trusted one's place.

What must hold against a real `aql-mcp serve` (MCP-AQL §8.7.3, §8.8; docs/safety.md, "Whose agent
it is"): every row an operator decides on shows the principal (the token's subject) beside the
agent's name, so two principals that picked the same name are told apart; never a token.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.support.aql import session
from tests.support.console import ConsoleClient, raise_challenge, step
from tests.support.server import ServerProcess, start_server

OPERATOR = ("aql:operator",)
NAME = "trusted-builder"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("names")) as process:
        yield process


def row_of(html: str, marker: str) -> str:
    """The table row holding `marker`."""
    rows = [row for row in re.findall(r"<tr>.*?</tr>", html, flags=re.DOTALL) if marker in row]
    assert len(rows) == 1, marker
    return rows[0]


def test_two_principals_with_one_agent_name_are_told_apart_where_the_operator_decides(server: ServerProcess) -> None:
    # A pending approval holds its agent (and a challenge blocks it): each row gets its own pair.
    approvals, challenges = {}, {}
    for subject in ("alice-ci", "mallory-x"):
        with session(server, subject=subject) as agent:
            assert agent.call("mcp_aql_execute", "execute_agent", element_name=NAME)["success"]
            approvals[subject] = step(agent, NAME, "deploy_service staging")["approvalId"]
    for subject in ("carol-ci", "eve-x"):
        with session(server, subject=subject) as agent:
            challenges[subject] = raise_challenge(agent, NAME)
    with httpx.Client(base_url=server.base, timeout=20) as http:
        html = ConsoleClient(http, server.token("olivia", OPERATOR)).page()
    rows = {
        **{s: row_of(html, f'name="approval_id" value="{a}"') for s, a in approvals.items()},
        **{s: row_of(html, f'data-challenge="{c}"') for s, c in challenges.items()},
    }
    for subject, row in rows.items():
        assert NAME in row
        assert subject in row
        assert not any(other in row for other in rows if other != subject)
    assert "Bearer" not in html
