"""Listings compiled to SQL (plugins/records/listing.py, plugins/records/compiler.py), the same answers on every engine.

The expected ids are written from the rules in listing.py's docstring (docs/store.md, "Typed
comparisons"), not from either engine: booleans never equal numbers, numbers compare by value
whatever their notation, strings by code point, ordering operators only within one kind, and
one total order for sorting.
"""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.plugins.records.listing import Condition, Key, Listing
from aql_mcp.plugins.records.store import NewRecord, Quota, RecordPage, RecordStore
from aql_mcp.store.base import Store

pytestmark = pytest.mark.anyio
QUOTA = Quota(max_records=1000, max_bytes=10_000_000)
VALUES: dict[str, Any] = {
    "true": True,
    "one": 1,
    "one_real": 1.0,
    "one_text": "1",
    "null": None,
    "object": {"x": 1, "y": [1, True]},
    "array": [1, True, "Hello"],
    "hello": "Héllo wörld",
    "big": 2.5,
    "false": False,
    "minus": -3,
}
SORTED = [
    "null", "missing",  # missing and null, then store order
    "false", "true",
    "minus", "one", "one_real", "big",
    "one_text", "hello",
    "array", "object",  # arrays before objects (by kind only), then position
]  # fmt: skip


@pytest.fixture
async def records(store: Store) -> RecordStore:
    facet = store.records
    await facet.create_collection("t", "c", "", None, "now")
    for name, value in VALUES.items():
        data = {"v": value, "meta": {"n": len(name)}, "name": name}
        await facet.create_record("t", NewRecord("c", name, data, "e", "now"), QUOTA, None)
    await facet.create_record("t", NewRecord("c", "missing", {"other": True, "name": "qq"}, "e", "now"), QUOTA, None)
    await facet.create_collection("u", "c", "", None, "now")
    await facet.create_record("u", NewRecord("c", "foreign", {"v": True}, "e", "now"), QUOTA, None)
    return facet


async def listed(records: RecordStore, **listing: Any) -> list[str]:
    page = await records.list_records("t", "c", Listing(size=listing.pop("size", 100), **listing))
    return [record.id for record, _ in page.items]


def where(path: str, op: str, operand: Any) -> dict[str, Any]:
    return {"conditions": (Condition(tuple(path.split(".")), op, operand),)}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("op", "operand", "expected"),
    [
        ("eq", True, ["true"]),
        ("eq", 1, ["one", "one_real"]),
        ("eq", 1.0, ["one", "one_real"]),
        ("eq", "1", ["one_text"]),
        ("eq", None, ["null"]),
        ("eq", False, ["false"]),
        ("eq", {"y": [1.0, True], "x": 1}, ["object"]),
        ("eq", [1, True, "Hello"], ["array"]),
        ("eq", [1, 1, "Hello"], []),
        ("in", [True, "1", -3], ["true", "one_text", "minus"]),
        ("in", [], []),
        ("gt", 1, ["big"]),
        ("gte", 1, ["one", "one_real", "big"]),
        ("lt", 1, ["minus"]),
        ("lte", "2", ["one_text"]),
        ("gt", "A", ["hello"]),
        ("contains", True, ["array"]),
        ("contains", 1, ["array"]),
        ("contains", "hello", []),  # an array element must equal it; no string value holds it
        ("contains", "Hello", ["array"]),
        ("contains", "HÉLLO", ["hello"]),
        ("contains", "WÖR", ["hello"]),
        ("exists", True, [n for n in VALUES]),
        ("exists", False, ["missing"]),
    ],
)
async def test_typed_conditions_on_data(records: RecordStore, op: str, operand: Any, expected: list[str]) -> None:
    """issue 11: `{flag: true}` never matches 1 or 1.0, and each operator keeps JSON types apart."""
    assert sorted(await listed(records, **where("v", op, operand))) == sorted(expected)


async def test_ne_matches_everything_eq_does_not_including_missing(records: RecordStore) -> None:
    everyone = set(VALUES) | {"missing"}
    assert set(await listed(records, **where("v", "ne", True))) == everyone - {"true"}
    assert set(await listed(records, **where("v", "ne", 1))) == everyone - {"one", "one_real"}


async def test_nested_paths_and_several_conditions_all_hold(records: RecordStore) -> None:
    both = (Condition(("meta", "n"), "gte", 5), Condition(("v",), "exists", True), Condition(("v",), "ne", None))
    found = await listed(records, conditions=both)
    assert sorted(found) == sorted(n for n in VALUES if len(n) >= 5 and n != "null")


async def test_a_path_through_an_array_or_a_scalar_finds_nothing(records: RecordStore) -> None:
    assert await listed(records, **where("v.0", "exists", True)) == []
    assert await listed(records, **where("v.x", "eq", 1)) == ["object"]
    assert await listed(records, **where("name.x", "exists", True)) == []


async def test_system_fields_are_filtered_as_their_columns(records: RecordStore) -> None:
    assert await listed(records, **where("id", "eq", "true")) == ["true"]
    assert await listed(records, **where("id", "in", ["one", "big", 3])) == ["one", "big"]
    assert await listed(records, **where("id", "eq", 1)) == []
    assert sorted(await listed(records, **where("id", "contains", "ONE"))) == ["one", "one_real", "one_text"]


async def test_search_matches_any_word_in_any_string_value_case_insensitively(records: RecordStore) -> None:
    assert sorted(await listed(records, terms=("hello",))) == ["array", "hello"]  # a value, and a name
    assert sorted(await listed(records, terms=("wörld", "one_text"))) == ["hello", "one_text"]
    assert await listed(records, terms=("héllo wörld",)) == ["hello"]
    assert await listed(records, terms=("qq",)) == ["missing"]


