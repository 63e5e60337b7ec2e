"""The built-in `records` plugin: an agent workspace store of JSON records in named collections.

Records belong to the tenant named by a token claim (`records.tenant_claim`, `sub` by default);
every store call carries the tenant, so guessing another tenant's ids finds nothing. A record
on the wire is its own fields plus `id`, `collection`, `_etag`, `created_at` and `updated_at`,
which callers cannot set. Updates deep-merge `input` (MCP-AQL §4.5) and honour `if_match`.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass, replace
from typing import Any

import orjson

from aql_mcp.plugin import (
    CONFLICT_ALREADY_EXISTS,
    CONFLICT_VERSION_MISMATCH,
    NOT_FOUND_RESOURCE,
    PERMISSION_DENIED,
    RATE_LIMIT_QUOTA_EXHAUSTED,
    VALIDATION_PAYLOAD_TOO_LARGE,
    VALIDATION_UNKNOWN_FIELD,
    Call,
    OperationError,
    Outcome,
    Page,
    Params,
    Principal,
    Settings,
    deep_merge,
    tenant_key,
)
from aql_mcp.plugins.records.index_operations import build_declared, declarations, listing_warnings, timed_out
from aql_mcp.plugins.records.params import (
    SYSTEM_FIELDS,
    CollectionRef,
    CreateCollection,
    CreateRecord,
    DeleteRecord,
    ListCollections,
    ListRecords,
    RecordRef,
    SearchRecords,
    UpdateRecord,
)
from aql_mcp.plugins.records.query import (
    decode_name_cursor,
    encode_cursor,
    encode_name_cursor,
    listing,
    query_identity,
    window,
)
from aql_mcp.plugins.records.store import (
    AlreadyExists,
    Idempotency,
    KeyReused,
    ListingTimedOut,
    Missing,
    NewRecord,
    Quota,
    QuotaExceeded,
    RecordStore,
    ScanTooLarge,
    StoredCollection,
    StoredRecord,
    VersionMismatch,
    timestamp,
)


@dataclass
class Records:
    """The operations, over one record store, with the plugin's quotas and tenant claim."""

    settings: Settings
    store: RecordStore

    @property
    def quota(self) -> Quota:
        return Quota(self.settings.records.max_records, self.settings.records.max_bytes)

    def tenant(self, call: Call) -> str:
        return self.tenant_of(call.principal)

    def tenant_of(self, principal: Principal | None) -> str:
        """The records tenant `principal` belongs to (`records.tenant_claim`, read by `tenant_key`: the
        tenant its issuer maps, when one does); PERMISSION_DENIED without one."""
        claim = self.settings.records.tenant_claim
        value = None if principal is None else tenant_key(principal, claim)
        if value is None:
            raise OperationError(
                PERMISSION_DENIED, f"Permission denied: 'the token has no {claim} claim'", {"reason": "no tenant"}
            )
        return value

    async def create_collection(self, params: CreateCollection, call: Call) -> Any:
        fields = tuple(params.fields) if params.fields is not None else None
        if fields is not None:
            _check_fields(fields, None, "fields")
        indexes = declarations(params.indexes or [], fields)
        try:
            stored = await self.store.create_collection(
                self.tenant(call),
                params.collection,
                params.description,
                fields,
                now(),
                indexes=indexes,
                max_indexes=self.settings.records.max_indexes,
            )
        except AlreadyExists:
            raise _exists("collection", params.collection) from None
        except QuotaExceeded as exc:
            raise _quota(exc) from None
        warnings = await build_declared(self.store, indexes)
        return Outcome(collection_wire(stored), tuple(warnings)) if warnings else collection_wire(stored)

    async def list_collections(self, params: ListCollections, call: Call) -> Page:
        aql = self.settings.aql
        span = window(
            params.first, params.after, params.last, params.before, default=aql.default_page_size, cap=aql.max_page_size
        )
        param = "after" if span.forward else "before"
        cursor = decode_name_cursor(span.cursor, param) if span.cursor is not None else None
        found = await self.store.list_collections(
            self.tenant(call), size=span.size, forward=span.forward, cursor=cursor
        )
        return Page(
            items=[collection_wire(c) for c in found.items],
            cursors=[encode_name_cursor(c.name) for c in found.items],
            has_next=found.has_next,
            has_previous=found.has_previous,
            total_count=found.total,
        )

    async def delete_collection(self, params: CollectionRef, call: Call) -> dict[str, Any]:
        try:
            count = await self.store.delete_collection(self.tenant(call), params.collection)
        except Missing:
            raise _not_found("collection", params.collection) from None
        return {"name": params.collection, "deleted": True, "deleted_records": count}

    async def create_record(self, params: CreateRecord, call: Call) -> Any:
        tenant = self.tenant(call)
        collection = await self.collection(tenant, params.collection)
        _check_fields(tuple(params.data), collection.fields, "data")
        record = NewRecord(params.collection, new_id(), params.data, new_etag(), now())
        key = None
        if params.idempotency_key is not None:
            body = {"collection": params.collection, "data": params.data}
            key = Idempotency(
                params.idempotency_key, hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()
            )
        try:
            stored, replayed = await self.store.create_record(tenant, record, self.quota, key)
        except KeyReused:
            raise OperationError(
                CONFLICT_ALREADY_EXISTS,
                "The idempotency key was already used with other parameters",
                {"resource_type": "idempotency_key", "param_name": "idempotency_key"},
            ) from None
        except QuotaExceeded as exc:
            raise _quota(exc) from None
        except Missing:
            raise _not_found("collection", params.collection) from None
        wire = record_wire(stored)
        if replayed:
            return Outcome(
                wire,
                (
                    {
                        "code": "IDEMPOTENT_REPLAY",
                        "message": "Returned the first result for this idempotency key",
                        "severity": "low",
                    },
                ),
            )
        return wire

    async def get_record(self, params: RecordRef, call: Call) -> dict[str, Any]:
        stored = await self.store.get_record(self.tenant(call), params.collection, params.id)
        if stored is None:
            raise _not_found("record", params.id)
        return record_wire(stored)

    async def list_records(self, params: ListRecords, call: Call) -> Page | Outcome:
        return await self._page(params, call, None)

    async def search_records(self, params: SearchRecords, call: Call) -> Page | Outcome:
        return await self._page(params, call, params.query)

    async def _page(self, params: ListRecords, call: Call, query: str | None) -> Page | Outcome:
        aql = self.settings.aql
        span = window(
            params.first, params.after, params.last, params.before, default=aql.default_page_size, cap=aql.max_page_size
        )
        field, descending = (params.sort.field, params.sort.order == "desc") if params.sort else (None, False)
        identity = query_identity(params.collection, params.filter, query, field, descending)
        tenant = self.tenant(call)
        collection = await self.collection(tenant, params.collection)
        wanted = listing(
            span, spec=params.filter, query=query, sort_field=field, descending=descending, identity=identity
        )
        wanted = replace(wanted, indexes=frozenset(collection.indexes))
        try:
            found = await self.store.list_records(tenant, params.collection, wanted)
        except ScanTooLarge as exc:
            raise _scan(exc) from None
        except ListingTimedOut as exc:
            raise timed_out(exc) from None
        page = Page(
            items=[record_wire(record) for record, _ in found.items],
            cursors=[encode_cursor(key, identity) for _, key in found.items],
            has_next=found.has_next,
            has_previous=found.has_previous,
            total_count=found.total,
        )
        warnings = listing_warnings(wanted)
        return Outcome(page, warnings) if warnings else page

    async def update_record(self, params: UpdateRecord, call: Call) -> dict[str, Any]:
        tenant = self.tenant(call)
        collection = await self.collection(tenant, params.collection)
        _check_fields(tuple(params.input), collection.fields, "input")
        try:
            stored = await self.store.update_record(
                tenant,
                params.collection,
                params.id,
                lambda data: deep_merge(data, params.input),
                if_match=params.if_match,
                etag=new_etag(),
                now=now(),
                quota=self.quota,
            )
        except Missing:
            raise _not_found("record", params.id) from None
        except VersionMismatch as exc:
            raise _version(params.id, params.if_match, exc.current) from None
        except QuotaExceeded as exc:
            raise _quota(exc) from None
        return record_wire(stored)

    async def delete_record(self, params: DeleteRecord, call: Call) -> dict[str, Any]:
        try:
            await self.store.delete_record(self.tenant(call), params.collection, params.id, if_match=params.if_match)
        except Missing:
            raise _not_found("record", params.id) from None
        except VersionMismatch as exc:
            raise _version(params.id, params.if_match, exc.current) from None
        return {"id": params.id, "collection": params.collection, "deleted": True}

    async def get_usage(self, params: Params, call: Call) -> dict[str, Any]:
        records, size = await self.store.usage(self.tenant(call))
        quota = self.quota
        return {"records": records, "bytes": size, "max_records": quota.max_records, "max_bytes": quota.max_bytes}

    async def collection(self, tenant: str, name: str) -> StoredCollection:
        found = await self.store.get_collection(tenant, name)
        if found is None:
            raise _not_found("collection", name)
        return found


