"""The error tree: every "retry later" answer is built one way (issue 12)."""

from __future__ import annotations

import pytest

from aql_mcp.exceptions import (
    RATE_LIMITED,
    UPSTREAM_UNAVAILABLE,
    ConnectionLimitReached,
    IntrospectionBudgetSpent,
    ListenLimitReached,
    RateLimited,
    RetryableError,
    RetryLater,
    SessionLimitReached,
    ShuttingDown,
    StoreError,
    UpstreamUnavailable,
    WireError,
)
from aql_mcp.responses import error_object

RETRYABLE = {
    "rate_limited": (RateLimited(retry_after=3), 429, RATE_LIMITED, 3),
    "retry_later": (RetryLater(retry_after=5), 503, UPSTREAM_UNAVAILABLE, 5),
    "store": (StoreError(), 503, UPSTREAM_UNAVAILABLE, StoreError.RETRY_AFTER),
    "session_table": (SessionLimitReached(retry_after=17), 503, UPSTREAM_UNAVAILABLE, 17),
    "connections": (ConnectionLimitReached(), 503, UPSTREAM_UNAVAILABLE, ConnectionLimitReached.RETRY_AFTER),
    "introspection_budget": (IntrospectionBudgetSpent(retry_after=4), 503, UPSTREAM_UNAVAILABLE, 4),
    "shutting_down": (ShuttingDown(retry_ms=2500), 503, UPSTREAM_UNAVAILABLE, 3),
    "listen_table": (ListenLimitReached(retry_after=1), 503, UPSTREAM_UNAVAILABLE, 1),
}


@pytest.mark.parametrize(("error", "status", "code", "seconds"), RETRYABLE.values(), ids=RETRYABLE.keys())
def test_every_retry_later_answer_carries_retry_after_in_the_header_and_the_data(
    error: RetryableError, status: int, code: int, seconds: int
) -> None:
    wire, body = error_object(error, "req-1")
    assert (wire.status, body["code"]) == (status, code)
    assert wire.headers["retry-after"] == str(seconds)
    assert body["data"]["retryAfter"] == seconds
    assert body["data"]["requestId"] == "req-1"
    assert wire.keeps_status is True


def test_every_503_that_says_when_to_retry_is_a_retry_later_and_an_upstream_unavailable() -> None:
    for error in (StoreError(), SessionLimitReached(retry_after=1), ConnectionLimitReached()):
        assert isinstance(error, RetryLater)
        assert isinstance(error, UpstreamUnavailable)
    assert not isinstance(RateLimited(retry_after=1), UpstreamUnavailable)


def test_the_connection_limit_names_its_limit_and_closes_the_connection() -> None:
    error = ConnectionLimitReached()
    assert error.data == {"limit": "connections", "retryAfter": ConnectionLimitReached.RETRY_AFTER}
    assert error.headers["connection"] == "close"


def test_a_detail_replaces_the_default_message_and_data_is_kept_beside_retry_after() -> None:
    error = RetryLater("Service unavailable: try again", retry_after=9, data={"limit": "x"})
    assert error.detail == "Service unavailable: try again"
    assert error.data == {"limit": "x", "retryAfter": 9}


def test_a_plain_store_not_open_error_has_no_retry_after_and_travels_in_session_with_200() -> None:
    error = UpstreamUnavailable("Service unavailable: the store is not open")
    assert isinstance(error, WireError)
    assert "retry-after" not in error.headers
    assert error.keeps_status is False
