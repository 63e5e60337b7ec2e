"""What an MCP-AQL call costs of its caller's rate budget (docs/aql.md, "Cost of a call").

The rate limiter takes one token per HTTP request before the body is read (middleware/rate_limit.py).
An operation declares its cost (`Operation.cost`, 1 unless a plugin says more: an import or an export
does the work of many calls); a call then pays the rest of its cost, and a batch the sum of its items'
costs, from the same bucket before anything runs. A call the budget cannot cover is refused whole with
429 (-32003) whose data names the budget, the cost asked and what was left, and audited as a
`rate_limit` record on the droppable path (docs/audit.md): refusals can come in floods.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from aql_mcp.auth.principal import principal_key
from aql_mcp.bucket import charge, remaining
from aql_mcp.exceptions import ConfigError, RateLimited
from aql_mcp.operations.audit import AuditLog
from aql_mcp.operations.models import Call, Operation

DEFAULT_COST = 1
# A bound, so one declared cost cannot put a caller's budget into debt for hours (the bucket lends
# a cost above the burst from a full bucket, bucket.py).
MAX_COST = 100


def check_cost(operation: Operation, plugin: str) -> None:
    """ConfigError at registration unless the declared cost is an integer from 1 to MAX_COST."""
    cost = operation.cost
    if isinstance(cost, bool) or not isinstance(cost, int) or not DEFAULT_COST <= cost <= MAX_COST:
        raise ConfigError(
            f"plugin {plugin}: operation {operation.name!r} declares cost {cost!r}; "
            f"a cost is an integer from {DEFAULT_COST} to {MAX_COST}"
        )


def cost_of(find: Callable[[str], Operation | None], item: Any) -> int:
    """The cost of one request item: its operation's (`find` looks it up by name), or 1 for one the
    router will refuse by name."""
    name = item.get("operation") if isinstance(item, dict) else None
    operation = find(name) if isinstance(name, str) else None
    return DEFAULT_COST if operation is None else operation.cost


def pay(costs: Iterable[int], what: str, refused: Callable[[], None] | None = None) -> None:
    """Take the whole cost of a call or batch from the request's budget (the request paid one token
    when it was admitted); RateLimited, with nothing taken, when the budget cannot cover it now
    (`refused` is told first)."""
    total = sum(costs)
    wait = charge(total - 1)
    if wait > 0:
        if refused is not None:
            refused()
        raise RateLimited(
            f"Rate limited: {what} costs {total} calls of your rate budget; retry later",
            retry_after=max(1, math.ceil(wait)),
            data={"budget": "rate", "cost": total, "remaining": remaining()},
        )


def rate_refusal(audit: AuditLog, call: Call, operation: str) -> Callable[[], None]:
    """What `pay` tells of a refusal: a `rate_limit` record, code `rate`, queued and droppable."""

    def refused() -> None:
        audit.offer(
            "rate_limit",
            operation=operation,
            principal=principal_key(call.principal),
            outcome="refused",
            code="rate",
            caller=call.principal,
        )

    return refused
