"""Per-principal rate and concurrency limits (corporate §14; Appendix B: -32003 / HTTP 429 with Retry-After).

Unit-level: the middleware is called as a plain ASGI app with an injected clock and a tiny inner app,
and the principal is put in the scope as the auth middleware would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
import orjson
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aql_mcp.auth.principal import Principal
from aql_mcp.bucket import charge, remaining
from aql_mcp.middleware.rate_limit import SWEEP_AT, RateLimitMiddleware
from aql_mcp.scope import PRINCIPAL_KEY, REQUEST_ID_KEY
from tests.support.clock import Clock

pytestmark = pytest.mark.anyio

ALICE = Principal(subject="alice")
BOB = Principal(subject="bob")
REQUEST_ID = "req-rate-1"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def error(self) -> dict[str, Any]:
        error: dict[str, Any] = orjson.loads(self.body)["error"]
        return error


async def ok(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


class Gate:
    """An inner app that holds every request until `release` is set."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.entered = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.entered += 1
        await self.release.wait()
        await ok(scope, receive, send)

    async def wait_entered(self, count: int) -> None:
        with anyio.fail_after(5):
            while self.entered < count:
                await anyio.lowlevel.checkpoint()


def limiter(
    app: ASGIApp = ok, *, rate: float = 1.0, burst: int = 3, concurrent: int = 10, clock: Clock | None = None
) -> RateLimitMiddleware:
    return RateLimitMiddleware(
        app, rate_per_second=rate, burst=burst, max_concurrent=concurrent, clock=clock or Clock(1000.0)
    )


