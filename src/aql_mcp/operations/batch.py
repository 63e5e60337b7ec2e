"""Batch operations (MCP-AQL operations §7, the MCP-AQL batch-operation schema).

Items run in order, each with its own result; a failed item does not stop the rest. An item that
answers `CONFIRMATION_REQUIRED` halts the batch (§7.5.2): it is reported in `halted_at`, the items
after it in `pending_operations` for continuation. Batch-level errors (not an array, empty, over
the size cap) are `success: false` with only `code` and `message`, as the schema requires.

An item's result keeps its `warnings` (an idempotent replay, a truncated page): the batch schema's
copy of the result shape omits them, but an item's result is an OperationResult, which carries
warnings (the MCP-AQL operation-result schema, MCP-AQL warnings), and dropping them would hide
from the caller what it needs to know about that item (docs/aql.md).

An item that asks the client (a confirmation by elicitation) in the modern era ends the attempt
with `input_required`; the items before it are remembered in the request state, not run again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from aql_mcp.operations.cost import cost_of, pay, rate_refusal
from aql_mcp.operations.models import Call
from aql_mcp.operations.results import (
    CONFIRMATION_REQUIRED,
    VALIDATION_INVALID_TYPE,
    VALIDATION_PAYLOAD_TOO_LARGE,
    VALIDATION_TRUNCATED_WARNING,
    Envelope,
    failure,
    success,
    warning,
    wire_size,
)
from aql_mcp.operations.router import IDENTIFIERS, Router

# The most of one finished item's result a request state keeps (the state must fit in a retry).
MEMO_ITEM_BYTES = 4096


async def run_batch(router: Router, family: str | None, arguments: dict[str, Any], call: Call, *, cap: int) -> Envelope:
    items = arguments.get("operations")
    refusal = _refusal(arguments, items, cap)
    if refusal is not None:
        return refusal
    assert isinstance(items, list)
    memo = call.ctx.memo
    # Items an earlier round ran answer from the memo: they were paid for then.
    pay(
        (cost_of(router.registry.get, item) for index, item in enumerate(items) if f"batch.{index}" not in memo),
        "this batch",
        rate_refusal(router.audit, call, "batch"),
    )
    results: list[dict[str, Any]] = []
    succeeded = failed = 0
    in_batch = replace(call, batch=True)
    for index, item in enumerate(items):
        name = _name(item)
        # A modern retry after `input_required` runs the batch again: items that succeeded in an
        # earlier round answer from the memo the request state carried, so nothing is done twice
        # (docs/eras.md). A failed item changed nothing and runs again.
        envelope = memo.get(f"batch.{index}")
        if envelope is None:
            envelope = await router.run(family, item, in_batch)
            if envelope["success"]:
                memo[f"batch.{index}"] = _remembered(envelope)
        result = _bare(envelope)
        if not envelope["success"] and envelope["error"]["code"] == CONFIRMATION_REQUIRED:
            pending = [_pending(i, later) for i, later in enumerate(items[index + 1 :], start=index + 1)]
            summary = {
                "total": len(items),
                "succeeded": succeeded,
                "failed": failed,
                "halted": 1,
                "pending": len(pending),
            }
            return {
                "success": True,
                "data": None,
                "results": results,
                "halted_at": {"index": index, "operation": name, "result": result},
                "pending_operations": pending,
                "summary": summary,
            }
        succeeded, failed = (succeeded + 1, failed) if envelope["success"] else (succeeded, failed + 1)
        results.append({"index": index, "operation": name, "result": result})
    summary = {"total": len(items), "succeeded": succeeded, "failed": failed}
    return {"success": True, "data": None, "results": results, "summary": summary}


def failed_codes(envelope: Envelope) -> list[str]:
    """The error codes of a batch's failed items, in order; the halting item's too."""
    items = [*envelope.get("results", ()), *([envelope["halted_at"]] if "halted_at" in envelope else ())]
    return [str(item["result"]["error"]["code"]) for item in items if not item["result"]["success"]]


def _remembered(envelope: Envelope) -> Envelope:
    """What the request state keeps of a finished item: all of it when small, else its identifiers
    and a warning, so the state stays small enough to travel back in the retry."""
    if wire_size(envelope) <= MEMO_ITEM_BYTES:
        return envelope
    data = envelope.get("data")
    kept = {k: data[k] for k in IDENTIFIERS if k in data} if isinstance(data, dict) else None
    notice = warning(
        VALIDATION_TRUNCATED_WARNING,
        "This item ran in an earlier round of the request; its result is reduced to identifiers",
        {"field": "data", "limit_type": "request_state", "limit_value": MEMO_ITEM_BYTES},
    )
    return success(kept, [*envelope.get("warnings", []), notice])


def _refusal(arguments: dict[str, Any], items: Any, cap: int) -> Envelope | None:
    if "operation" in arguments:
        return failure(VALIDATION_INVALID_TYPE, "Send either 'operation' or 'operations' (a batch), not both")
    if not isinstance(items, list) or not items:
        return failure(VALIDATION_INVALID_TYPE, "Parameter 'operations' expected 'a non-empty array of operations'")
    if len(items) > cap:
        return failure(VALIDATION_PAYLOAD_TOO_LARGE, f"Payload exceeds batch_size limit of {cap}")
    return None


def _bare(envelope: Envelope) -> dict[str, Any]:
    """An item's result: success, data and any warnings, or success and error."""
    if envelope["success"]:
        result = {"success": True, "data": envelope.get("data")}
        if envelope.get("warnings"):
            result["warnings"] = envelope["warnings"]
        return result
    return {"success": False, "error": envelope["error"]}


def _name(item: Any) -> str:
    name = item.get("operation") if isinstance(item, dict) else None
    return name if isinstance(name, str) else ""


def _pending(index: int, item: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, "operation": _name(item)}
    if isinstance(item, dict) and isinstance(item.get("params"), dict):
        out["params"] = item["params"]
    return out
