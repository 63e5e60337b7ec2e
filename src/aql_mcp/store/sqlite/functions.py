"""SQL functions the SQLite engine registers on each of its connections, for any facet's SQL:
`aql_json_equal(a, b)`, structural equality of two JSON texts with JSON's types kept apart, and
`aql_fold(text)`, Python's `str.lower` (SQLite's own `lower()` folds ASCII only). docs/store.md.
"""

from __future__ import annotations

from typing import Any

import orjson


def json_equal(left: str | bytes | None, right: str | bytes | None) -> bool:
    """`aql_json_equal`: structural equality of two JSON texts with JSON's types kept apart."""
    if not isinstance(left, str | bytes) or not isinstance(right, str | bytes):
        return False
    try:
        return _same(orjson.loads(left), orjson.loads(right))
    except orjson.JSONDecodeError:
        return False


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, bool) or isinstance(right, bool) or left is None or right is None:
        return left is right
    if isinstance(left, dict):
        return (
            isinstance(right, dict) and left.keys() == right.keys() and all(_same(v, right[k]) for k, v in left.items())
        )
    if isinstance(left, list):
        return isinstance(right, list) and len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, str) or isinstance(right, str):
        return left == right if type(left) is type(right) else False
    return bool(left == right)


def fold(text: Any) -> str | None:
    """`aql_fold`: lower-cased text (NULL stays NULL)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")  # `records.data` is JSON stored as a blob
    return text.lower() if isinstance(text, str) else None
