"""The method table: routes by name, lets handler exceptions travel, drops unknown notifications."""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.exceptions import InvalidParams, MethodNotFound
from aql_mcp.jsonrpc.dispatcher import Dispatcher
from aql_mcp.jsonrpc.messages import Notification, Request

pytestmark = pytest.mark.anyio

Context = list[tuple[str, dict[str, Any]]]


async def echo(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    ctx.append(("echo", params))
    return {"echoed": params}


async def refuse(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    raise InvalidParams(data={"field": "x", "reason": "required"})


async def remember(params: dict[str, Any], ctx: Context) -> None:
    ctx.append(("noted", params))


def dispatcher() -> Dispatcher[Context]:
    return Dispatcher({"echo": echo, "refuse": refuse}, {"notifications/noted": remember})


async def test_request_is_routed_to_its_handler_with_params_and_context() -> None:
    ctx: Context = []
    result = await dispatcher().call(Request(1, "echo", {"a": 1}), ctx)
    assert result == {"echoed": {"a": 1}}
    assert ctx == [("echo", {"a": 1})]


async def test_unknown_method_raises_method_not_found_without_echoing_it() -> None:
    with pytest.raises(MethodNotFound) as raised:
        await dispatcher().call(Request(1, "secret/method-name", {}), [])
    assert raised.value.code == -32601
    assert "secret/method-name" not in raised.value.detail
    assert "secret/method-name" not in str(raised.value.data)


async def test_handler_errors_travel_unchanged() -> None:
    with pytest.raises(InvalidParams) as raised:
        await dispatcher().call(Request(1, "refuse", {}), [])
    assert raised.value.data == {"field": "x", "reason": "required"}


async def test_known_notification_reaches_its_handler() -> None:
    ctx: Context = []
    await dispatcher().notify(Notification("notifications/noted", {"n": 2}), ctx)
    assert ctx == [("noted", {"n": 2})]


async def test_unknown_notification_is_ignored() -> None:
    """JSON-RPC 2.0 §4.1: a notification is never answered, not even with an error."""
    ctx: Context = []
    await dispatcher().notify(Notification("notifications/unknown", {}), ctx)
    assert ctx == []


async def test_notification_names_are_not_request_methods() -> None:
    table = dispatcher()
    assert table.has_method("echo")
    assert not table.has_method("notifications/noted")
    with pytest.raises(MethodNotFound):
        await table.call(Request(1, "notifications/noted", {}), [])
