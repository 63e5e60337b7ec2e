"""A JSON-RPC method table: find the handler, call it, let its exception travel.

It knows nothing of MCP or HTTP: the caller passes an opaque context, and turns what the handler
raises into a wire error with `responses.error_object`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

from aql_mcp.exceptions import MethodNotFound
from aql_mcp.jsonrpc.messages import Notification, Request

C = TypeVar("C")
Handler = Callable[[dict[str, Any], C], Awaitable[dict[str, Any]]]
NotificationHandler = Callable[[dict[str, Any], C], Awaitable[None]]


class Dispatcher(Generic[C]):
    """Routes requests and notifications by method name."""

    def __init__(
        self,
        methods: Mapping[str, Handler[C]],
        notifications: Mapping[str, NotificationHandler[C]] | None = None,
    ) -> None:
        self._methods = dict(methods)
        self._notifications = dict(notifications or {})

    def extended(self, methods: Mapping[str, Handler[C]]) -> Dispatcher[C]:
        """A dispatcher with these methods as well (an era that serves more than another)."""
        return Dispatcher({**self._methods, **methods}, self._notifications)

    def has_method(self, method: str) -> bool:
        return method in self._methods

    async def call(self, request: Request, context: C) -> dict[str, Any]:
        handler = self._methods.get(request.method)
        if handler is None:
            # Never echo the method name: it is caller input (corporate Appendix B.4).
            raise MethodNotFound()
        return await handler(request.params, context)

    async def notify(self, notification: Notification, context: C) -> None:
        # JSON-RPC 2.0 §4.1: a notification is never answered, so an unknown one is dropped.
        handler = self._notifications.get(notification.method)
        if handler is not None:
            await handler(notification.params, context)
