"""The index operations of the `records` plugin (`create_index`, `drop_index`, `list_indexes`), the
`indexes` option of `create_collection`, and what a listing tells of the indexes it used
(docs/aql.md, "Indexed fields"; docs/store.md, "Indexed fields").

A declaration is checked here (a plain data field, not a system field, one the collection allows,
at most `records.max_indexes` per tenant), stored, and then its index built: the call answers once
the index is ready. A build that fails keeps the declaration and answers with a warning and the
index's state; housekeeping builds it again (`RecordStore.reconcile_indexes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from aql_mcp.plugin import (
    CONFLICT_ALREADY_EXISTS,
    NOT_FOUND_RESOURCE,
    RATE_LIMIT_QUOTA_EXHAUSTED,
    VALIDATION_PAYLOAD_TOO_LARGE,
    VALIDATION_UNKNOWN_FIELD,
    Call,
    OperationError,
    Outcome,
    Settings,
    StoreError,
)
from aql_mcp.plugins.records.indexes import index_of, unserved_fields
from aql_mcp.plugins.records.listing import Index, Listing
from aql_mcp.plugins.records.params import SYSTEM_FIELDS, CollectionRef, IndexDeclaration, IndexRef
from aql_mcp.plugins.records.store import (
    AlreadyExists,
    IndexMissing,
    ListingTimedOut,
    Missing,
    QuotaExceeded,
    RecordStore,
    StoredCollection,
)

UNINDEXED = "PERFORMANCE_UNINDEXED_QUERY_WARNING"
BUILD_FAILED = "PERFORMANCE_INDEX_BUILD_FAILED_WARNING"


def declarations(wanted: list[IndexDeclaration], fields: tuple[str, ...] | None) -> tuple[Index, ...]:
    """The indexes a caller declared, checked: not a system field, a field the collection allows
    (its first name, when it declares `fields`), each once."""
    indexes: list[Index] = []
    for item in wanted:
        index = index_of(item.field, item.type)
        top = index.path[0]
        if top in SYSTEM_FIELDS or (fields is not None and top not in fields):
            raise OperationError(
                VALIDATION_UNKNOWN_FIELD,
                f"Unknown field(s) in 'field': {item.field}",
                {
                    "param_name": "field",
                    "unknown_fields": [item.field],
                    "valid_fields": list(fields) if fields is not None else None,
                    "reserved_fields": list(SYSTEM_FIELDS),
                    "hint": "System fields are columns of every record and cannot be indexed",
                },
            )
        if index in indexes:
            raise _exists(index)
        indexes.append(index)
    return tuple(indexes)


async def build_declared(store: RecordStore, indexes: tuple[Index, ...]) -> list[dict[str, Any]]:
    """Build each index; a failed build keeps the declaration and becomes a warning (retried by housekeeping)."""
    warnings: list[dict[str, Any]] = []
    for index in indexes:
        try:
            await store.build_index(index)
        except StoreError:
            warnings.append(
                {
                    "code": BUILD_FAILED,
                    "message": f"The index on '{index.field}' ({index.type}) could not be built yet; "
                    "listings scan until it is (it is retried in the background)",
                    "details": index.wire(),
                    "severity": "medium",
                }
            )
    return warnings


def listing_warnings(listing: Listing) -> tuple[dict[str, Any], ...]:
    """The warning of a listing that scans: the filter and sort fields no declared index serves."""
    if listing.is_plain:
        return ()
    fields = unserved_fields(listing)
    if not fields:
        return ()
    return (
        {
            "code": UNINDEXED,
            "message": f"No index serves {', '.join(repr(f) for f in fields)}: this listing scans the collection",
            "details": {
                "fields": fields,
                "suggestions": [
                    "Declare an index with create_index (field, type string or number)",
                    "Filter an indexed field with eq, in, gt, gte, lt or lte and an operand of its type",
                ],
            },
            "severity": "low",
        },
    )


def timed_out(exc: ListingTimedOut) -> OperationError:
    """MCP-AQL error codes §4.7's limit refusal, as the scan budget's (operations.py): the listing
    examined too much for its time; an index on its filter field narrows it."""
    return OperationError(
        VALIDATION_PAYLOAD_TOO_LARGE,
        f"Payload exceeds listing_timeout limit of {exc.seconds:g} seconds: the listing examined too many "
        "records; filter on an indexed field (create_index) or list unfiltered",
        {"limit_type": "listing_timeout", "limit_value": exc.seconds, "unit": "seconds"},
    )


class Records(Protocol):
    """What these operations take of the plugin's `Records` (operations.py): its settings, store,
    the caller's tenant and a collection of it (NOT_FOUND_RESOURCE when it has none by that name)."""

    settings: Settings
    store: RecordStore

    def tenant(self, call: Call) -> str: ...
    async def collection(self, tenant: str, name: str) -> StoredCollection: ...


