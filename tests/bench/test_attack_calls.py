"""bench/attack_calls.py: the requests `bench/attacks.py` sends for the issue 27 rows, against a real
`aql-mcp serve`, so that each row measures the attack it names and not a request the service refuses
for a reason of its own. Speed is the benchmark's business; nothing here measures or times it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from tests.support.bench import load_bench_module
from tests.support.server import ServerProcess, start_server

calls = load_bench_module("attack_calls")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The built-in plugins (records, executions, safety), as the benchmark serves them."""
    with start_server(tmp_path_factory.mktemp("bench-attacks"), plugins=()) as process:
        yield process


async def opened(server: ServerProcess, subject: str) -> Any:
    return await calls.Tenant(server.base, server.token(subject=subject)).open()


def test_the_adversarial_pattern_has_the_issue_shape_and_any_length() -> None:
    """Issue 27, N1: `'*a' * 50 + 'b<i>'`; cut to fit a limit, it keeps its distinct `b<i>` end."""
    assert calls.adversarial_pattern(7) == "*a" * 50 + "b7"
    assert [len(calls.adversarial_pattern(123, n)) for n in (4, 5, 40, 41)] == [4, 5, 40, 41]
    assert calls.adversarial_pattern(123, 9).endswith("b123")
    assert len(calls.HINT) == 4000
    assert set(calls.HINT.split()) == {"a"}


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ({"details": {"constraint": "List should have at most 50 items after validation, not 100"}}, (50, 104)),
        ({"details": {"constraint": "List should have at most 100 items after validation, not 101"}}, (100, 52)),
        ({"details": {"param_name": "deny", "max_length": 64}}, (100, 64)),
        ({"details": {"param_name": "deny", "max_pattern_length": 256}}, (100, 52)),
        ({"details": {"param_name": "deny", "max_bytes": 64}}, (100, 64)),
        ({"details": {"param_name": "deny", "max_bytes": 8000}}, (100, 39)),
        ({"details": {"param_name": "deny", "max_items": 20}}, (20, 104)),
        ({"details": {"param_name": "deny", "max_total_bytes": 8000}}, (100, 39)),
        ({"message": "Patterns too long", "details": {"param_name": "deny"}}, (100, 52)),
    ],
)
def test_a_refused_pattern_set_is_cut_to_the_limit_the_refusal_names(
    error: dict[str, Any], expected: tuple[int, int]
) -> None:
    assert calls.next_fit(100, 104, {"code": "VALIDATION_INVALID_TYPE", **error}) == expected


class Refusing:
    """A stand-in `execute_agent` that refuses patterns longer than `longest` or more than `total`
    characters over both lists, naming its limit in the details (`named`) or not at all, and
    declaring `longest` in its introspection (`declared`) or not."""

    def __init__(self, longest: int = 10**6, total: int = 10**9, named: bool = True, declared: bool = False) -> None:
        self.longest, self.total, self.named, self.runs = longest, total, named, 0
        limits = {"maxItems": 100, "items": {"type": "string", "maxLength": longest}} if declared else {}
        self.declared = [{"name": "deny", "type": "array", **limits}]

    async def aql(self, operation: str, params: dict[str, Any]) -> Any:
        if operation == "complete_execution":
            return calls.Answer(200, {"success": True, "data": {}})
        if operation == "introspect":
            return calls.Answer(200, {"success": True, "data": {"operation": {"parameters": self.declared}}})
        patterns = [*params["deny"], *params["requiresApproval"]]
        details: dict[str, Any] = {"param_name": "deny"}
        if max(map(len, patterns)) > self.longest:
            details |= {"max_length": self.longest} if self.named else {}
        elif sum(map(len, patterns)) > self.total:
            details |= {"max_total_chars": self.total} if self.named else {}
        else:
            self.runs += 1
            return calls.Answer(200, {"success": True, "data": {"execution_id": f"exec_{self.runs}"}})
        return calls.Answer(200, {"success": False, "error": {"code": "VALIDATION_TOO_LONG", "details": details}})


@pytest.mark.parametrize(
    ("service", "longest"),
    [
        (Refusing(longest=64), 64),
        (Refusing(longest=64, named=False), 64),
        (Refusing(longest=64, named=False, declared=True), 64),
        (Refusing(total=8000), 40),
    ],
)
def test_the_fitted_pattern_set_is_the_longest_the_service_accepts_within_five_percent(
    service: Refusing, longest: int
) -> None:
    fit, run = anyio.run(calls.fit_patterns, service, "fitted")

    assert fit.count == 100
    assert longest * 0.95 <= fit.length <= longest
    assert run == f"exec_{service.runs}"


@pytest.mark.anyio
async def test_the_safety_attack_requests_start_a_run_and_get_a_directive(server: ServerProcess) -> None:
    """The pattern set the benchmark settles on starts a run; a step with the 4,000-character hint
    gets an AutonomyDirective (MCP-AQL §8.6.4) on a run with the default patterns."""
    attacker = await opened(server, "attacker")
    try:
        fit, adversarial_run = await calls.fit_patterns(attacker, "fitted")
        assert fit.count >= 1
        assert fit.length >= 1
        assert adversarial_run.startswith("exec_")
        finished = await attacker.aql("complete_execution", {"element_name": "fitted", "execution_id": adversarial_run})
        assert finished.ok, finished.envelope

        run = (await attacker.must("execute_agent", calls.execute_agent("plain")))["execution_id"]
        with anyio.fail_after(60):
            step = await attacker.aql("record_execution_step", calls.record_step("plain", run))
        assert step.ok, step.envelope
        assert "continue" in step.data
    finally:
        await attacker.close()


@pytest.mark.anyio
async def test_the_listing_and_export_requests_are_answered(server: ServerProcess) -> None:
    lister = await opened(server, "lister")
    try:
        await lister.must("create_collection", {"collection": "notes"})
        record = await lister.must("create_record", {"collection": "notes", "data": {"n": 1, "title": "note 1"}})
        for worker in (0, 1):
            answer = await lister.aql(*calls.heavy_listing(worker, 10))
            assert answer.ok, answer.envelope
        got = await lister.aql("get_record", {"collection": "notes", "id": record["id"]})
        assert got.ok, got.envelope

        export = await lister.must("execute_export", {"collection": "notes"})
        state = await lister.must("get_execution", {"execution_id": export["execution_id"]})
        assert state["status"] in ("pending", "running", "completed")
    finally:
        await lister.close()


def test_a_refused_call_is_kept_as_its_outcome_not_raised(server: ServerProcess) -> None:
    """The attack counts what the service answers it; a refusal is an outcome of the row."""

    async def refused() -> Any:
        caller = await opened(server, "refused")
        try:
            return await caller.aql("get_record", {"collection": "missing", "id": "rec_00000000000000000000"})
        finally:
            await caller.close()

    answer = anyio.run(refused)

    assert not answer.ok
    assert answer.outcome.startswith("NOT_FOUND")


def test_the_flood_makes_bare_connections_and_the_service_still_answers(server: ServerProcess) -> None:
    made = calls.flood(server.port, 0.3, 200.0)

    assert made["connects"] > 0
    assert httpx.get(f"{server.base}/health", timeout=10).status_code == 200
