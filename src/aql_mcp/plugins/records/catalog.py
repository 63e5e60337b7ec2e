"""The operations of the `records` plugin as MCP-AQL declares them: category, danger level, side
effects, field presets and examples, in the order introspection lists them; and the plugin object
that registers them, bound to a `Records` (operations.py, which knows nothing of this catalog)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aql_mcp.plugin import Example, Operation, Params, PluginOperations, Returns, Settings, Skill, TrustLevel
from aql_mcp.plugins.records.index_operations import IndexOperations
from aql_mcp.plugins.records.operations import Records
from aql_mcp.plugins.records.params import (
    PRESETS,
    TYPES,
    CollectionRef,
    CreateCollection,
    CreateRecord,
    DeleteRecord,
    IndexRef,
    ListCollections,
    ListRecords,
    RecordRef,
    SearchRecords,
    UpdateRecord,
)
from aql_mcp.plugins.records.tables import bound_records

RECORD = Returns("Record", "object", "A record: its fields plus id, collection, _etag, created_at, updated_at")
INDEX = Returns("Index", "object", "{collection, field, type, state}: state is ready, building, invalid or missing")
RECORD_PAGE = Returns("RecordPage", "object", "{items: [Record], pageInfo: PageInfo}")
COLLECTION_PAGE = Returns("CollectionPage", "object", "{items: [Collection], pageInfo: PageInfo} in name order")


def page_hints(*, default: int, cap: int) -> dict[str, dict[str, Any]]:
    """What introspection says of `first` and `last`: the page size without either, and that a
    larger size is clamped to `cap`. No `maximum`: a ParameterInfo bound reads as "values above are
    invalid", and these are served, clamped (MCP-AQL pagination §5.3; docs/aql.md)."""
    clamped = f"values above {cap} are clamped to {cap}"
    return {
        "first": {"default": default, "description": f"Page size from the start; {clamped}."},
        "last": {"description": f"Page size from the end; {clamped}."},
    }


def catalog(records: Records) -> list[Operation]:
    """The operations of the plugin, in the order introspection lists them."""
    aql = records.settings.aql
    # Agents learn the scan budget (docs/store.md) from the description, before they meet the error.
    budget = f" Filter, sort or search over more than {records.settings.store.listing_scan_rows} records is refused."
    paging = page_hints(default=aql.default_page_size, cap=aql.max_page_size)
    return [
        *_collections(records, paging),
        *_indexes(IndexOperations(records)),
        *_adding_and_getting(records),
        *_querying(records, paging, budget),
        *_changing(records),
        _usage(records),
    ]


def _collections(records: Records, paging: dict[str, dict[str, Any]]) -> list[Operation]:
    return [
        Operation(
            "create_collection",
            "CREATE",
            "Create a named collection of records.",
            records.create_collection,
            CreateCollection,
            Returns("Collection", "object"),
            side_effects="Adds an empty collection; builds the indexes it declares.",
            examples=(
                Example({"operation": "create_collection", "params": {"collection": "notes"}}),
                Example(
                    {
                        "operation": "create_collection",
                        "params": {"collection": "tasks", "indexes": [{"field": "status", "type": "string"}]},
                    }
                ),
            ),
        ),
        Operation(
            "list_collections",
            "READ",
            "List the caller's collections with their record counts, in name order, with cursor pagination.",
            records.list_collections,
            ListCollections,
            COLLECTION_PAGE,
            discovery=True,
            parameter_hints=paging,
        ),
        Operation(
            "delete_collection",
            "DELETE",
            "Delete a collection and every record in it.",
            records.delete_collection,
            CollectionRef,
            Returns("Deletion", "object"),
            danger="dangerous",
            danger_reasons=("Deletes every record of the collection", "Cannot be undone"),
            side_effects="Permanently removes the collection and all its records.",
        ),
    ]


def _indexes(indexes: IndexOperations) -> list[Operation]:
    ref = {"collection": "tasks", "field": "metadata.priority", "type": "number"}
    return [
        Operation(
            "create_index",
            "CREATE",
            "Declare an indexed field of a collection: filters (eq, in, gt, gte, lt, lte) and sorts on it with "
            "operands of its type read an index instead of scanning. Answers once the index is built.",
            indexes.create_index,
            IndexRef,
            INDEX,
            side_effects="Builds an index over the collection's records; other calls go on while it builds.",
            examples=(Example({"operation": "create_index", "params": ref}),),
            idempotent=False,
            cost=10,
        ),
        Operation(
            "list_indexes",
            "READ",
            "List a collection's indexed fields with the state of each index.",
            indexes.list_indexes,
            CollectionRef,
            Returns("IndexList", "object", "{collection, items: [Index], max_indexes}"),
        ),
        Operation(
            "drop_index",
            "DELETE",
            "Forget an indexed field of a collection; its filters and sorts scan again. No record changes.",
            indexes.drop_index,
            IndexRef,
            Returns("Deletion", "object"),
            danger="reversible",
            danger_reasons=("Listings on the field scan until it is indexed again",),
            side_effects="Removes the declaration; the index itself once no collection declares it.",
            examples=(Example({"operation": "drop_index", "params": ref}),),
        ),
    ]


