"""The worker's retry of a store call the store refused for a passing reason
(plugins/executions/backoff.py; docs/executions.md, "Store errors during a run")."""

from __future__ import annotations

import pytest

from aql_mcp.exceptions import StoreError
from aql_mcp.plugins.executions.backoff import retrying

pytestmark = pytest.mark.anyio


class Flaky:
    """Refuses its first `failures` calls as the store does when a lock is held, then answers."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.calls = 0
        self.error = error or StoreError()

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "written"


async def test_a_store_error_is_retried_until_the_call_answers() -> None:
    flaky = Flaky(3)
    assert await retrying(flaky, budget=30, execution_id="e") == "written"
    assert flaky.calls == 4


async def test_the_last_store_error_is_raised_once_the_budget_is_spent() -> None:
    flaky = Flaky(1000)
    with pytest.raises(StoreError):
        await retrying(flaky, budget=0, execution_id="e")
    assert flaky.calls == 1


async def test_an_error_that_is_not_the_stores_is_not_retried() -> None:
    flaky = Flaky(1, ValueError("a bug"))
    with pytest.raises(ValueError, match="a bug"):
        await retrying(flaky, budget=30, execution_id="e")
    assert flaky.calls == 1
