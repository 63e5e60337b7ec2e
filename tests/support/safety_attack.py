"""The safety-loop attack of issue 27 (N1), for `tests/hostile/test_safety_loop.py`: one agent with the
ordinary `mcp` scope runs 16 executions at once and reports steps whose `nextActionHint` is 4,000
characters of one-letter words, against the default patterns or its own adversarial ones, while
`/health` and another tenant's `get_record` are probed. The probes are guarded by the chart's probe
timeout: an answer later than the kubelet waits is a failed probe, not a slow one.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
import httpx

from tests.support.asgi import open_session, rpc

AGENTS = 16  # the per-caller concurrency cap (`limits.max_concurrent_calls`)
HINT = " ".join("a" * 2000)[:4000]  # the longest hint `record_execution_step` takes
# helm/aql-mcp/values.yaml: livenessProbe.timeoutSeconds and readinessProbe.timeoutSeconds.
PROBE_TIMEOUT_SECONDS = 2.0
# Another tenant's call; generous, since it queues for the store behind the attack's writes.
CALL_TIMEOUT_SECONDS = 10.0
# Guards the attacker's own calls against hanging (a frozen replica answers none of them).
ATTACK_TIMEOUT_SECONDS = 60.0
SERVER_ENV = {"AQL_MCP_LIMITS__RATE_PER_SECOND": "100000", "AQL_MCP_LIMITS__RATE_BURST": "100000"}


def adversarial(count: int, length: int, tag: str) -> list[str]:
    """`count` distinct patterns of `length` characters of `*a`, each ending in a letter no hint has:
    the shape that made `fnmatch` from every word start backtrack for seconds."""
    return [("*a" * length)[: length - len(f"{tag}{i}")] + f"{tag}{i}" for i in range(count)]


def tool(operation: str, params: dict[str, object]) -> dict[str, object]:
    return rpc("tools/call", {"name": "mcp_aql", "arguments": {"operation": operation, "params": params}})


async def call(http: httpx.AsyncClient, headers: dict[str, str], operation: str, **params: object) -> dict[str, object]:
    """The MCP-AQL envelope of one operation (`aql.mode: all`, so everything goes through `mcp_aql`)."""
    answer = await http.post("/mcp", json=tool(operation, params), headers=headers)
    assert answer.status_code == 200, answer.text
    envelope: dict[str, object] = answer.json()["result"]["structuredContent"]
    return envelope


@dataclass
class Probes:
    """What the probes saw while the attack ran."""

    health: int = 0
    reads: int = 0


async def attack(base: str, token: str, patterns: dict[str, list[str]], steps: int) -> None:
    """16 executions of one principal, each reporting `steps` steps with the 4,000-character hint."""
    async with httpx.AsyncClient(base_url=base, timeout=ATTACK_TIMEOUT_SECONDS) as http:
        headers = await open_session(http, token)

        async def agent(index: int) -> None:
            started = await call(http, headers, "execute_agent", element_name=f"agent-{index}", **patterns)
            assert started["success"] is True, started
            execution = started["data"]["execution_id"]  # type: ignore[index]
            for _ in range(steps):
                step = await call(
                    http,
                    headers,
                    "record_execution_step",
                    element_name=f"agent-{index}",
                    execution_id=execution,
                    nextActionHint=HINT,
                )
                assert step["success"] is True, step

        async with anyio.create_task_group() as group:
            for index in range(AGENTS):
                group.start_soon(agent, index)


async def probe(base: str, token: str, until: anyio.Event, seen: Probes) -> None:
    """`/health` and another tenant's `get_record`, one after the other, until `until` is set."""
    async with httpx.AsyncClient(base_url=base, timeout=CALL_TIMEOUT_SECONDS) as http:
        headers = await open_session(http, token)
        assert (await call(http, headers, "create_collection", collection="mine"))["success"] is True
        made = await call(http, headers, "create_record", collection="mine", data={"n": 1})
        record = made["data"]["id"]  # type: ignore[index]
        while not until.is_set() or not seen.health:
            with anyio.fail_after(PROBE_TIMEOUT_SECONDS):
                health = await http.get("/health")
            assert health.status_code == 200
            seen.health += 1
            with anyio.fail_after(CALL_TIMEOUT_SECONDS):
                read = await call(http, headers, "get_record", collection="mine", id=record)
            assert read["success"] is True, read
            seen.reads += 1
