"""The tool result size limit (corporate §14: 10 MB by default; §12.2: truncation is visible).

A result over the limit is cut at the content level, never inside a JSON value: text blocks are
kept while they fit and the last one is shortened, blocks that do not fit are dropped, a closing
text line says what happened, and `structuredContent` carries `truncated: true`.
"""

from __future__ import annotations

from typing import Any

import orjson

NOTICE = "[Result truncated: it exceeded the {limit}-byte result limit of this service.]"


def limit_result(result: dict[str, Any], limit: int) -> dict[str, Any]:
    # Measured by encoding it (orjson, C): cheaper than walking a result in Python, and a result
    # large enough for that to cost is encoded once more for the answer either way.
    try:
        size = len(orjson.dumps(result))
    except TypeError:
        return result  # not JSON: the answer's encoder refuses it as it always has
    if size <= limit:
        return result
    return _truncate(result, limit)


def _truncate(result: dict[str, Any], limit: int) -> dict[str, Any]:
    notice = {"type": "text", "text": NOTICE.format(limit=limit)}
    budget = limit - 1024  # room for the envelope, the notice and the structured flag
    structured = result.get("structuredContent")
    kept_structured: dict[str, Any] = {"truncated": True}
    if isinstance(structured, dict) and len(orjson.dumps(structured)) < budget // 2:
        kept_structured = {**structured, "truncated": True}
        budget -= len(orjson.dumps(structured))
    content: list[dict[str, Any]] = []
    for block in result.get("content", []):
        size = len(orjson.dumps(block))
        if size <= budget:
            content.append(block)
            budget -= size
        elif block.get("type") == "text" and budget > 256:
            content.append({**block, "text": _fit(block["text"], budget - 64)})
            budget = 0
    out: dict[str, Any] = {"content": [*content, notice]}
    if structured is not None:
        out["structuredContent"] = kept_structured
    if result.get("isError"):
        out["isError"] = True
    return out


def _fit(text: str, budget: int) -> str:
    """The longest prefix of `text` whose JSON encoding fits in `budget` bytes."""
    low, high = 0, min(len(text), budget)
    while low < high:
        middle = (low + high + 1) // 2
        if len(orjson.dumps(text[:middle])) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]
