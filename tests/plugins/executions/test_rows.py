"""The rows of an import payload: each checked on its own, numbered from 1 (docs/executions.md)."""

from __future__ import annotations

import pytest

from aql_mcp.operations.payload import Limits
from aql_mcp.plugins.executions.rows import PayloadError, Rows

LIMITS = Limits(max_string_length=100, max_array_elements=3, max_nesting_depth=3)


def test_ndjson_rows_are_numbered_from_one_and_a_bad_row_does_not_stop_the_others() -> None:
    payload = b'{"a": 1}\nnot json\n[1]\n{}\n{"_etag": "x", "b": 2}\n{"id": "forged"}\n{"a": 2}\n'
    found = Rows(payload, "ndjson", None, LIMITS)
    assert len(found) == 7
    batch = found.batch(0, 10)
    assert [row.number for row in batch] == [1, 2, 3, 4, 5, 6, 7]
    assert [row.data for row in batch if row.data] == [{"a": 1}, {"a": 2}]
    reasons = {row.number: row.reason for row in batch if row.data is None}
    assert set(reasons) == {2, 3, 4, 5, 6}
    assert all(reasons.values())


def test_batches_cover_the_rows_once_each_in_order() -> None:
    found = Rows(b"".join(b'{"n": %d}\n' % i for i in range(10)), "ndjson", None, LIMITS)
    seen = [row.data["n"] for start in range(0, 10, 3) for row in found.batch(start, 3) if row.data]
    assert seen == list(range(10))
    assert found.batch(9, 3)[0].number == 10


def test_a_collection_with_declared_fields_rejects_rows_with_others() -> None:
    found = Rows(b'{"name": "a"}\n{"name": "b", "age": 3}\n', "ndjson", ("name",), LIMITS)
    first, second = found.batch(0, 2)
    assert first.data == {"name": "a"}
    assert second.data is None
    assert "age" in (second.reason or "")


def test_csv_rows_take_their_fields_from_the_header_and_count_data_rows_only() -> None:
    payload = b'name,city\nAda,London\n"Grace, H",Arlington\nshort\n'
    rows = Rows(payload, "csv", None, LIMITS).batch(0, 5)
    assert [row.data for row in rows[:2]] == [
        {"name": "Ada", "city": "London"},
        {"name": "Grace, H", "city": "Arlington"},
    ]
    assert (rows[2].number, rows[2].data) == (3, None)


@pytest.mark.parametrize("payload", [b"", b"\xff\xfe not utf-8"])
def test_a_csv_payload_without_a_header_or_not_utf8_is_refused_as_a_whole(payload: bytes) -> None:
    with pytest.raises(PayloadError):
        Rows(payload, "csv", None, LIMITS)


def test_a_row_over_the_aql_limits_or_with_unclean_text_is_rejected_not_stored() -> None:
    lines = [
        b'{"a": {"b": {"c": {"d": 1}}}}',
        b'{"list": [1, 2, 3, 4]}',
        b'{"long": "' + b"x" * 101 + b'"}',
        rb'{"nul": "a\u0000b"}',
        b'{"fine": [1, 2, 3]}',
    ]
    rows = Rows(b"\n".join(lines), "ndjson", None, LIMITS).batch(0, 10)
    assert [row.data for row in rows] == [None, None, None, None, {"fine": [1, 2, 3]}]
    assert all(row.reason for row in rows[:4])


def test_a_csv_value_longer_than_the_string_limit_rejects_its_row_only() -> None:
    """Past the csv module's own field limit (128 Ki characters) the reader used to stop, and the
    whole import with it: now the field limit is aql.max_string_length and the row alone is out."""
    huge = "x" * 200_000
    payload = f'name,note\nAda,short\nBob,{huge}\n"Grace, H","two\nlines"\nEve,last\n'.encode()
    rows = Rows(payload, "csv", None, Limits(1000, 3, 3)).batch(0, 10)
    assert [row.number for row in rows] == [1, 2, 3, 4]
    assert [row.data for row in rows if row.data] == [
        {"name": "Ada", "note": "short"},
        {"name": "Grace, H", "note": "two\nlines"},
        {"name": "Eve", "note": "last"},
    ]
    assert rows[1].data is None
    assert rows[1].reason


def test_ndjson_rows_are_read_a_batch_at_a_time_with_blank_last_lines_ignored() -> None:
    found = Rows(b'{"n": 1}\r\n\n{"n": 2}\n  ', "ndjson", None, LIMITS)
    assert len(found) == 3
    first, blank, second = found.batch(0, 5)
    assert (first.data, blank.data, second.data) == ({"n": 1}, None, {"n": 2})
    assert found.batch(2, 5) == [second]
