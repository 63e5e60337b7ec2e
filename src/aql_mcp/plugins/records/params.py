"""Parameter models and types of the `records` plugin; introspection reads their descriptions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from aql_mcp.plugin import Params, TypeDef
from aql_mcp.plugins.records.indexes import INDEX_FIELD_PATTERN
from aql_mcp.plugins.records.listing import IndexType

SYSTEM_FIELDS = ("id", "collection", "_etag", "created_at", "updated_at")
PRESETS: dict[str, tuple[str, ...] | None] = {"minimal": ("id", "_etag"), "standard": None, "full": None}
NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
ID_PATTERN = r"^rec_[0-9a-f]{20}$"

Collection = Field(pattern=NAME_PATTERN, description="Collection name: lower-case letters, digits, '_' or '-'.")
FieldsParam = Field(
    default=None,
    description="Field selection: a preset (minimal, standard, full) or dot paths such as ['id', 'metadata.priority'].",
)
First = Field(
    default=None, ge=1, description="Page size from the start; larger values are clamped to aql.max_page_size."
)
After = Field(default=None, description="Cursor (pageInfo.endCursor) to continue after; with first.")
Last = Field(default=None, ge=1, description="Page size from the end; larger values are clamped to aql.max_page_size.")
Before = Field(default=None, description="Cursor (pageInfo.startCursor) to go back from; with last.")


class Sort(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    field: str = Field(description="Dot path to sort by, e.g. 'created_at' or 'metadata.priority'.")
    order: Literal["asc", "desc"] = Field(default="asc", description="asc or desc.")


IndexField = Field(
    pattern=INDEX_FIELD_PATTERN,
    description="Data field to index: a dot path of up to 4 plain names, such as 'status' or 'metadata.priority'.",
)
IndexTypeParam: Any = Field(
    default="string", description="JSON type of the values the index holds: string or number (others are scanned)."
)


class IndexDeclaration(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    field: str = IndexField
    type: IndexType = IndexTypeParam


class CreateCollection(Params):
    collection: str = Collection
    description: str = Field(default="", max_length=1000, description="What the collection holds.")
    fields: list[str] | None = Field(
        default=None, description="Allowed top-level record fields; omitted: records are free-form."
    )
    indexes: list[IndexDeclaration] | None = Field(
        default=None,
        max_length=100,
        description="Indexed fields, [{field, type}]: filters and sorts on them read an index (see create_index).",
    )


class IndexRef(Params):
    collection: str = Collection
    field: str = IndexField
    type: IndexType = IndexTypeParam


class CollectionRef(Params):
    collection: str = Collection


class ListCollections(Params):
    first: int | None = First
    after: str | None = After
    last: int | None = Last
    before: str | None = Before


class CreateRecord(Params):
    collection: str = Collection
    data: dict[str, Any] = Field(description="The record's fields (any JSON object; system fields are refused).")
    idempotency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Retry key: the same key with the same parameters returns the first result.",
    )


class RecordRef(Params):
    collection: str = Collection
    id: str = Field(pattern=ID_PATTERN, description="Record id, as returned by create_record.")
    fields: str | list[str] | None = FieldsParam


class ListRecords(Params):
    collection: str = Collection
    filter: dict[str, Any] | None = Field(
        default=None,
        description="Dot path -> value (equality) or {eq|ne|gt|gte|lt|lte|in|contains|exists: operand}.",
    )
    sort: Sort | None = Field(default=None, description="{field, order}; default: creation order.")
    fields: str | list[str] | None = FieldsParam
    first: int | None = First
    after: str | None = After
    last: int | None = Last
    before: str | None = Before


class SearchRecords(ListRecords):
    query: str = Field(min_length=1, description='Free text; words match with OR, "quoted phrases" exactly.')


class UpdateRecord(Params):
    collection: str = Collection
    id: str = Field(pattern=ID_PATTERN, description="Record id.")
    input: dict[str, Any] = Field(
        description="Fields to change: objects merge, arrays and values replace, null removes (MCP-AQL §4.5.1)."
    )
    if_match: str | None = Field(default=None, description="Only update if the record's _etag still equals this.")


class DeleteRecord(Params):
    collection: str = Collection
    id: str = Field(pattern=ID_PATTERN, description="Record id.")
    if_match: str | None = Field(default=None, description="Only delete if the record's _etag still equals this.")


TYPES = (
    TypeDef(
        "Record",
        "object",
        "A JSON record; system fields are read-only",
        {
            "fields": [
                {"name": "id", "type": "string", "required": True, "description": "rec_ + 20 hex digits"},
                {"name": "collection", "type": "string", "required": True},
                {"name": "_etag", "type": "string", "required": True, "description": "Version; pass as if_match"},
                {"name": "created_at", "type": "string", "required": True, "format": "date-time"},
                {"name": "updated_at", "type": "string", "required": True, "format": "date-time"},
            ]
        },
    ),
    TypeDef(
        "FilterOperator",
        "enum",
        "Operators of a filter condition",
        {"values": ["eq", "ne", "gt", "gte", "lt", "lte", "in", "contains", "exists"]},
    ),
    TypeDef("RecordFieldPreset", "enum", "Field selection presets of records", {"values": list(PRESETS)}),
    TypeDef("IndexType", "enum", "JSON types an index holds", {"values": ["string", "number"]}),
)
