"""Records data access: named collections of JSON records per tenant (the `records` plugin).

`RecordStore` is the interface the plugin sees (its facet, plugins/records/tables.py); each engine implements it
(`plugins/records/sqlite.py`, `plugins/records/postgres.py`). Every write is one transaction in which
the quota check, the `_etag` comparison and the write they guard are atomic against every other
writer, on any replica. Listings are compiled to SQL (`plugins/records/compiler.py`); none reads a whole
collection into Python. A listing that filters, searches or sorts may examine every record of its
collection, so over a collection larger than the scan budget (`store.listing_scan_rows`) it is
refused before it runs (`check_scan`); a plain listing reads an index range and always runs.
Every read names its tenant to the engine, which shares its connections fairly between tenants
(`store/fair_share.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from aql_mcp.plugin import AqlMcpError
from aql_mcp.plugins.records.indexes import served
from aql_mcp.plugins.records.listing import Index, Key, Listing

# The scan budget of a listing when none is configured (`store.listing_scan_rows`).
SCAN_ROWS = 50_000
# How long a filtered, searched or sorted listing may run when none is configured (`store.listing_timeout_seconds`).
LISTING_SECONDS = 10.0


def timestamp(epoch: float) -> str:
    """The stored form of a moment: ISO 8601 UTC in milliseconds, which sorts as text (purges compare it)."""
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RecordStoreError(AqlMcpError):
    """A write the store refused for a reason the caller can act on."""


class AlreadyExists(RecordStoreError):
    pass


class Missing(RecordStoreError):
    pass


class VersionMismatch(RecordStoreError):
    def __init__(self, current: str) -> None:
        super().__init__(current)
        self.current = current


class QuotaExceeded(RecordStoreError):
    def __init__(self, metric: str, current: int, limit: int) -> None:
        super().__init__(metric)
        self.metric, self.current, self.limit = metric, current, limit


class ScanTooLarge(RecordStoreError):
    """A listing that would examine more records than the scan budget allows."""

    def __init__(self, limit: int, rows: int) -> None:
        super().__init__(limit)
        self.limit, self.rows = limit, rows


class ListingTimedOut(RecordStoreError):
    """A filtered, searched or sorted listing that ran past `store.listing_timeout_seconds`."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = seconds


class IndexMissing(RecordStoreError):
    """An index the collection does not declare."""


class KeyReused(RecordStoreError):
    """An idempotency key sent again with other parameters."""


