"""The safety loop cannot freeze a replica (issue 27, N1): an agent with the ordinary `mcp` scope sends
the longest hints against the default patterns or the largest pattern set `execute_agent` accepts,
16 steps at a time, and `/health` and another tenant's call keep answering (within the chart's probe
timeout: see tests/support/safety_attack.py). Speed is measured by `make bench`, not here.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from aql_mcp.builtin_sections import MAX_PATTERN_LENGTH
from aql_mcp.plugins.safety.params import MAX_PATTERN_CHARACTERS, MAX_PATTERNS
from tests.support.aql import session
from tests.support.safety_attack import SERVER_ENV, Probes, adversarial, attack, probe
from tests.support.server import start_server

pytestmark = pytest.mark.anyio
ENV = {**SERVER_ENV, "AQL_MCP_AQL__MODE": "all"}


async def _attacked(tmp_path: Path, patterns: dict[str, list[str]], steps: int) -> Probes:
    with start_server(tmp_path, env=ENV) as server:
        seen = Probes()
        done = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(probe, server.base, server.token(subject="tenant-b"), done, seen)
            await attack(server.base, server.token(subject="mallory"), patterns, steps)
            done.set()
    return seen


async def test_health_and_another_tenant_answer_while_16_steps_send_the_longest_hint(tmp_path: Path) -> None:
    seen = await _attacked(tmp_path, {}, steps=4)
    assert seen.health
    assert seen.reads


async def test_health_and_another_tenant_answer_while_steps_meet_the_largest_accepted_pattern_set(
    tmp_path: Path,
) -> None:
    """100 deny and 100 requiresApproval patterns of `*a*a...`, as long as the budget lets them be."""
    length = MAX_PATTERN_CHARACTERS // (2 * MAX_PATTERNS)
    patterns = {
        "deny": adversarial(MAX_PATTERNS, length, "b"),
        "requiresApproval": adversarial(MAX_PATTERNS, length, "c"),
    }
    seen = await _attacked(tmp_path, patterns, steps=2)
    assert seen.health
    assert seen.reads


def test_execute_agent_refuses_patterns_past_their_bounds_naming_the_field(tmp_path: Path) -> None:
    """The run v0.2.0 accepted: 200 patterns of 100 characters and more; and one of 4.4 KB."""
    maximal = {"deny": adversarial(MAX_PATTERNS, 102, "b"), "requiresApproval": adversarial(MAX_PATTERNS, 102, "c")}
    with start_server(tmp_path, env=ENV) as server, session(server) as agent:
        too_many = agent.call("mcp_aql", "execute_agent", element_name="x", **maximal)
        too_long = agent.call("mcp_aql", "execute_agent", element_name="x", deny=["*a" * 2200])
        too_many_items = agent.call("mcp_aql", "execute_agent", element_name="x", deny=["x"] * (MAX_PATTERNS + 1))
        fitting = agent.call("mcp_aql", "execute_agent", element_name="x", deny=["*a" * (MAX_PATTERN_LENGTH // 2)])
    assert too_many["error"]["code"] == "VALIDATION_PAYLOAD_TOO_LARGE"
    assert too_many["error"]["details"]["param_name"] == "deny"
    assert too_many["error"]["details"]["limit_value"] == MAX_PATTERN_CHARACTERS
    assert too_long["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert too_long["error"]["details"]["param_name"] == "deny.0"
    assert too_many_items["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert too_many_items["error"]["details"]["param_name"] == "deny"
    assert fitting["success"] is True
