"""Typed accessors for what middleware leaves in the ASGI scope for the layers below."""

from __future__ import annotations

from starlette.types import Scope

from aql_mcp.auth.principal import Principal

PRINCIPAL_KEY = "aql_mcp.principal"
REQUEST_ID_KEY = "aql_mcp.request_id"
# The JSON-RPC id of the modern request an edge is serving, once read: an `AuthError` it raises is
# answered by the auth middleware, which has not read the body (middleware/auth.py).
MESSAGE_ID_KEY = "aql_mcp.message_id"


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of a request header (`name` lower-case), decoded as Latin-1."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def principal_of(scope: Scope) -> Principal | None:
    principal = scope.get(PRINCIPAL_KEY)
    return principal if isinstance(principal, Principal) else None


def request_id_of(scope: Scope) -> str:
    return str(scope.get(REQUEST_ID_KEY, "-"))
