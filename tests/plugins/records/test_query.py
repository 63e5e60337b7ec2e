"""The records cursors: one codec for record and collection cursors, one refusal for anything else
(MCP-AQL pagination §6.2, opaque URL-safe cursors; docs/input.md, "Cursors")."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from aql_mcp.operations.results import OperationError
from aql_mcp.plugins.records.listing import Key, key_from_json
from aql_mcp.plugins.records.query import decode_cursor, decode_name_cursor, encode_cursor, encode_name_cursor

KEY = key_from_json([2, 1.5, "", 3])
NOT_CURSORS = [None, 0, 1.5, True, [], {}, {"n": "notes"}, b"bm90ZXM", "", "!!!", "curseur-é", "A" * 10_001]


def _key() -> Key:
    assert KEY is not None
    return KEY


def _refusal(excinfo: pytest.ExceptionInfo[OperationError], param: str) -> None:
    assert excinfo.value.code == "VALIDATION_INVALID_TYPE"
    assert (excinfo.value.details or {}).get("param_name") == param


def test_an_issued_record_cursor_decodes_to_its_key_with_the_same_query() -> None:
    assert decode_cursor(encode_cursor(_key(), "q1"), "q1", "after") == _key()


def test_an_issued_collection_cursor_decodes_to_its_name() -> None:
    assert decode_name_cursor(encode_name_cursor("notes"), "before") == "notes"


def test_cursors_are_unpadded_base64url() -> None:
    for cursor in (encode_cursor(_key(), "q1"), encode_name_cursor("notes")):
        assert "=" not in cursor
        assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@pytest.mark.parametrize("value", NOT_CURSORS)
def test_anything_not_issued_is_refused_the_same_way_by_both_decoders(value: Any) -> None:
    with pytest.raises(OperationError) as records:
        decode_cursor(value, "q1", "after")
    with pytest.raises(OperationError) as names:
        decode_name_cursor(value, "after")
    _refusal(records, "after")
    _refusal(names, "after")
    assert records.value.envelope() == names.value.envelope()


def test_a_record_cursor_is_not_a_collection_cursor_and_back() -> None:
    with pytest.raises(OperationError) as names:
        decode_name_cursor(encode_cursor(_key(), "q1"), "after")
    with pytest.raises(OperationError) as records:
        decode_cursor(encode_name_cursor("notes"), "q1", "before")
    _refusal(names, "after")
    _refusal(records, "before")


@pytest.mark.parametrize("content", [{"n": "notes"}, {"n": "notes", "s": "x"}, {"n": 7, "s": "collections:name:asc"}])
def test_a_collection_cursor_with_a_forged_shape_is_refused(content: dict[str, Any]) -> None:
    cursor = base64.urlsafe_b64encode(orjson.dumps(content)).decode().rstrip("=")
    with pytest.raises(OperationError) as refused:
        decode_name_cursor(cursor, "after")
    _refusal(refused, "after")


def test_a_collection_cursor_with_extra_members_is_refused() -> None:
    content = {"n": "notes", "s": "collections:name:asc", "x": 1}
    cursor = base64.urlsafe_b64encode(orjson.dumps(content)).decode().rstrip("=")
    with pytest.raises(OperationError):
        decode_name_cursor(cursor, "after")
