"""Resources: list, read, templates and subscriptions (MCP 2025-11-25 server/resources)."""

from __future__ import annotations

import re
from typing import Any

from aql_mcp.auth.principal import Principal, withheld_reason
from aql_mcp.exceptions import InsufficientScope, InvalidParams, ResourceNotFound
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.pagination import paginate
from aql_mcp.protocol.policy import ScopeRules
from aql_mcp.protocol.primitives import Registry, Resource, ResourceTemplate

# Control characters and lone surrogates: in no URI (RFC 3986 §2), and not storable as text everywhere.
NOT_IN_URI = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
MAX_URI_LENGTH = 2048


class ResourceMethods:
    def __init__(self, registry: Registry, *, page_size: int, rules: ScopeRules) -> None:
        self._registry = registry
        self._page_size = page_size
        self._rules = rules

    async def list(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        listing = [resource.to_wire() for resource in self._registry.resources()]
        page, next_cursor = paginate(listing, params, self._page_size)
        result: dict[str, Any] = {"resources": page}
        if next_cursor:
            result["nextCursor"] = next_cursor
        return result

    async def templates(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        listing = [template.to_wire() for template in self._registry.templates()]
        page, next_cursor = paginate(listing, params, self._page_size)
        result: dict[str, Any] = {"resourceTemplates": page}
        if next_cursor:
            result["nextCursor"] = next_cursor
        return result

    async def read(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        uri = _uri(params)
        target, variables = await readable(self._registry, self._rules, uri, ctx.principal)
        if isinstance(target, Resource):
            contents = await target.reader(uri, ctx)
        else:
            contents = await target.reader(uri, variables, ctx)
        return {"contents": contents}

    async def subscribe(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        uri = _uri(params)
        # Only what the caller could read (issue 27, N5: another tenant's export was acknowledged).
        await readable(self._registry, self._rules, uri, ctx.principal)
        if ctx.peer is not None:
            await ctx.peer.subscribe(uri)
        return {}

    async def unsubscribe(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        uri = _uri(params)
        if ctx.peer is not None:
            await ctx.peer.unsubscribe(uri)
        return {}


async def readable(
    registry: Registry, rules: ScopeRules, uri: str, principal: Principal | None
) -> tuple[Resource | ResourceTemplate, dict[str, str]]:
    """What serves `uri`, if `principal` may read it; the one check `resources/read`,
    `resources/subscribe` and `subscriptions/listen` (endpoint/modern/listen.py) pass, so a caller subscribes only
    to what it may read and is refused it with the error a read would get."""
    found = registry.resolve(uri)
    if found is None:
        # -32002 in the legacy era (docs/errors.md); the URI is the caller's own, safe to return.
        raise ResourceNotFound(data={"uri": uri})
    missing = rules.missing_for_resource(uri, principal)
    if missing:
        raise InsufficientScope(missing, withheld_reason(principal, missing))
    target, variables = found
    if isinstance(target, ResourceTemplate) and target.check is not None:
        await target.check(uri, variables, principal)
    return found


def _uri(params: dict[str, Any]) -> str:
    return check_uri(params.get("uri"), "uri")


def check_uri(uri: Any, field: str) -> str:
    """`uri` if it is a URI this server can name, else InvalidParams naming `field`."""
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_LENGTH:
        raise InvalidParams(data={"field": field, "reason": "required"})
    if NOT_IN_URI.search(uri):
        # RFC 3986 §2: no URI holds a control character; a NUL would also reach the store, whose
        # PostgreSQL text columns refuse it (issue 12: unsubscribing from one was a 503).
        raise InvalidParams("Invalid params: uri holds a control character", data={"field": field, "reason": "format"})
    return uri
