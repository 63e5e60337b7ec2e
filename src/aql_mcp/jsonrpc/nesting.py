"""How deeply a parsed JSON value nests, measured without recursion.

orjson reads JSON nested up to 1024 levels but writes at most 254: a value a caller sent 255 levels
deep parsed, and failed only when something wrote it back (the session store, an answer, a log
line), as a 500. Every message is therefore measured once, as it is parsed (`messages.MAX_DEPTH`),
and the handshake measures what it keeps (`protocol/lifecycle.py`). The walk is a loop over a stack,
so no depth can exhaust Python's own recursion limit either.
"""

from __future__ import annotations

from typing import Any


def exceeds_depth(value: Any, limit: int) -> bool:
    """Whether `value` nests deeper than `limit` levels, an object or array counting as one level
    (a scalar is level 0, `{}` is 1, `{"a": []}` is 2). Stops at the first container past `limit`."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict):
            children: Any = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def may_exceed_depth(body: bytes, limit: int) -> bool:
    """A cheap test on the raw body: JSON cannot nest deeper than it has opening brackets, so a
    body with at most `limit` of them (most messages) needs no walk at all."""
    return body.count(b"{") + body.count(b"[") > limit
