"""The rows of an import payload: NDJSON (one JSON object a line) or CSV (a header row naming the
fields, then one record a row, every value a string). Each row is checked on its own; a bad row is
rejected with its number (1-based, counting data rows: the CSV header is not one) and a reason,
and the import goes on with the next (docs/executions.md, "Imports"). A row meets the limits of
`aql.*` that a record created by `create_record` meets."""

from __future__ import annotations

import csv
import io
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from aql_mcp.plugin import Limits, OperationError, check_payload
from aql_mcp.plugins.records.params import SYSTEM_FIELDS

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
    """The rows of one payload, indexed at once and parsed a batch at a time.

    Only each row's offsets are kept for the whole import (two 8-byte integers a row, in arrays):
    a batch decodes its own slice of the payload when it asks for it. Splitting the whole payload
    into Python objects up front would hold tens of times the payload's size for the import's
    whole life (a 16 MiB CSV of short rows, some 850 MiB)."""

    def __init__(self, payload: bytes, fmt: Format, allowed: Sequence[str] | None, limits: Limits) -> None:
        self._limits = limits
        self._allowed = None if allowed is None else frozenset(allowed)
        self._header: list[str] = []
        self._fmt = fmt
        self._starts = array("Q")
        self._ends = array("Q")
        # CSV rows that could not be parsed (a field over the size limit), by position: their reason.
        self._broken: dict[int, str] = {}
        if fmt == "ndjson":
            self._bytes = payload
            self._text = ""
            self._index_lines(payload)
        else:
            self._bytes = b""
            self._text = _csv_text(payload)
            # One value longer than a record may hold rejects its row only, not the whole import
            # (the csv module's own limit, 128 Ki characters by default, would stop the reader).
            csv.field_size_limit(max(limits.max_string_length, 1))
            self._index_csv()

    def __len__(self) -> int:
        return len(self._starts)

    def batch(self, start: int, size: int) -> list[Row]:
        """Rows `start` to `start + size` (0-based positions; the rows carry 1-based numbers)."""
        positions = range(start, min(start + size, len(self._starts)))
        if self._fmt == "ndjson":
            return [self._row(i + 1, self._bytes[self._starts[i] : self._ends[i]]) for i in positions]
        return [self._csv_row(i) for i in positions]

    def _index_lines(self, payload: bytes) -> None:
        at, size = 0, len(payload)
        while at < size:
            end = payload.find(b"\n", at)
            end = size if end < 0 else end
            self._starts.append(at)
            self._ends.append(end)
            at = end + 1
        if self._starts and not payload.endswith(b"\n") and not payload[self._starts[-1] :].strip():
            # A last line of blanks only is no row (as a trailing newline is none).
            self._starts.pop()
            self._ends.pop()

    def _index_csv(self) -> None:
        at = 0

        def lines() -> Iterator[str]:
            nonlocal at
            for line in io.StringIO(self._text, newline=""):
                at += len(line)
                yield line

        reader = csv.reader(lines())
        header: list[str] | None = None
        while True:
            begin = at
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                if header is None:
                    raise PayloadError("the CSV payload's header row cannot be parsed") from None
                self._broken[len(self._starts)] = _csv_reason(exc)
                self._starts.append(begin)
                self._ends.append(at)
                continue
            if not row:
                continue
            if header is None:
                header = row
                continue
            self._starts.append(begin)
            self._ends.append(at)
        if header is None:
            raise PayloadError("a CSV payload needs a header row naming the fields")
        self._header = [str(name) for name in header]

    def _csv_row(self, position: int) -> Row:
        number = position + 1
        broken = self._broken.get(position)
        if broken is not None:
            return Row(number, None, broken)
        segment = self._text[self._starts[position] : self._ends[position]]
        try:
            values = next(csv.reader(io.StringIO(segment, newline="")))
        except (csv.Error, StopIteration):
            return Row(number, None, "not a valid CSV row")
        return self._row(number, values)

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


def _csv_text(payload: bytes) -> str:
    try:
        return payload.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise PayloadError("a CSV payload must be UTF-8") from None


def _csv_reason(exc: csv.Error) -> str:
    if "field larger than field limit" in str(exc):
        return "a value longer than aql.max_string_length"
    return "not a valid CSV row"
