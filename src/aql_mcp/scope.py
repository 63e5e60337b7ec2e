"""Typed accessors for what middleware leaves in the ASGI scope for the layers below."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from starlette.types import Scope

from aql_mcp.auth.principal import Principal

PRINCIPAL_KEY = "aql_mcp.principal"
# The request's headers by name, built on the first lookup (`header`): a dozen layers read a header
# each, and a scan of the list per lookup cost more than the dictionary (bench/PROFILE.md).
HEADERS_KEY = "aql_mcp.headers"
REQUEST_ID_KEY = "aql_mcp.request_id"
# The connection a request came on, when the server is this project's (server/connection.py): it
# tells a request of its client going away without a task per request watching `receive`.
CONNECTION_KEY = "aql_mcp.connection"
# The JSON-RPC id of the modern request an edge is serving, once read: an `AuthError` it raises is
# answered by the auth middleware, which has not read the body (middleware/auth.py).
MESSAGE_ID_KEY = "aql_mcp.message_id"


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of a request header (`name` lower-case), decoded as Latin-1."""
    raw = scope["headers"]
    cached = scope.get(HEADERS_KEY)
    # Keyed by the list itself: a layer that gives the scope other headers gets a new table.
    if cached is None or cached[0] is not raw:
        table: dict[bytes, bytes] = {}
        for key, value in raw:
            table.setdefault(key, value)
        cached = (raw, table)
        scope[HEADERS_KEY] = cached
    value = cached[1].get(name)
    return None if value is None else str(value.decode("latin-1"))


def principal_of(scope: Scope) -> Principal | None:
    principal = scope.get(PRINCIPAL_KEY)
    return principal if isinstance(principal, Principal) else None


def request_id_of(scope: Scope) -> str:
    return str(scope.get(REQUEST_ID_KEY, "-"))


class DisconnectSource(Protocol):
    """What a connection offers its requests: a call when the client goes away."""

    def watch_disconnect(self, callback: Callable[[], None]) -> None: ...

    def unwatch_disconnect(self, callback: Callable[[], None]) -> None: ...


def connection_of(scope: Scope) -> DisconnectSource | None:
    connection: DisconnectSource | None = scope.get(CONNECTION_KEY)
    return connection
