"""An in-process MCP session that calls the MCP-AQL tools and checks every envelope it gets."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.settings import Settings
from tests.operations.envelope import check_batch, check_introspection, check_result
from tests.support.asgi import asgi_client, dev_settings, open_session, rpc

RECORDS = "aql_mcp.plugins.records:plugin"


def records_settings(state: Path, **sections: Mapping[str, Any]) -> Settings:
    """Development settings with the records plugin and no other built-in (so tools/list is small)."""
    data: dict[str, Any] = {"server": {"plugins": [RECORDS], "builtin_plugins": []}}
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    return dev_settings(state, **data)


class Aql:
    def __init__(self, http: httpx.AsyncClient, settings: Settings) -> None:
        self.http = http
        self.settings = settings
        self.headers: dict[str, str] = {}

    async def login(self, subject: str = "alice", scopes: tuple[str, ...] = ("mcp",)) -> Aql:
        issuer = DevIssuer(
            state_dir=self.settings.store.path, issuer=self.settings.issuer, audience=self.settings.audience
        )
        token = issuer.mint(subject=subject, scopes=list(scopes), ttl=600)
        self.headers = await open_session(self.http, token)
        return self

    async def as_user(self, subject: str, scopes: tuple[str, ...] = ("mcp",)) -> Aql:
        return await Aql(self.http, self.settings).login(subject, scopes)

    async def tools(self) -> list[dict[str, Any]]:
        response = await self.http.post("/mcp", json=rpc("tools/list", {}), headers=self.headers)
        return list(response.json()["result"]["tools"])

    async def raw(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        body = rpc("tools/call", {"name": tool, "arguments": arguments})
        # ASCII-escaped JSON, so a lone surrogate travels as the `\ud800` escape a client may send.
        response = await self.http.post("/mcp", content=json.dumps(body), headers=self.headers)
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        envelope = result["structuredContent"]
        assert json.loads(result["content"][0]["text"]) == envelope
        assert result.get("isError", False) is (envelope["success"] is False)
        return dict(envelope)

    async def call(self, tool: str, operation: str, **params: Any) -> dict[str, Any]:
        envelope = await self.raw(tool, {"operation": operation, "params": params})
        if operation == "introspect":
            return check_introspection(envelope)
        return check_result(envelope)

    async def batch(self, tool: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        return check_batch(await self.raw(tool, {"operations": operations}))


@asynccontextmanager
async def aql_session(settings: Settings, subject: str = "alice") -> AsyncIterator[Aql]:
    async with asgi_client(settings) as http:
        yield await Aql(http, settings).login(subject)
