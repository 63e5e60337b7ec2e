"""The token bucket's costs: a request may spend several tokens (a batch of MCP-AQL operations), and
a cost above the capacity leaves the bucket in debt instead of never running (issue 23)."""

from __future__ import annotations

import pytest

from aql_mcp.bucket import REQUEST_BUDGET, TokenBucket, charge


def test_a_cost_takes_that_many_tokens_or_none() -> None:
    bucket = TokenBucket(capacity=5, rate=1.0, now=0.0)
    assert bucket.take(0.0, 3) == 0.0
    assert bucket.take(0.0, 3) == pytest.approx(1.0)  # 2 left, 1 short at one token a second
    assert bucket.tokens == pytest.approx(2.0)


def test_a_cost_above_the_capacity_is_taken_from_a_full_bucket_and_leaves_a_debt() -> None:
    bucket = TokenBucket(capacity=3, rate=1.0, now=0.0)
    assert bucket.take(0.0, 10) == 0.0
    assert bucket.take(0.0) == pytest.approx(8.0)  # -7 tokens: 8 seconds until one is back
    assert bucket.take(8.0) == 0.0


def test_a_cost_above_the_capacity_waits_for_a_full_bucket() -> None:
    bucket = TokenBucket(capacity=3, rate=1.0, now=0.0)
    assert bucket.take(0.0) == 0.0
    assert bucket.take(0.0, 10) == pytest.approx(1.0)
    assert bucket.tokens == pytest.approx(2.0)


def test_what_the_request_already_paid_counts_towards_a_full_bucket() -> None:
    bucket = TokenBucket(capacity=3, rate=1.0, now=0.0)
    assert bucket.take(0.0) == 0.0  # the request's own token
    assert bucket.take(0.0, 9, paid=1) == 0.0  # the rest of a batch of 10, from what was full
    assert bucket.tokens == pytest.approx(-7.0)


def test_charge_spends_the_current_requests_budget_and_nothing_without_one() -> None:
    spent: list[int] = []
    assert charge(5) == 0.0  # no rate limiter admitted this call
    token = REQUEST_BUDGET.set(lambda cost: spent.append(cost) or 0.0)
    try:
        assert charge(4) == 0.0
        assert charge(0) == 0.0
    finally:
        REQUEST_BUDGET.reset(token)
    assert spent == [4]
