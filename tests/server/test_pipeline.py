"""src/aql_mcp/server/pipeline.py: the queue of pipelined requests, in the order uvicorn's deque keeps them."""

from __future__ import annotations

from collections import deque

from aql_mcp.server.pipeline import Pipeline


def test_it_queues_as_uvicorns_deque_does() -> None:
    """uvicorn queues with `appendleft`, takes the next with `pop`; connection.py reads `[0]` as the newest."""
    ours, theirs = Pipeline(), deque[str]()
    for item in ("first", "second", "third"):
        ours.appendleft(item)
        theirs.appendleft(item)
    assert ours[0] == theirs[0] == "third"
    assert len(ours) == len(theirs) == 3
    assert [ours.pop() for _ in range(3)] == [theirs.pop() for _ in range(3)] == ["first", "second", "third"]
    assert not ours