def record_wire(record: StoredRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "collection": record.collection,
        **record.data,
        "_etag": record.etag,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def collection_wire(collection: StoredCollection) -> dict[str, Any]:
    return {
        "name": collection.name,
        "description": collection.description,
        "fields": list(collection.fields) if collection.fields is not None else None,
        "record_count": collection.record_count,
        "indexes": [index.wire() for index in collection.indexes],
        "created_at": collection.created_at,
    }


def _check_fields(names: tuple[str, ...], allowed: tuple[str, ...] | None, where: str) -> None:
    """System fields are never set by callers; a collection with declared fields takes only those."""
    unknown = [
        n for n in names if n in SYSTEM_FIELDS or n.startswith("_") or (allowed is not None and n not in allowed)
    ]
    if unknown:
        raise OperationError(
            VALIDATION_UNKNOWN_FIELD,
            f"Unknown field(s) in '{where}': {', '.join(unknown)}",
            {
                "param_name": where,
                "unknown_fields": unknown,
                "valid_fields": list(allowed) if allowed else None,
                "reserved_fields": list(SYSTEM_FIELDS),
            },
        )


def _not_found(kind: str, name: str) -> OperationError:
    return OperationError(
        NOT_FOUND_RESOURCE, f"Resource '{kind}' not found: '{name}'", {"resource_type": kind, "resource_id": name}
    )


def _exists(kind: str, name: str) -> OperationError:
    return OperationError(
        CONFLICT_ALREADY_EXISTS,
        f"Resource '{kind}' already exists: '{name}'",
        {"resource_type": kind, "resource_id": name},
    )


def _version(record_id: str, expected: str | None, current: str) -> OperationError:
    return OperationError(
        CONFLICT_VERSION_MISMATCH,
        f"Record '{record_id}' was changed since you read it; get it again and retry",
        {"resource_id": record_id, "expected_etag": expected, "current_etag": current},
    )


def _quota(exc: QuotaExceeded) -> OperationError:
    return OperationError(
        RATE_LIMIT_QUOTA_EXHAUSTED,
        f"Quota exhausted: this tenant may store at most {exc.limit} {exc.metric}",
        {"metric": exc.metric, "current": exc.current, "hard_stop_threshold": exc.limit},
    )


def _scan(exc: ScanTooLarge) -> OperationError:
    """MCP-AQL error codes §4.7's limit refusal: narrowing the listing will not help, a smaller
    collection will (docs/store.md, "Scan budget"). A page cut short instead could not say where to
    go on: pagination §3.1 makes a cursor the first or last returned item's."""
    return OperationError(
        VALIDATION_PAYLOAD_TOO_LARGE,
        f"Payload exceeds scan_rows limit of {exc.limit}: a filtered, searched or sorted listing "
        f"of this collection would examine {exc.rows} records; list it unsorted and unfiltered",
        {"limit_type": "scan_rows", "limit_value": exc.limit, "actual_value": exc.rows, "unit": "elements"},
    )


def now() -> str:
    return timestamp(time.time())


def new_id() -> str:
    return "rec_" + secrets.token_hex(10)


def new_etag() -> str:
    return f'W/"{secrets.token_hex(8)}"'
