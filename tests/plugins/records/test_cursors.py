"""Cursor keys on both engines (issue 12: crafted listing cursors answered INTERNAL_ERROR).

`listing.key_from_json` is the one gate between a caller's cursor and an engine: what it refuses
becomes a validation error, and every key it accepts, at the edges of each part's range, each
engine must bind and compare without an engine error, with the window the listing order says.
"""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.plugins.records.listing import BOOLEAN, COMPOSITE, MISSING, NUMBER, STRING, Key, Listing, key_from_json
from aql_mcp.plugins.records.store import NewRecord, Quota, RecordStore
from aql_mcp.store.base import Store

pytestmark = pytest.mark.anyio
QUOTA = Quota(max_records=1000, max_bytes=10_000_000)
VALUES: list[Any] = [-3, 1, 2.5, "a", "é", "\uffff", True, None, [1], {"x": 1}]
EDGE_KEYS = [
    Key(MISSING, 0, "", 0),
    Key(MISSING, -(2**63), "", 0),
    Key(BOOLEAN, 2**64 - 1, "", 2**63 - 1),
    Key(NUMBER, 2**64 - 1, "", 0),
    Key(NUMBER, -(2**63), "", 5),
    Key(NUMBER, 1.7976931348623157e308, "", 1),
    Key(NUMBER, -1.7976931348623157e308, "", 1),
    Key(NUMBER, 5e-324, "", 3),
    Key(NUMBER, -0.0, "", 3),
    Key(NUMBER, 2.5, "", 2),
    Key(STRING, 0, "a", 3),
    Key(STRING, 0, "\uffff" * 3, 0),
    Key(STRING, 0, "\U0010ffff", 0),
    Key(STRING, 0, "x" * 100_000, 4),
    Key(STRING, 1e300, "é", 2**63 - 1),
    Key(COMPOSITE, 0, "", 2**63 - 1),
    Key(COMPOSITE, 0, "\U0001f600", 0),
]


@pytest.fixture
async def records(store: Store) -> RecordStore:
    facet = store.records
    await facet.create_collection("t", "c", "", None, "now")
    for index, value in enumerate(VALUES):
        await facet.create_record("t", NewRecord("c", f"r{index}", {"v": value}, "e", "now"), QUOTA, None)
    await facet.create_record("t", NewRecord("c", "missing", {}, "e", "now"), QUOTA, None)
    return facet


def order(key: Key) -> tuple[Any, ...]:
    return (key.rank, key.number, key.text, key.position)


@pytest.mark.parametrize("key", EDGE_KEYS, ids=range(len(EDGE_KEYS)))
@pytest.mark.parametrize("sort", [None, ("v",)], ids=["store-order", "sorted"])
async def test_every_accepted_key_runs_on_every_engine_with_the_window_the_order_gives(
    records: RecordStore, key: Key, sort: tuple[str, ...] | None
) -> None:
    assert key_from_json(list(order(key))) == key
    full = await records.list_records("t", "c", Listing(size=100, sort=sort))
    keyed = [(record.id, k) for record, k in full.items]
    # A descending order exists only with a sort (the records plugin sends none without one).
    for descending in (False, True) if sort else (False,):
        for forward in (True, False):
            listing = Listing(size=100, forward=forward, cursor=key, sort=sort, descending=descending)
            page = await records.list_records("t", "c", listing)
            expected = [rid for rid, k in keyed if _beyond(k, key, sort is not None, forward != descending)]
            assert [record.id for record, _ in page.items] == (expected[::-1] if descending else expected)


def _beyond(item: Key, cursor: Key, sorted_: bool, after: bool) -> bool:
    mine, theirs = (order(item), order(cursor)) if sorted_ else (item.position, cursor.position)
    return mine > theirs if after else mine < theirs


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "k",
        {},
        [],
        [0, 0, ""],
        [0, 0, "", 1, 2],
        [5, 0, "", 1],
        [-1, 0, "", 1],
        [True, 0, "", 1],
        [0.0, 0, "", 1],
        [0, "1", "", 1],
        [0, True, "", 1],
        [0, None, "", 1],
        [0, 2**64, "", 1],
        [0, -(2**63) - 1, "", 1],
        [0, float("inf"), "", 1],
        [0, float("-inf"), "", 1],
        [0, float("nan"), "", 1],
        [0, 0, 1, 1],
        [0, 0, None, 1],
        [0, 0, "a\x00b", 1],
        [0, 0, "\ud800", 1],
        [0, 0, "", -1],
        [0, 0, "", 2**63],
        [0, 0, "", 1.0],
        [0, 0, "", True],
        [0, 0, "", "1"],
    ],
)
def test_a_key_no_listing_produces_is_refused_before_any_engine_sees_it(raw: Any) -> None:
    assert key_from_json(raw) is None