def _adding_and_getting(records: Records) -> list[Operation]:
    new = {"collection": "notes", "data": {"title": "Plan", "metadata": {"priority": "low", "tags": ["draft"]}}}
    return [
        Operation(
            "create_record",
            "CREATE",
            "Create a record (a JSON object) in a collection.",
            records.create_record,
            CreateRecord,
            RECORD,
            side_effects="Adds one record; counts against the tenant's quotas.",
            examples=(Example({"operation": "create_record", "params": {**new, "idempotency_key": "plan-1"}}),),
            idempotent=True,
        ),
        Operation(
            "get_record",
            "READ",
            "Get one record by id.",
            records.get_record,
            RecordRef,
            RECORD,
            field_presets=PRESETS,
            default_preset="full",
        ),
    ]


def _querying(records: Records, paging: dict[str, dict[str, Any]], budget: str) -> list[Operation]:
    return [
        Operation(
            "list_records",
            "READ",
            "List a collection's records with filter, sort, fields and cursor pagination." + budget,
            records.list_records,
            ListRecords,
            RECORD_PAGE,
            field_presets=PRESETS,
            default_preset="standard",
            parameter_hints=paging,
            examples=(
                Example(
                    {
                        "operation": "list_records",
                        "params": {
                            "collection": "notes",
                            "filter": {"metadata.priority": "high"},
                            "sort": {"field": "created_at", "order": "desc"},
                            "fields": ["id", "title"],
                            "first": 10,
                        },
                    }
                ),
            ),
        ),
        Operation(
            "search_records",
            "READ",
            "Search a collection's records by free text (OR over words)." + budget,
            records.search_records,
            SearchRecords,
            RECORD_PAGE,
            field_presets=PRESETS,
            default_preset="minimal",
            parameter_hints=paging,
            examples=(Example({"operation": "search_records", "params": {"collection": "notes", "query": "plan"}}),),
        ),
    ]


def _changing(records: Records) -> list[Operation]:
    return [
        Operation(
            "update_record",
            "UPDATE",
            "Update a record: `input` deep-merges into it; `if_match` guards against lost updates.",
            records.update_record,
            UpdateRecord,
            RECORD,
            side_effects="Changes the record and its _etag.",
            examples=(
                Example(
                    {
                        "operation": "update_record",
                        "params": {
                            "collection": "notes",
                            "id": "rec_0123456789abcdef0123",
                            "input": {"metadata": {"priority": "high", "tags": None}},
                        },
                    }
                ),
            ),
        ),
        Operation(
            "delete_record",
            "DELETE",
            "Delete one record.",
            records.delete_record,
            DeleteRecord,
            Returns("Deletion", "object"),
            danger_reasons=("The record cannot be recovered",),
            side_effects="Permanently removes one record.",
        ),
    ]


def _usage(records: Records) -> Operation:
    return Operation(
        "get_usage",
        "READ",
        "The caller's record count and bytes against its quotas.",
        records.get_usage,
        Params,
        Returns("Usage", "object"),
    )


@dataclass
class RecordsPlugin:
    """Registers the records operations (trust level `community_reviewed`, a built-in); its
    housekeeping drops idempotency keys past `records.idempotency_retention_seconds` and builds or
    drops indexes to match what collections declare."""

    name: str = "records"
    trust: TrustLevel = "community_reviewed"
    records: Records | None = field(default=None, repr=False)

    def register_operations(self, operations: PluginOperations) -> None:
        self.records = Records(operations.settings, bound_records(operations))
        for type_def in TYPES:
            operations.add_type(type_def)
        for operation in catalog(self.records):
            operations.add(operation)
        # The plugin's usage guide, served as a skill (docs/discovery.md, "Skills").
        operations.add_skill(Skill.from_package("aql_mcp.plugins.records", "skill"))

    async def housekeeping(self, now: float) -> None:
        if self.records is not None:
            retention = self.records.settings.records.idempotency_retention_seconds
            await self.records.store.purge_idempotency(now - retention)
            # An interrupted or failed build, or a drop racing a declaration, is repaired here.
            await self.records.store.reconcile_indexes()


def plugin(settings: Settings | None = None) -> RecordsPlugin:
    """A plugin of its own for each service built (its housekeeping purges that service's store)."""
    return RecordsPlugin()
