"""The execution safety loop end to end, on a real `aql-mcp serve`, on SQLite and on PostgreSQL
(MCP-AQL §8.6-8.8; docs/safety.md).

The scenario: a deny pattern stops the agent and yields a challenge; the agent cannot verify it
itself and a principal without the operator scope cannot either; a wrong code is refused and
counted; the server restarts and the block is still there; a new execution under another name does
not escape it; the right code, read from the store (where the operator console reads it), unblocks.
Every response body and every server log line is checked: the code is in none of them (§8.8.4).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aql_mcp.plugins.safety.store import Challenge
from tests.operations.envelope import check_result
from tests.support.aql import Session, session
from tests.support.postgres import create_database, drop_database
from tests.support.safety import stored_challenge
from tests.support.server import ServerProcess, start_server

OPERATOR = ("mcp", "aql:operator")
AGENT = "agent-7"


@dataclass
class Engine:
    state: Path
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""

    def challenge(self, challenge_id: str) -> Challenge:
        """The challenge as the store holds it: where the console reads the code from."""
        return stored_challenge(self.state, challenge_id, self.url)


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        yield Engine(tmp_path)
        return
    server = request.getfixturevalue("postgres_server")
    name = "safety_" + secrets.token_hex(4)
    url = asyncio.run(create_database(server, name))
    yield Engine(tmp_path, {"AQL_MCP_STORE__URL": url}, url)
    asyncio.run(drop_database(server, name))


class Seen:
    """Every response body the test received, to search for the code afterwards."""

    def __init__(self) -> None:
        self.bodies: list[str] = []
        self.logs: list[str] = []

    def call(self, who: Session, tool: str, operation: str, **params: Any) -> dict[str, Any]:
        result = who.tool(tool, {"operation": operation, "params": params})
        self.bodies.append(json.dumps(result))
        return check_result(result["structuredContent"])

    def step(self, who: Session, hint: str, name: str = "builder") -> dict[str, Any]:
        answer = self.call(who, "mcp_aql_create", "record_execution_step", element_name=name, nextActionHint=hint)
        assert answer["success"], answer
        return dict(answer["data"])

    def keep_log(self, server: ServerProcess) -> None:
        self.logs.append(server.log_text())


def _refused(answer: dict[str, Any], code: str, reason: str | None = None) -> dict[str, Any]:
    assert answer["success"] is False, answer
    assert answer["error"]["code"] == code, answer
    if reason is not None:
        assert answer["error"]["details"]["reason"] == reason, answer
    return dict(answer["error"])


def test_a_denied_action_blocks_the_agent_until_an_operator_verifies_across_a_restart_8_8(engine: Engine) -> None:
    seen = Seen()
    with start_server(engine.state, env=engine.env, plugins=()) as server:
        with (
            session(server, subject=AGENT) as agent,
            session(server, subject="agent-8") as other_agent,
            session(server, subject="bob") as bob,
            session(server, scopes=OPERATOR, subject="olivia") as operator,
        ):
            listing = seen.call(agent, "mcp_aql_read", "introspect", query="operations")
            assert listing["data"]["_protocol"]["capabilities"]["execution_safety_loop"] == "enforcing"
            assert seen.call(agent, "mcp_aql_execute", "execute_agent", element_name="builder")["success"]
            assert seen.call(other_agent, "mcp_aql_execute", "execute_agent", element_name="helper")["success"]
            assert seen.step(agent, "read_file src/app.py")["continue"] is True

            stopped = seen.step(agent, "executing shell command: rm -rf /srv/data")
            assert (stopped["continue"], stopped["stopped"], stopped["nextStepRisk"]) == (False, True, "danger_zone")
            first = stopped["verificationId"]
            zone = [n for n in stopped["notifications"] if n["type"] == "danger_zone"]
            assert zone[0]["metadata"]["verificationId"] == first
            broadcast = seen.step(other_agent, "read_file notes.md", name="helper")
            assert [n["metadata"]["verificationId"] for n in broadcast["notifications"]] == [first]
            assert broadcast["continue"] is True

            code = engine.challenge(first).code
            _refused(
                seen.call(agent, "mcp_aql_create", "verify_challenge", challenge_id=first, code=code),
                "PERMISSION_DENIED",
                "self_approval",
            )
            _refused(
                seen.call(bob, "mcp_aql_create", "verify_challenge", challenge_id=first, code=code),
                "PERMISSION_DENIED",
                "operator_scope_required",
            )
            wrong = _refused(
                seen.call(operator, "mcp_aql_create", "verify_challenge", challenge_id=first, code="not-the-code"),
                "TOKEN_INVALID",
            )
            assert wrong["details"]["failures"] == 1
            second = wrong["details"]["verificationId"]
            _refused(
                seen.call(operator, "mcp_aql_create", "verify_challenge", challenge_id=first, code=code),
                "TOKEN_ALREADY_USED",
            )
        seen.keep_log(server)

    with start_server(engine.state, env=engine.env, plugins=()) as server:
        with (
            session(server, subject=AGENT) as agent,
            session(server, scopes=OPERATOR, subject="olivia") as operator,
        ):
            still = seen.step(agent, "read_file src/app.py")
            assert (still["continue"], still["stopped"], still["verificationId"]) == (False, True, second)
            escape = _refused(
                seen.call(agent, "mcp_aql_execute", "execute_agent", element_name="a-brand-new-name"),
                "PERMISSION_DENIED",
                "agent_blocked",
            )
            assert escape["details"]["verificationId"] == second
            _refused(
                seen.call(agent, "mcp_aql_execute", "complete_execution", element_name="builder"),
                "PERMISSION_DENIED",
                "agent_blocked",
            )

            right = engine.challenge(second).code
            verified = seen.call(operator, "mcp_aql_create", "verify_challenge", challenge_id=second, code=right)
            assert verified["success"], verified
            resumed = seen.step(agent, "read_file src/app.py")
            assert (resumed["continue"], resumed["notifications"]) == (True, [])
            assert seen.call(agent, "mcp_aql_execute", "execute_agent", element_name="a-brand-new-name")["success"]
        seen.keep_log(server)

    for secret in (code, right):
        assert not any(secret in body for body in seen.bodies)
        assert not any(secret in log for log in seen.logs)
    assert any("safety_event" in log for log in seen.logs)


def test_failed_verifications_beyond_the_limit_are_refused_on_a_real_server_8_8_5(tmp_path: Path) -> None:
    env = {"AQL_MCP_SAFETY__MAX_FAILED_VERIFICATIONS": "2", "AQL_MCP_SAFETY__FAILURE_WINDOW_SECONDS": "600"}
    seen = Seen()
    with (
        start_server(tmp_path, env=env, plugins=()) as server,
        session(server, subject=AGENT) as agent,
        session(server, scopes=OPERATOR, subject="olivia") as operator,
    ):
        seen.call(agent, "mcp_aql_execute", "execute_agent", element_name="builder")
        challenge = seen.step(agent, "drop_table users")["verificationId"]
        for _ in range(2):
            wrong = _refused(
                seen.call(operator, "mcp_aql_create", "verify_challenge", challenge_id=challenge, code="nope"),
                "TOKEN_INVALID",
            )
            challenge = wrong["details"]["verificationId"]
        limited = _refused(
            seen.call(operator, "mcp_aql_create", "verify_challenge", challenge_id=challenge, code="nope"),
            "RATE_LIMIT_EXCEEDED",
        )
        unknown = seen.call(operator, "mcp_aql_create", "verify_challenge", challenge_id="no-such", code="x")
        empty = seen.call(operator, "mcp_aql_create", "verify_challenge", challenge_id=challenge, code="")
    assert limited["details"]["retryAfterSeconds"] == 600
    _refused(unknown, "NOT_FOUND_RESOURCE")
    assert empty["success"] is False
    assert empty["error"]["code"].startswith("VALIDATION_")


def test_a_gatekeeper_confirmation_during_a_run_waits_for_an_operator_on_a_real_server_8_7_3(tmp_path: Path) -> None:
    seen = Seen()
    with (
        start_server(tmp_path, plugins=()) as server,
        session(server, subject=AGENT) as agent,
        session(server, scopes=OPERATOR, subject="olivia") as operator,
    ):
        seen.call(agent, "mcp_aql_create", "create_collection", collection="old")
        seen.call(agent, "mcp_aql_execute", "execute_agent", element_name="builder")
        gated = seen.call(agent, "mcp_aql_delete", "delete_collection", collection="old")
        token = _refused(gated, "CONFIRMATION_REQUIRED")["details"]["confirmation_token"]
        waiting = seen.step(agent, "read_file a")
        early = seen.call(agent, "mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
        own = seen.call(agent, "mcp_aql_execute", "confirm_operation", confirmation_token=token)
        bogus = seen.call(operator, "mcp_aql_execute", "confirm_operation", confirmation_token="conf_bogus")
        approved = seen.call(operator, "mcp_aql_execute", "confirm_operation", confirmation_token=token)
        redeemed = seen.call(agent, "mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
        resumed = seen.step(agent, "read_file a")
    assert (waiting["continue"], [n["type"] for n in waiting["notifications"]]) == (False, ["permission_pending"])
    _refused(early, "PERMISSION_DENIED", "awaiting_operator")
    _refused(own, "PERMISSION_DENIED", "self_approval")
    _refused(bogus, "TOKEN_INVALID")
    assert approved["success"], approved
    assert redeemed["data"]["deleted"] is True
    assert (resumed["continue"], resumed["notifications"]) == (True, [])
