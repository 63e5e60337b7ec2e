"""A look at a request's JSON-RPC body before the endpoint reads it (docs/eras.md).

Two layers in front of the endpoint need one fact of the body: the era router, which protocol
version `_meta` names when the `MCP-Protocol-Version` header names none or a legacy one, and the
authentication middleware, which request id its refusal of a modern request answers. `HeldBody`
reads the body through the `receive` it is given (the body-limit middleware's, so its size and
pace limits hold) and hands the same messages to the app afterwards, in order.
"""

from __future__ import annotations

import orjson
from starlette.types import Message, Receive

from aql_mcp.jsonrpc.messages import RequestId


class HeldBody:
    """The messages of a request body read ahead of the app, handed to it again by `receive`."""

    __slots__ = ("_held", "_receive")

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._held: list[Message] = []

    async def read(self, *, limit: int | None = None) -> bytes | None:
        """The whole body; None when the client went away or, with `limit`, once more than `limit`
        bytes came (reading stops there: the rest stays for the app, if it is ever called)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self._receive()
            self._held.append(message)
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if limit is not None and size > limit:
                return None
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def receive(self) -> Message:
        if self._held:
            return self._held.pop(0)
        return await self._receive()


def meta_text(body: bytes, key: str) -> str | None:
    """The string a request's `params._meta[key]` holds (the protocol version, 2026-07-28 basic,
    "Per-request protocol fields"); None for another message, an `initialize` (it opens the legacy
    era whatever it carries: 2026-07-28 Versioning, "Backward Compatibility") or a body that is not
    JSON. A body without the key's bytes is not parsed at all."""
    if orjson.dumps(key) not in body:
        return None
    data = _loads(body)
    params = data.get("params") if isinstance(data, dict) and data.get("method") != "initialize" else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    value = meta.get(key) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def request_id(body: bytes) -> RequestId | None:
    """The id of a JSON-RPC request (one with a `method`), if the body is one."""
    data = _loads(body)
    if not isinstance(data, dict) or not isinstance(data.get("method"), str):
        return None
    value = data.get("id")
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def _loads(body: bytes) -> object:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
