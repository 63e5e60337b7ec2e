"""The requests queued behind the one a connection is answering (HTTP/1.1 pipelining).

uvicorn keeps them in a `deque`, which allocates a 0.7 KiB block when it is made; almost every
connection never queues anything, and an open stream holds its connection for hours
(docs/connections.md, "What an open stream costs"). A list does the same with the operations
uvicorn's `HttpToolsProtocol` uses, and costs 56 bytes while empty.
"""

from __future__ import annotations

from typing import Any


class Pipeline(list[Any]):
    """uvicorn's pipeline queue: `appendleft` the newest, `pop` the oldest, `[0]` is the newest."""

    __slots__ = ()

    def appendleft(self, item: Any) -> None:
        # At most `MAX_QUEUED_REQUESTS` items (connection_limits.py): inserting at the front is cheap.
        self.insert(0, item)
