"""Cursor pagination for the list methods (MCP server/utilities/pagination).

Cursors are opaque to the client: the offset into a listing whose order never changes between
pages, base64url-encoded. A cursor this server did not hand out is -32602.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any, TypeVar

from aql_mcp.exceptions import InvalidParams

T = TypeVar("T")


def paginate(items: Sequence[T], params: dict[str, Any], size: int) -> tuple[Sequence[T], str | None]:
    start = decode_cursor(params.get("cursor"))
    end = start + size
    return items[start:end], encode_cursor(end) if end < len(items) else None


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode("ascii")


def decode_cursor(cursor: Any) -> int:
    if cursor is None:
        return 0
    try:
        text = base64.urlsafe_b64decode(str(cursor).encode("ascii")).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        raise InvalidParams(data={"field": "cursor", "reason": "format"}) from None
    prefix, _, offset = text.partition(":")
    if prefix != "o" or not offset.isdigit():
        raise InvalidParams(data={"field": "cursor", "reason": "format"})
    return int(offset)
