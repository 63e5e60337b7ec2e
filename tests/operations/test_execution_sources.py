"""The execution id format and the list of execution sources (operations/execution_sources.py;
docs/executions.md, "Agent runs")."""

from __future__ import annotations

import re
from typing import Any

import pytest

from aql_mcp.operations.execution_sources import (
    EXECUTION_ID_PATTERN,
    ExecutionSource,
    ExecutionSources,
    SourcedExecution,
    new_execution_id,
)
from aql_mcp.operations.models import Call


def test_a_new_execution_id_is_exec_and_24_hex_digits_and_never_repeats() -> None:
    made = {new_execution_id() for _ in range(1000)}
    assert len(made) == 1000
    assert all(re.fullmatch(r"exec_[0-9a-f]{24}", made_id) for made_id in made)
    assert all(re.fullmatch(EXECUTION_ID_PATTERN, made_id) for made_id in made)


@pytest.mark.parametrize(
    ("candidate", "accepted"),
    [
        ("exec_" + "0" * 24, True),
        ("exec_" + "a" * 32, True),  # an agent run of release 0.2.0
        ("exec_" + "a" * 28, False),
        ("exec_" + "A" * 24, False),
        ("exec_" + "g" * 24, False),
        ("task_" + "0" * 24, False),
        ("exec_" + "0" * 24 + "\n", False),
        ("r1", False),
    ],
)
def test_the_id_pattern_takes_both_release_formats_and_nothing_else(candidate: str, accepted: bool) -> None:
    assert (re.fullmatch(EXECUTION_ID_PATTERN, candidate) is not None) is accepted


class _Source:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    async def get_execution(self, execution_id: str, call: Call) -> dict[str, Any] | None:
        return None

    async def list_executions(self, call: Call, *, status: str | None, limit: int) -> list[SourcedExecution]:
        return []

    async def cancel_execution(self, execution_id: str, call: Call) -> dict[str, Any] | None:
        return None


def test_sources_are_consulted_in_the_order_they_were_added_and_a_later_one_joins_at_once() -> None:
    sources = ExecutionSources()
    first: ExecutionSource = _Source("agent")
    sources.add(first)
    seen = iter(sources)
    second: ExecutionSource = _Source("job")
    sources.add(second)
    assert [s.kind for s in seen] == ["agent"]
    assert [s.kind for s in sources] == ["agent", "job"]