@dataclass(frozen=True, slots=True)
class Quota:
    max_records: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class StoredCollection:
    name: str
    description: str
    fields: tuple[str, ...] | None
    created_at: str
    record_count: int = 0
    indexes: tuple[Index, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredRecord:
    collection: str
    id: str
    data: dict[str, Any]
    etag: str
    created_at: str
    updated_at: str
    position: int  # within its collection: the store order, and the last part of every cursor key


@dataclass(frozen=True, slots=True)
class NewRecord:
    collection: str
    id: str
    data: dict[str, Any]
    etag: str
    now: str


@dataclass(frozen=True, slots=True)
class RecordPage:
    """One window of a listing in listing order, each record with its key (what a cursor holds);
    `total` only where it costs nothing (a plain listing: the collection's count)."""

    items: list[tuple[StoredRecord, Key]] = field(default_factory=list)
    has_next: bool = False
    has_previous: bool = False
    total: int | None = None


@dataclass(frozen=True, slots=True)
class CollectionPage:
    """One window of a tenant's collections in name order, with the tenant's collection count."""

    items: list[StoredCollection]
    has_next: bool
    has_previous: bool
    total: int


@dataclass(frozen=True, slots=True)
class Idempotency:
    key: str
    request_hash: str


class RecordStore(Protocol):
    """Collections and records of one tenant at a time; a tenant never reaches another's rows."""

    # The scan budget of a listing (`store.listing_scan_rows`) and how long one that filters,
    # searches or sorts may run (`store.listing_timeout_seconds`), set by `tables.bound_records`.
    scan_rows: int
    listing_seconds: float

    async def create_collection(
        self,
        tenant: str,
        name: str,
        description: str,
        fields: tuple[str, ...] | None,
        now: str,
        *,
        indexes: tuple[Index, ...] = (),
        max_indexes: int = 0,
    ) -> StoredCollection:
        """A new collection declaring `indexes`, refused (`QuotaExceeded`, metric `indexes`) if the
        tenant's collections would then declare more than `max_indexes` (`build_index` builds them)."""
        ...

    async def add_index(self, tenant: str, collection: str, index: Index, max_indexes: int) -> tuple[Index, ...]:
        """Declare `index` on the collection (its indexes after); `Missing`, `AlreadyExists`, or
        `QuotaExceeded` past `max_indexes` declared by the tenant, checked in the same transaction."""
        ...

    async def remove_index(self, tenant: str, collection: str, index: Index) -> tuple[Index, ...]:
        """Forget the declaration (`Missing`, `IndexMissing`); the engine's index is dropped once no
        collection of any tenant declares it (`drop_unused_index`)."""
        ...

    async def build_index(self, index: Index) -> None:
        """Build the engine's index of `index` unless a valid one exists, without blocking other calls
        (a failed build on PostgreSQL, an INVALID index, is dropped and built again)."""
        ...

    async def drop_unused_index(self, index: Index) -> bool:
        """Drop the engine's index of `index` if no collection declares it any more; whether it did."""
        ...

    async def index_states(self, indexes: tuple[Index, ...]) -> dict[Index, str]:
        """Each index's engine state: `ready`, `building`, `invalid` (a failed build) or `missing`."""
        ...

    async def reconcile_indexes(self) -> int:
        """Build every declared index that is missing or invalid, drop the ones nobody declares;
        how many it changed (housekeeping repairs an interrupted build or a racing drop)."""
        ...

    async def get_collection(self, tenant: str, name: str) -> StoredCollection | None: ...
    async def list_collections(
        self, tenant: str, *, size: int, forward: bool = True, cursor: str | None = None
    ) -> CollectionPage:
        """`size` collections in name order after `cursor` (or before it, backward), keyset-paged."""
        ...

    async def delete_collection(self, tenant: str, name: str) -> int: ...
    async def create_record(
        self, tenant: str, record: NewRecord, quota: Quota, idempotency: Idempotency | None
    ) -> tuple[StoredRecord, bool]: ...
    async def create_records(self, tenant: str, collection: str, records: list[NewRecord], quota: Quota) -> int:
        """Add all `records` to the collection in one transaction, the quota checked for all of them
        at once: all are written or none. Returns how many."""
        ...

    async def get_record(self, tenant: str, collection: str, record_id: str) -> StoredRecord | None: ...
    async def list_records(self, tenant: str, collection: str, listing: Listing) -> RecordPage:
        """The window of records matching `listing`, filtered, sorted and paged in the engine."""
        ...

    async def update_record(
        self,
        tenant: str,
        collection: str,
        record_id: str,
        change: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        if_match: str | None,
        etag: str,
        now: str,
        quota: Quota,
    ) -> StoredRecord: ...
    async def delete_record(self, tenant: str, collection: str, record_id: str, *, if_match: str | None) -> None: ...
    async def usage(self, tenant: str) -> tuple[int, int]: ...
    async def purge_idempotency(self, before: float) -> int:
        """Forget idempotency keys first used before `before` (epoch seconds); return how many."""
        ...


def collection_page(
    rows: list[StoredCollection], size: int, *, forward: bool, behind: bool, total: int
) -> CollectionPage:
    """The page from up to `size + 1` collections read in travel order from the cursor, and whether
    one lies behind the cursor (`behind`), in name order with both directions' flags."""
    more = len(rows) > size
    items = rows[:size]
    if forward:
        return CollectionPage(items, has_next=more, has_previous=behind, total=total)
    return CollectionPage(items[::-1], has_next=behind, has_previous=more, total=total)


def window_page(
    rows: list[tuple[StoredRecord, Key]], listing: Listing, *, behind: bool, total: int | None
) -> RecordPage:
    """The page from up to `size + 1` records read in travel order (`page_query`) and whether a
    record lies behind the cursor (`beyond_query`): in listing order, with both directions' flags."""
    more = len(rows) > listing.size
    items = rows[: listing.size]
    if listing.forward:
        return RecordPage(items, has_next=more, has_previous=behind, total=total)
    return RecordPage(items[::-1], has_next=behind, has_previous=more, total=total)


def check_scan(listing: Listing, record_count: int, limit: int) -> None:
    """Refuse a listing that is not a plain index range over a collection of more than `limit`
    records: with no index on a record's data, its filter, search or sort may examine them all.
    Counted before the scan (the collection's own counter), so it costs one row and answers the
    same on every engine, whatever the load. A listing a declared index narrows reads that index's
    range and is not refused; the listing timeout still bounds it."""
    if not listing.is_plain and record_count > limit and not served(listing):
        raise ScanTooLarge(limit, record_count)


def first_response(record: StoredRecord) -> dict[str, Any]:
    """What an idempotency key replays: the record as first created."""
    return {
        "collection": record.collection,
        "id": record.id,
        "data": record.data,
        "etag": record.etag,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def replayed(response: bytes | str) -> StoredRecord:
    return StoredRecord(**orjson.loads(response), position=0)


def over_quota(used: tuple[int, int], records: int, size: int, quota: Quota) -> QuotaExceeded | None:
    """The limit that adding `records` and `size` bytes to `used` would pass (a shrinking write never fails)."""
    if records > 0 and used[0] + records > quota.max_records:
        return QuotaExceeded("records", used[0], quota.max_records)
    if size > 0 and used[1] + size > quota.max_bytes:
        return QuotaExceeded("bytes", used[1], quota.max_bytes)
    return None
