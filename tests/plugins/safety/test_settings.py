"""The `safety` settings section: patterns bounded like an agent's own (docs/safety.md "Limits")."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from aql_mcp.builtin_sections import MAX_PATTERN_LENGTH, SafetySettings


def test_a_configured_pattern_longer_than_an_agent_may_send_is_refused_at_startup() -> None:
    with pytest.raises(ValidationError) as refused:
        SafetySettings(deny=("x" * (MAX_PATTERN_LENGTH + 1),))
    assert refused.value.errors()[0]["loc"] == ("deny", 0)
    with pytest.raises(ValidationError):
        SafetySettings(risk_rules=({"pattern": "", "score": 10},))  # type: ignore[arg-type]
    assert SafetySettings(deny=("x" * MAX_PATTERN_LENGTH,)).deny


def test_the_evaluation_budget_is_bounded() -> None:
    assert SafetySettings().evaluation_budget_ms == 250
    with pytest.raises(ValidationError):
        SafetySettings(evaluation_budget_ms=0)
