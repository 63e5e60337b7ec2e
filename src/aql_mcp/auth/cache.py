"""A bounded cache of verdicts on tokens, keyed by the token's SHA-256 digest (never the token).

Every entry lives until its own deadline; when the cache is full the oldest entry goes first, so
a flood of new keys costs a fixed amount of memory and evicts itself, not the process.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")


class TtlCache(Generic[V]):
    """At most `size` entries, each until its deadline; full, it forgets the oldest insertion."""

    __slots__ = ("_entries", "_size")

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[bytes, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes, now: float) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= now:
            del self._entries[key]
            return None
        return entry[1]

    def put(self, key: bytes, value: V, until: float) -> None:
        self._entries.pop(key, None)
        self._entries[key] = (until, value)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def discard(self, key: bytes) -> None:
        self._entries.pop(key, None)