async def call(
    app: ASGIApp,
    method: str = "POST",
    principal: Principal | None = ALICE,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> Reply:
    scope: Scope = {
        "type": "http",
        "method": method,
        "path": "/mcp",
        "headers": headers or [],
        REQUEST_ID_KEY: REQUEST_ID,
    }
    if principal is not None:
        scope[PRINCIPAL_KEY] = principal
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    headers = {key.decode(): value.decode() for key, value in start["headers"]}
    return Reply(start["status"], headers, b"".join(m.get("body", b"") for m in sent[1:]))


def assert_rate_limited(reply: Reply, retry_after: int | None = None) -> None:
    """Corporate §14 / Appendix B.2-B.3: 429, Retry-After, code -32003 and `data.retryAfter`."""
    assert reply.status == 429
    assert reply.headers["content-type"] == "application/json"
    seconds = int(reply.headers["retry-after"])
    assert seconds >= 1
    error = reply.error()
    assert error["code"] == -32003
    assert error["data"]["retryAfter"] == seconds
    assert error["data"]["requestId"] == REQUEST_ID
    assert orjson.loads(reply.body)["id"] is None
    if retry_after is not None:
        assert seconds == retry_after


async def test_requests_within_the_burst_pass() -> None:
    app = limiter(burst=3)
    for _ in range(3):
        assert (await call(app)).status == 200


async def test_request_after_the_burst_is_429_with_retry_after() -> None:
    """Corporate §14: rate limit -> -32003 / HTTP 429 with the Retry-After header."""
    app = limiter(burst=3)
    for _ in range(3):
        await call(app)
    assert_rate_limited(await call(app))


@pytest.mark.parametrize(("rate", "retry_after"), [(10.0, 1), (1.0, 1), (0.25, 4), (0.3, 4)])
async def test_retry_after_is_the_whole_seconds_until_a_token_is_back(rate: float, retry_after: int) -> None:
    app = limiter(rate=rate, burst=1)
    await call(app)
    assert_rate_limited(await call(app), retry_after=retry_after)


async def test_refused_request_never_reaches_the_app() -> None:
    reached = 0

    async def counting(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal reached
        reached += 1
        await ok(scope, receive, send)

    app = limiter(counting, burst=2)
    for _ in range(5):
        await call(app)
    assert reached == 2


async def test_tokens_refill_as_the_clock_advances() -> None:
    clock = Clock(1000.0)
    app = limiter(rate=2.0, burst=2, clock=clock)
    for _ in range(2):
        await call(app)
    assert_rate_limited(await call(app))
    clock.advance(0.25)
    assert_rate_limited(await call(app), retry_after=1)
    clock.advance(0.25)
    assert (await call(app)).status == 200
    assert_rate_limited(await call(app))


async def test_an_idle_bucket_refills_only_up_to_the_burst() -> None:
    clock = Clock(1000.0)
    app = limiter(rate=5.0, burst=2, clock=clock)
    await call(app)
    clock.advance(3600)
    assert [(await call(app)).status for _ in range(3)] == [200, 200, 429]


async def test_principals_have_separate_buckets() -> None:
    app = limiter(burst=1)
    assert (await call(app, principal=ALICE)).status == 200
    assert_rate_limited(await call(app, principal=ALICE))
    assert (await call(app, principal=BOB)).status == 200
    assert_rate_limited(await call(app, principal=BOB))


async def test_anonymous_callers_share_one_bucket() -> None:
    app = limiter(burst=2)
    assert (await call(app, principal=None)).status == 200
    assert (await call(app, principal=None)).status == 200
    assert_rate_limited(await call(app, principal=None))
    assert (await call(app, principal=ALICE)).status == 200


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_every_method_pays_a_token(method: str) -> None:
    app = limiter(burst=2)
    for _ in range(2):
        assert (await call(app, method)).status == 200
    assert_rate_limited(await call(app, "POST"))


async def test_post_over_max_concurrent_is_429_until_the_calls_finish() -> None:
    gate = Gate()
    app = limiter(gate, burst=100, concurrent=2)
    replies: list[Reply] = []

    async def collect() -> None:
        replies.append(await call(app))

    async with anyio.create_task_group() as tg:
        tg.start_soon(collect)
        tg.start_soon(collect)
        await gate.wait_entered(2)
        assert_rate_limited(await call(app), retry_after=1)
        gate.release.set()
    assert [reply.status for reply in replies] == [200, 200]
    assert gate.entered == 2
    assert (await call(app)).status == 200


async def test_a_spent_rate_budget_says_so_in_the_429() -> None:
    """docs/errors.md, "Rate limits": the budget spent, the one unit asked, what is left and the limit."""
    app = limiter(burst=3)
    for _ in range(3):
        await call(app)
    data = (await call(app)).error()["data"]
    assert {key: data[key] for key in ("budget", "cost", "remaining", "limit")} == {
        "budget": "rate",
        "cost": 1,
        "remaining": 0,
        "limit": 3,
    }


async def test_a_spent_concurrency_budget_says_so_in_the_429() -> None:
    gate = Gate()
    app = limiter(gate, burst=100, concurrent=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, app)
        await gate.wait_entered(1)
        data = (await call(app)).error()["data"]
        gate.release.set()
    assert {key: data[key] for key in ("budget", "cost", "remaining", "limit")} == {
        "budget": "concurrency",
        "cost": 1,
        "remaining": 0,
        "limit": 1,
    }


async def test_the_admitted_request_may_spend_more_of_its_own_bucket() -> None:
    """The limiter lends the request's budget to the handler (bucket.REQUEST_BUDGET): what the
    handler charges comes from the caller's bucket, and `remaining` reads it."""
    seen: list[tuple[float, int | None]] = []

    async def spends(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append((charge(2), remaining()))
        await ok(scope, receive, send)

    app = limiter(spends, rate=0.001, burst=5)
    assert (await call(app)).status == 200
    assert seen[0] == (0.0, 2)  # 5 - 1 (admission) - 2
    assert (await call(app)).status == 200
    wait, left = seen[1]
    assert wait > 0  # 2 more than the 1 left after admission: refused, nothing taken
    assert left == 1
    assert (await call(app)).status == 200  # the one token the refused charge left
    assert_rate_limited(await call(app))
    assert remaining() is None  # outside a request the limiter admitted


async def test_concurrency_is_counted_per_principal() -> None:
    gate = Gate()
    app = limiter(gate, burst=100, concurrent=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, app, "POST", ALICE)
        await gate.wait_entered(1)
        assert_rate_limited(await call(app, principal=ALICE), retry_after=1)
        tg.start_soon(call, app, "POST", BOB)
        await gate.wait_entered(2)
        gate.release.set()


async def test_an_app_that_raises_releases_its_slot() -> None:
    async def broken(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("boom")

    app = limiter(broken, burst=100, concurrent=1)
    for _ in range(3):
        with pytest.raises(RuntimeError):
            await call(app)


async def test_a_cancelled_call_releases_its_slot() -> None:
    gate = Gate()
    app = limiter(gate, burst=100, concurrent=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, app)
        await gate.wait_entered(1)
        tg.cancel_scope.cancel()
    gate.release.set()
    assert (await call(app)).status == 200


async def test_get_streams_hold_no_concurrency_slot() -> None:
    """A GET SSE stream stays open for long: it pays a token but never blocks a POST."""
    gate = Gate()

    async def streams_wait(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "GET":
            await gate(scope, receive, send)
            return
        await ok(scope, receive, send)

    app = limiter(streams_wait, burst=100, concurrent=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, app, "GET")
        tg.start_soon(call, app, "GET")
        await gate.wait_entered(2)
        assert (await call(app, "POST")).status == 200
        assert (await call(app, "POST")).status == 200
        gate.release.set()


async def test_listen_streams_hold_no_concurrency_slot() -> None:
    """A modern `subscriptions/listen` POST (told by its `Mcp-Method`) is a stream too: it pays a
    token but never blocks a call; endpoint/modern/listeners.py caps those streams instead."""
    gate = Gate()
    listen = [(b"mcp-method", b"subscriptions/listen"), (b"mcp-protocol-version", b"2026-07-28")]

    async def streams_wait(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["headers"] == listen:
            await gate(scope, receive, send)
            return
        await ok(scope, receive, send)

    app = limiter(streams_wait, burst=100, concurrent=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, app, "POST", ALICE, listen)
        tg.start_soon(call, app, "POST", ALICE, listen)
        await gate.wait_entered(2)
        assert (await call(app, "POST", ALICE, [(b"mcp-method", b"tools/call")])).status == 200
        gate.release.set()


@pytest.mark.parametrize("version", [b"2025-11-25", b"", b"2099-01-01"])
async def test_a_listen_method_header_outside_the_modern_era_still_takes_a_slot(version: bytes) -> None:
    """Only the modern edge checks `Mcp-Method` against the body: elsewhere the header proves nothing."""
    gate = Gate()
    posing = [(b"mcp-method", b"subscriptions/listen"), (b"mcp-protocol-version", version)]
    app = limiter(gate, burst=100, concurrent=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, app, "POST", ALICE, posing)
        await gate.wait_entered(1)
        assert_rate_limited(await call(app, "POST", ALICE, posing), retry_after=1)
        gate.release.set()


@pytest.mark.parametrize("scope_type", ["lifespan", "websocket"])
async def test_non_http_scope_passes_through(scope_type: str) -> None:
    seen: list[str] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    async def receive() -> Message:
        return {"type": f"{scope_type}.disconnect"}

    async def send(message: Message) -> None:
        raise AssertionError("the middleware must not answer")

    app = limiter(inner, burst=1)
    for _ in range(3):
        await app({"type": scope_type, PRINCIPAL_KEY: ALICE}, receive, send)
    assert seen == [scope_type] * 3


async def test_full_idle_buckets_are_dropped_when_the_table_is_large() -> None:
    """Memory stays bounded: a full bucket equals a new one, so forgetting it changes nothing."""
    clock = Clock(1000.0)
    app = limiter(rate=1.0, burst=2, clock=clock)
    await call(app, principal=ALICE)
    await call(app, principal=ALICE)
    for n in range(SWEEP_AT - 1):
        await call(app, principal=Principal(subject=f"user-{n}"))
    assert len(app.buckets) == SWEEP_AT
    clock.advance(1.0)
    await call(app, principal=BOB)
    # Every one-off caller is full again and dropped; Alice is still one token short and kept.
    assert len(app.buckets) == 2
    assert (await call(app, principal=ALICE)).status == 200
    assert_rate_limited(await call(app, principal=ALICE))
