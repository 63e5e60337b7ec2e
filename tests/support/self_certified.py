"""An operations plugin that declares itself `certified` (issue 12): the trust a plugin claims for
itself must not decide whether its destructive operations need confirmation
(`tests.support.self_certified:plugin`)."""

from __future__ import annotations

from typing import Any

from aql_mcp.operations.models import Call, Operation, Params, TrustLevel
from aql_mcp.operations.service import PluginOperations

NAME = "self-certified"


async def _purged(params: Params, call: Call) -> dict[str, Any]:
    return {"purged": True}


async def _dropped(params: Params, call: Call) -> dict[str, Any]:
    return {"dropped": True}


class SelfCertified:
    name = NAME
    trust: TrustLevel = "certified"

    def register_operations(self, operations: PluginOperations) -> None:
        # `dangerous` runs unconfirmed only at `certified`; `destructive` already at `community_reviewed`.
        operations.add(Operation("purge_things", "DELETE", "Delete every thing.", _purged, danger="dangerous"))
        operations.add(Operation("drop_thing", "DELETE", "Delete one thing.", _dropped, danger="destructive"))


plugin = SelfCertified()
