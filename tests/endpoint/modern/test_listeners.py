"""The listen streams of one replica: caps, what each is offered, and shutdown (endpoint/modern/listeners.py)."""

from __future__ import annotations

import anyio
import pytest

from aql_mcp.endpoint.modern.listeners import Listener, Listeners
from aql_mcp.endpoint.modern.subscription import (
    PROMPTS_CHANGED,
    RESOURCE_UPDATED,
    TOOLS_CHANGED,
    Change,
    SubscriptionFilter,
)
from aql_mcp.exceptions import ListenLimitReached, RateLimited

pytestmark = pytest.mark.anyio

EVERYTHING = SubscriptionFilter(frozenset({TOOLS_CHANGED, PROMPTS_CHANGED}), ("test://a",))


def listener(owner: str = "alice", wanted: SubscriptionFilter = EVERYTHING) -> Listener:
    return Listener(owner=owner, subscription_id=1, wanted=wanted)


def test_one_caller_past_its_cap_is_rate_limited_and_others_still_get_in() -> None:
    refusals: list[str] = []
    listeners = Listeners(max_open=10, max_per_owner=2, on_limit=refusals.append)
    listeners.admit(listener())
    listeners.admit(listener())

    with pytest.raises(RateLimited):
        listeners.admit(listener())
    listeners.admit(listener("bob"))
    assert len(listeners) == 3
    assert refusals == ["listens"]


def test_a_full_replica_refuses_with_retry_later() -> None:
    refusals: list[str] = []
    listeners = Listeners(max_open=1, max_per_owner=5, on_limit=refusals.append)
    listeners.admit(listener())

    with pytest.raises(ListenLimitReached) as refused:
        listeners.admit(listener("bob"))
    assert refused.value.status == 503
    assert refused.value.headers["retry-after"]
    assert refusals == ["listen_table"]


def test_a_released_slot_is_free_again_and_releasing_twice_changes_nothing() -> None:
    listeners = Listeners(max_open=1, max_per_owner=1)
    held = listener()
    listeners.admit(held)
    listeners.release(held)
    listeners.release(held)

    listeners.admit(listener())
    assert len(listeners) == 1


async def test_a_listener_gets_what_it_wants_in_order_and_each_equal_change_once() -> None:
    listeners = Listeners(max_open=5, max_per_owner=5)
    held = listener()
    listeners.admit(held)
    for change in (
        Change(TOOLS_CHANGED),
        Change(RESOURCE_UPDATED, "test://other"),
        Change(RESOURCE_UPDATED, "test://a"),
        Change(TOOLS_CHANGED),
        Change("notifications/resources/list_changed"),
    ):
        listeners.deliver(change)

    with anyio.fail_after(5):
        changes = await held.next_changes(5)
    assert changes == [Change(TOOLS_CHANGED), Change(RESOURCE_UPDATED, "test://a")]


async def test_a_quiet_listener_returns_nothing_after_the_keep_alive_interval() -> None:
    with anyio.fail_after(5):
        assert await listener().next_changes(0.01) == []


async def test_stopping_ends_every_listener_and_closes_the_door() -> None:
    listeners = Listeners(max_open=5, max_per_owner=5)
    held = listener()
    listeners.admit(held)

    assert listeners.stop_all() == 1
    with anyio.fail_after(5):
        await held.next_changes(60)
    assert held.stopped
    held.offer(Change(TOOLS_CHANGED))
    assert await held.next_changes(0) == []
    with pytest.raises(ListenLimitReached):
        listeners.admit(listener("late"))


def test_the_replicas_ticker_marks_only_quiet_streams_and_wakes_them() -> None:
    """One ticker for the replica (`Listeners.keepalive`), no timer per stream: a stream quiet for
    the keep-alive interval is told a comment is due; one that wrote lately is left alone."""
    listeners = Listeners(max_open=10, max_per_owner=10)
    quiet, busy = listener(), listener()
    woken: list[str] = []
    quiet.waking(lambda: woken.append("quiet"))
    busy.waking(lambda: woken.append("busy"))
    listeners.admit(quiet)
    listeners.admit(busy)
    quiet.last_write -= 20

    listeners.keepalive(15)
    listeners.keepalive(15)  # still due, not written yet: no second wake-up
    assert (quiet.due, busy.due) == (True, False)
    assert quiet.ready
    assert not busy.ready
    assert woken == ["quiet"]


def test_an_offer_or_a_stop_wakes_the_stream_and_take_empties_what_it_holds() -> None:
    held = listener()
    woken: list[int] = []
    held.waking(lambda: woken.append(1))
    held.offer(Change(TOOLS_CHANGED))
    held.offer(Change(TOOLS_CHANGED))
    assert held.ready
    assert held.take() == [Change(TOOLS_CHANGED)]
    assert held.take() == []
    held.stop()
    assert held.ready
    assert len(woken) == 3
    held.waking(None)
    held.offer(Change(PROMPTS_CHANGED))  # stopped: nothing more is taken, nothing wakes
    assert len(woken) == 3
