"""The bounded verdict cache: deadlines per entry, a hard cap on entries, oldest forgotten first."""

from __future__ import annotations

from aql_mcp.auth.cache import TtlCache


def test_an_entry_is_found_until_its_deadline_and_then_forgotten() -> None:
    cache: TtlCache[str] = TtlCache(10)
    cache.put(b"k", "v", until=100.0)

    assert cache.get(b"k", now=99.9) == "v"
    assert cache.get(b"k", now=100.0) is None
    assert len(cache) == 0


def test_a_full_cache_forgets_the_oldest_insertion_and_never_grows_past_its_size() -> None:
    cache: TtlCache[int] = TtlCache(3)
    for n in range(1000):
        cache.put(n.to_bytes(4, "big"), n, until=1e9)

    assert len(cache) == 3
    assert cache.get((996).to_bytes(4, "big"), now=0) is None
    assert [cache.get(n.to_bytes(4, "big"), now=0) for n in (997, 998, 999)] == [997, 998, 999]


def test_putting_a_key_again_renews_it_and_makes_it_the_newest() -> None:
    cache: TtlCache[str] = TtlCache(2)
    cache.put(b"a", "1", until=10.0)
    cache.put(b"b", "2", until=10.0)
    cache.put(b"a", "3", until=20.0)
    cache.put(b"c", "4", until=10.0)

    assert cache.get(b"a", now=15.0) == "3"
    assert cache.get(b"b", now=0.0) is None


def test_discard_forgets_a_key_and_ignores_an_unknown_one() -> None:
    cache: TtlCache[str] = TtlCache(2)
    cache.put(b"a", "1", until=10.0)
    cache.discard(b"a")
    cache.discard(b"never")

    assert cache.get(b"a", now=0.0) is None
