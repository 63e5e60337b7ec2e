"""The execution safety loop over three PostgreSQL-backed replicas: the store is the truth (docs/safety.md).

A block raised through replica A is seen by B; the code, read from the store as the operator
console of any replica reads it, is verified through B; the agent polling C is told to continue.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from tests.support.aql import Session, session
from tests.support.redaction import remember_secret
from tests.support.replicas import AUDIENCE, ISSUER, Replicas, start_replicas
from tests.support.safety import stored_challenge

A, B, C = 0, 1, 2


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    with start_replicas(tmp_path_factory.mktemp("safety-replicas"), database) as started:
        yield started


def _token(replicas: Replicas, subject: str, scopes: tuple[str, ...]) -> str:
    issuer = DevIssuer(state_dir=replicas.key_dir, issuer=ISSUER, audience=AUDIENCE)
    return remember_secret(issuer.mint(subject=subject, scopes=list(scopes), ttl=600))


def _step(agent: Session, hint: str) -> dict[str, Any]:
    answer = agent.call("mcp_aql_create", "record_execution_step", element_name="builder", nextActionHint=hint)
    assert answer["success"], answer
    return dict(answer["data"])


def test_a_block_raised_on_one_replica_is_verified_on_another_and_lifted_on_the_third(
    replicas: Replicas, database: str
) -> None:
    agent_token = _token(replicas, "agent-r", ("mcp",))
    operator_token = _token(replicas, "olivia", ("mcp", "aql:operator"))
    a, b, c = (replicas.servers[i] for i in (A, B, C))
    with (
        session(a, token=agent_token) as agent_a,
        session(b, token=agent_token) as agent_b,
        session(c, token=agent_token) as agent_c,
        session(b, token=operator_token) as operator_b,
    ):
        assert agent_a.call("mcp_aql_execute", "execute_agent", element_name="builder")["success"]
        stopped = _step(agent_a, "drop_database production")
        challenge = stopped["verificationId"]
        seen_on_b = _step(agent_b, "read_file x")
        assert (seen_on_b["stopped"], seen_on_b["verificationId"]) == (True, challenge)

        code = stored_challenge(replicas.key_dir, challenge, database).code
        verified = operator_b.call("mcp_aql_create", "verify_challenge", challenge_id=challenge, code=code)
        assert verified["success"], verified

        on_c = _step(agent_c, "read_file x")
    assert (on_c["continue"], on_c["notifications"]) == (True, [])
    assert "stopped" not in on_c