@dataclass
class IndexOperations:
    """`create_index`, `drop_index` and `list_indexes` over the plugin's record store."""

    records: Records

    async def create_index(self, params: IndexRef, call: Call) -> Any:
        records = self.records
        tenant = records.tenant(call)
        collection = await records.collection(tenant, params.collection)
        (index,) = declarations([IndexDeclaration(field=params.field, type=params.type)], collection.fields)
        try:
            await records.store.add_index(tenant, params.collection, index, records.settings.records.max_indexes)
        except Missing:
            raise _not_found("collection", params.collection) from None
        except AlreadyExists:
            raise _exists(index) from None
        except QuotaExceeded as exc:
            raise _too_many(exc) from None
        warnings = await build_declared(records.store, (index,))
        states = await records.store.index_states((index,))
        answer = _wire(params.collection, index, states[index])
        return Outcome(answer, tuple(warnings)) if warnings else answer

    async def drop_index(self, params: IndexRef, call: Call) -> dict[str, Any]:
        records = self.records
        index = index_of(params.field, params.type)
        try:
            await records.store.remove_index(records.tenant(call), params.collection, index)
        except Missing:
            raise _not_found("collection", params.collection) from None
        except IndexMissing:
            raise _not_found("index", f"{params.collection}.{index.field}:{index.type}") from None
        # The engine's index goes with the last declaration of it, of any tenant's collection.
        await records.store.drop_unused_index(index)
        return {"collection": params.collection, **index.wire(), "deleted": True}

    async def list_indexes(self, params: CollectionRef, call: Call) -> dict[str, Any]:
        records = self.records
        collection = await records.collection(records.tenant(call), params.collection)
        states = await records.store.index_states(collection.indexes)
        return {
            "collection": params.collection,
            "items": [_wire(params.collection, index, states[index]) for index in collection.indexes],
            "max_indexes": records.settings.records.max_indexes,
        }


def _wire(collection: str, index: Index, state: str) -> dict[str, Any]:
    return {"collection": collection, **index.wire(), "state": state}


def _not_found(kind: str, name: str) -> OperationError:
    return OperationError(
        NOT_FOUND_RESOURCE, f"Resource '{kind}' not found: '{name}'", {"resource_type": kind, "resource_id": name}
    )


def _exists(index: Index) -> OperationError:
    name = f"{index.field}:{index.type}"
    return OperationError(
        CONFLICT_ALREADY_EXISTS,
        f"Resource 'index' already exists: '{name}'",
        {"resource_type": "index", "resource_id": name},
    )


def _too_many(exc: QuotaExceeded) -> OperationError:
    return OperationError(
        RATE_LIMIT_QUOTA_EXHAUSTED,
        f"Quota exhausted: this tenant's collections may declare at most {exc.limit} indexes",
        {"metric": "indexes", "current": exc.current, "hard_stop_threshold": exc.limit},
    )