async def test_sort_orders_every_json_type_in_one_total_order(records: RecordStore) -> None:
    assert await listed(records, sort=("v",)) == SORTED
    # Descending reverses the whole key, ties (same value) included.
    assert await listed(records, sort=("v",), descending=True) == SORTED[::-1]


async def test_a_plain_listing_is_in_store_order_with_its_total(records: RecordStore) -> None:
    page = await records.list_records("t", "c", Listing(size=3))
    assert [r.id for r, _ in page.items] == list(VALUES)[:3]
    assert (page.has_previous, page.has_next, page.total) == (False, True, len(VALUES) + 1)
    filtered = await records.list_records("t", "c", Listing(size=3, **where("v", "eq", True)))
    assert filtered.total is None


async def walk(records: RecordStore, size: int, *, forward: bool, **listing: Any) -> list[RecordPage]:
    pages: list[RecordPage] = []
    cursor: Key | None = None
    while True:
        page = await records.list_records("t", "c", Listing(size=size, forward=forward, cursor=cursor, **listing))
        pages.append(page)
        more = page.has_next if forward else page.has_previous
        if not more:
            return pages
        cursor = page.items[-1][1] if forward else page.items[0][1]


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("size", [1, 3, 5])
async def test_paging_with_cursors_both_ways_gives_the_whole_order_once(
    records: RecordStore, size: int, descending: bool
) -> None:
    expected = SORTED[::-1] if descending else SORTED
    forward = await walk(records, size, forward=True, sort=("v",), descending=descending)
    assert [r.id for page in forward for r, _ in page.items] == expected
    assert [p.has_previous for p in forward] == [False] + [True] * (len(forward) - 1)
    backward = await walk(records, size, forward=False, sort=("v",), descending=descending)
    assert [r.id for page in reversed(backward) for r, _ in page.items] == expected
    assert [p.has_next for p in backward] == [False] + [True] * (len(backward) - 1)


async def test_paging_a_filtered_listing_in_store_order(records: RecordStore) -> None:
    expected = await listed(records, **where("v", "exists", True))
    pages = await walk(records, 2, forward=True, **where("v", "exists", True))
    assert [r.id for page in pages for r, _ in page.items] == expected


async def test_a_cursor_past_the_end_gives_an_empty_page_that_knows_what_lies_behind(records: RecordStore) -> None:
    end = Key(position=10**9)
    page = await records.list_records("t", "c", Listing(size=5, cursor=end))
    assert (page.items, page.has_next, page.has_previous) == ([], False, True)


async def test_another_tenants_records_never_appear(records: RecordStore) -> None:
    assert "foreign" not in await listed(records)
    assert "foreign" not in await listed(records, **where("v", "eq", True))


async def test_values_with_characters_json_escapes_are_found(store: Store) -> None:
    """The SQLite engine first scans stored JSON text for the value: escapes must not hide it."""
    facet = store.records
    await facet.create_collection("t", "e", "", None, "now")
    odd = 'say "hi"\\ to\tme'
    for name, value in (("odd", odd), ("big", 2**60), ("float", 12.0)):
        await facet.create_record("t", NewRecord("e", name, {"v": value}, "e", "now"), QUOTA, None)

    async def ids(**listing: Any) -> list[str]:
        page = await facet.list_records("t", "e", Listing(size=10, **listing))
        return [record.id for record, _ in page.items]

    assert await ids(**where("v", "eq", odd)) == ["odd"]
    assert await ids(**where("v", "eq", 2**60)) == ["big"]
    assert await ids(**where("v", "eq", 12)) == ["float"]
    assert await ids(terms=('"hi"',)) == ["odd"]
    assert await ids(terms=("to\tme",)) == ["odd"]


async def test_engines_agree_on_odd_keys_huge_numbers_and_non_ascii_case(store: Store) -> None:
    """Differences a differential run of both engines found: keys JSON escapes (a backslash, a tab),
    a number too wide for a cursor's integer, and case folding beyond ASCII (Python's str.lower)."""
    facet = store.records
    await facet.create_collection("t", "o", "", None, "now")
    rows = {"école-1": {"back\\slash": 1, "tab\tkey": "x", "v": 1e20, "t": "ÉCOLE İstanbul"}, "plain": {"v": 2}}
    for name, data in rows.items():
        await facet.create_record("t", NewRecord("o", name, data, "e", "now"), QUOTA, None)

    async def ids(**listing: Any) -> list[str]:
        page = await facet.list_records("t", "o", Listing(size=10, **listing))
        return [record.id for record, _ in page.items]

    assert await ids(**where("back\\slash", "eq", 1)) == ["école-1"]
    assert await ids(conditions=(Condition(("tab\tkey",), "exists", True),)) == ["école-1"]
    assert await ids(**where("t", "contains", "école i̇stanbul")) == ["école-1"]
    assert await ids(**where("id", "contains", "ÉCOLE")) == ["école-1"]
    assert await ids(terms=("école",)) == ["école-1"]
    page = await facet.list_records("t", "o", Listing(size=1, sort=("v",), descending=True))
    assert page.items[0][1].number == 1e20
    after = await facet.list_records("t", "o", Listing(size=1, sort=("v",), descending=True, cursor=page.items[0][1]))
    assert [record.id for record, _ in after.items] == ["plain"]
