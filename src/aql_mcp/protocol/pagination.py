"""Cursor pagination for the list methods (MCP server/utilities/pagination).

Cursors are opaque to the client: the offset into a listing whose order never changes between
pages, base64url-encoded. A cursor this server did not hand out is -32602 (2025-11-25
server/utilities/pagination, "Error Handling"), whatever it holds: not a string, not base64, an
offset with a sign, leading zeros, non-ASCII digits or more digits than any listing needs.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Any, TypeVar

from aql_mcp.exceptions import InvalidParams

T = TypeVar("T")
# Longest cursor this server hands out: "o:" and an offset of up to 18 digits, in base64 (with padding).
MAX_CURSOR_LENGTH = 28
OFFSET = re.compile(r"o:(0|[1-9][0-9]{0,17})")


def paginate(items: Sequence[T], params: dict[str, Any], size: int) -> tuple[Sequence[T], str | None]:
    start = decode_cursor(params.get("cursor"))
    end = start + size
    return items[start:end], encode_cursor(end) if end < len(items) else None


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode("ascii")


def decode_cursor(cursor: Any) -> int:
    if cursor is None:
        return 0
    offset = _read_offset(cursor)
    if offset is None:
        raise InvalidParams(
            "Invalid params: cursor was not issued by this server", data={"field": "cursor", "reason": "format"}
        )
    return offset


def _read_offset(cursor: Any) -> int | None:
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_LENGTH:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        return None
    match = OFFSET.fullmatch(text)
    return int(match.group(1)) if match else None
