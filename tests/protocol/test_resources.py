"""One readability check for `resources/read`, `resources/subscribe` and `subscriptions/listen`
(issue 27, N5; MCP 2025-11-25 server/resources, "Subscriptions")."""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.auth.principal import Principal
from aql_mcp.exceptions import InsufficientScope, ResourceNotFound
from aql_mcp.protocol.content import Content, text_contents
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.policy import ScopeRules
from aql_mcp.protocol.primitives import Registry, ResourceTemplate
from aql_mcp.protocol.resources import ResourceMethods, readable

pytestmark = pytest.mark.anyio

OWNER = Principal(subject="owner", scopes=frozenset({"mcp"}))
OTHER = Principal(subject="other", scopes=frozenset({"mcp"}))


class Subscriptions:
    """A session's subscriptions, as the handler leaves them."""

    def __init__(self) -> None:
        self.uris: list[str] = []

    async def subscribe(self, uri: str) -> None:
        self.uris.append(uri)


async def read_box(uri: str, variables: dict[str, str], ctx: Context) -> list[Content]:
    return [text_contents(uri, variables["owner"], "text/plain")]


async def only_its_owner(uri: str, variables: dict[str, str], principal: Principal | None) -> None:
    if principal is None or principal.subject != variables["owner"]:
        raise ResourceNotFound(data={"uri": uri})


def boxes(rules: ScopeRules | None = None) -> tuple[Registry, ScopeRules]:
    registry = Registry()
    registry.add_resource_template(ResourceTemplate("box://{owner}", "box", read_box, check=only_its_owner))
    return registry, rules or ScopeRules()


def context(principal: Principal, peer: Any = None) -> Context:
    return Context(request_id="r", message_id=1, peer=peer, principal=principal, outbound=None, hub=None)  # type: ignore[arg-type]


async def test_a_templates_check_refuses_a_uri_that_is_not_the_callers() -> None:
    registry, rules = boxes()
    with pytest.raises(ResourceNotFound):
        await readable(registry, rules, "box://owner", OTHER)
    _target, variables = await readable(registry, rules, "box://owner", OWNER)
    assert variables == {"owner": "owner"}


async def test_subscribe_refuses_what_read_refuses_and_records_nothing() -> None:
    registry, rules = boxes()
    methods = ResourceMethods(registry, page_size=10, rules=rules)
    peer = Subscriptions()
    for uri in ("box://owner", "nothing://here"):
        with pytest.raises(ResourceNotFound):
            await methods.read({"uri": uri}, context(OTHER, peer))
        with pytest.raises(ResourceNotFound):
            await methods.subscribe({"uri": uri}, context(OTHER, peer))
    assert peer.uris == []


async def test_subscribe_refuses_a_resource_the_callers_scopes_do_not_reach() -> None:
    registry, rules = boxes(ScopeRules(resources={"box://*": ("boxes",)}))
    methods = ResourceMethods(registry, page_size=10, rules=rules)
    with pytest.raises(InsufficientScope):
        await methods.subscribe({"uri": "box://owner"}, context(OWNER, Subscriptions()))


async def test_subscribe_accepts_what_the_caller_may_read() -> None:
    registry, rules = boxes()
    peer = Subscriptions()
    assert (
        await ResourceMethods(registry, page_size=10, rules=rules).subscribe(
            {"uri": "box://owner"}, context(OWNER, peer)
        )
        == {}
    )
    assert peer.uris == ["box://owner"]
