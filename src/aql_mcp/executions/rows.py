"""The rows of an import payload: NDJSON (one JSON object a line) or CSV (a header row naming the
fields, then one record a row, every value a string). Each row is checked on its own; a bad row is
rejected with its number (1-based, counting data rows: the CSV header is not one) and a reason,
and the import goes on with the next (docs/executions.md, "Imports"). A row meets the limits of
`aql.*` that a record created by `create_record` meets."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from aql_mcp.operations.payload import Limits, check_payload
from aql_mcp.operations.results import OperationError
from aql_mcp.plugins.records_params import SYSTEM_FIELDS

Format = Literal["ndjson", "csv"]
# The MIME types an import accepts, and the format each names.
FORMATS: dict[str, Format] = {
    "application/x-ndjson": "ndjson",
    "application/jsonl": "ndjson",
    "text/csv": "csv",
}


class PayloadError(ValueError):
    """The payload as a whole cannot be read (not UTF-8, a CSV without a header)."""


@dataclass(frozen=True, slots=True)
class Row:
    number: int
    data: dict[str, Any] | None
    reason: str | None = None


class Rows:
    """The rows of one payload, split at once, each parsed and checked when its batch asks for it."""

    def __init__(self, payload: bytes, fmt: Format, allowed: Sequence[str] | None, limits: Limits) -> None:
        self._limits = limits
        self._allowed = None if allowed is None else frozenset(allowed)
        self._header: list[str] = []
        if fmt == "ndjson":
            lines = payload.split(b"\n")
            if lines and not lines[-1].strip():
                lines.pop()
            self._raw: list[Any] = lines
        else:
            self._raw = _csv_rows(payload)
            if not self._raw:
                raise PayloadError("a CSV payload needs a header row naming the fields")
            self._header = [str(name) for name in self._raw.pop(0)]
        self._fmt = fmt

    def __len__(self) -> int:
        return len(self._raw)

    def batch(self, start: int, size: int) -> list[Row]:
        """Rows `start` to `start + size` (0-based positions; the rows carry 1-based numbers)."""
        return [self._row(start + i + 1, raw) for i, raw in enumerate(self._raw[start : start + size])]

    def _row(self, number: int, raw: Any) -> Row:
        if self._fmt == "ndjson":
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError:
                return Row(number, None, "not valid JSON")
            if not isinstance(data, dict):
                return Row(number, None, "not a JSON object")
        else:
            if len(raw) != len(self._header):
                return Row(number, None, f"{len(raw)} values for {len(self._header)} header fields")
            data = dict(zip(self._header, raw, strict=True))
        if not data:
            return Row(number, None, "no fields")
        reserved = sorted(name for name in data if name in SYSTEM_FIELDS or name.startswith("_"))
        if reserved:
            return Row(number, None, f"reserved field(s): {', '.join(reserved)[:200]}")
        if self._allowed is not None:
            unknown = sorted(name for name in data if name not in self._allowed)
            if unknown:
                return Row(number, None, f"field(s) not declared by the collection: {', '.join(unknown)[:200]}")
        try:
            # The limits a record created one at a time meets (MCP-AQL §4.7.1, §4.7.5): clean text
            # (no NUL, which PostgreSQL cannot store), string length, array elements, nesting.
            check_payload(data, self._limits)
        except OperationError as exc:
            return Row(number, None, exc.message)
        return Row(number, data)


def _csv_rows(payload: bytes) -> list[list[str]]:
    try:
        text = payload.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PayloadError("a CSV payload must be UTF-8") from None
    try:
        return [row for row in csv.reader(io.StringIO(text, newline="")) if row]
    except csv.Error:
        raise PayloadError("the CSV payload cannot be parsed") from None
