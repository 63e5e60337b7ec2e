"""Challenge codes and ids (MCP-AQL §8.8.2): CSPRNG codes of at least 128 bits, UUID v4 ids."""

from __future__ import annotations

import base64
import uuid

import pytest

from aql_mcp.builtin_sections import SafetySettings
from aql_mcp.plugins.safety.journal import Journal
from aql_mcp.plugins.safety.verification import Verification, codes_match, holds_agent, new_code


def test_a_code_carries_at_least_128_bits_and_never_repeats_8_8_2() -> None:
    codes = {new_code() for _ in range(200)}
    assert len(codes) == 200
    for code in codes:
        assert len(base64.urlsafe_b64decode(code + "=" * (-len(code) % 4))) * 8 >= 128


def test_codes_are_compared_exactly() -> None:
    code = new_code()
    assert codes_match(code, code)
    assert not codes_match(code[:-1], code)
    assert not codes_match("", code)
    assert not codes_match("é", code)


def test_a_challenge_has_a_uuid4_id_and_expires_after_the_configured_ttl_8_8_2() -> None:
    verification = Verification(None, SafetySettings(challenge_ttl_seconds=300), Journal(None))  # type: ignore[arg-type]
    challenge = verification.challenge_for(
        agent="a", run_id="r", principal="p", tier="verify", action="x", reason="y", now=100.0
    )
    assert uuid.UUID(challenge.id).version == 4
    assert challenge.expires_at == 400.0
    assert challenge.status == "pending"
    assert challenge.code not in challenge.id


def test_only_danger_zone_and_deny_hold_the_agent_8_8_3() -> None:
    assert holds_agent("deny")
    assert holds_agent("danger_zone")
    assert not holds_agent("verify")


@pytest.mark.anyio
async def test_the_journal_refuses_an_event_detail_that_would_carry_a_code_8_8_4() -> None:
    journal = Journal(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="never carries"):
        await journal.record("agent", "verified", "operator", 1.0, code="x")
