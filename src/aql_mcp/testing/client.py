"""An in-process MCP client for testing a plugin in a few lines (docs/plugins.md, "Testing a plugin").

    from aql_mcp.testing.client import plugin_client

    async def test_greet_greets_by_name() -> None:
        async with plugin_client(Greeter()) as client:
            envelope = await client.operation("greet", {"name": "Ada"})
        assert envelope["data"]["greeting"] == "Hello, Ada!"

`plugin_client` builds the app `aql-mcp serve --dev` runs (`create_app`: every middleware,
development auth with a token from the development issuer, a SQLite store in a temporary
directory), with only the plugins given, as objects or `module:attribute` strings
(`builtins=True` adds the built-in ones), runs its lifespan, and talks to it through httpx's ASGI
transport: each request passes the same middleware, dispatcher and MCP-AQL router as on the
network, without a port or a process. `settings` overrides sections (`{"aql": {"mode": "single"}}`).

The client speaks the 2025-11-25 era (a session, the default) or the 2026-07-28 era
(`era="modern"`: no session, `_meta` and the routing headers on every request). A JSON-RPC error
is raised as `McpError` with its code; a tool's or an operation's failure is a result, as an
agent sees it: `call_tool` returns the `tools/call` result (`isError` true on failure) and
`operation` the MCP-AQL envelope (`{"success": false, "error": {"code": ...}}`).
"""

from __future__ import annotations

import base64
import itertools
import json
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
import structlog

from aql_mcp.app import create_app
from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.observability.logging import LEVELS
from aql_mcp.operations.endpoints import Surface
from aql_mcp.plugin_host.loader import AnyPlugin
from aql_mcp.protocol.param_headers import FIELD_VALUE, declared_headers
from aql_mcp.settings import Settings

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
PORT = 8000
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
CLIENT_INFO = {"name": "aql-mcp-testing", "version": "1"}
Era = Literal["legacy", "modern"]


class McpError(Exception):
    """A JSON-RPC error answer: `code` (e.g. -32602), `message`, `data`, and the HTTP `status`."""

    def __init__(self, code: int, message: str, data: Any, status: int) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data
        self.status = status


class PluginClient:
    """One caller of the app: its token, its era and (legacy era) its session."""

    def __init__(self, http: httpx.AsyncClient, settings: Settings, *, era: Era, token: str) -> None:
        self.http = http
        self.settings = settings
        self.era = era
        self.token = token
        self.session: dict[str, str] = {}
        # Notifications the server sent while answering (progress, log messages), oldest first.
        self.notifications: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._tools: dict[str, dict[str, Any]] = {}
        self._operation_tools: dict[str, str] = {}

    async def as_user(self, subject: str, scopes: Sequence[str] = ("mcp",)) -> PluginClient:
        """Another caller of the same app, with a token for `subject` (another tenant, fewer scopes)."""
        other = PluginClient(self.http, self.settings, era=self.era, token=mint(self.settings, subject, scopes))
        await other.open()
        return other

    async def open(self) -> None:
        if self.era == "modern":
            return
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": CLIENT_INFO}
        response = await self._post("initialize", params, {})
        self.session = {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": LEGACY}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.http.post("/mcp", json=initialized, headers=self._headers())

    async def request(self, method: str, params: dict[str, Any] | None = None, *, name: str | None = None) -> Any:
        """Any JSON-RPC request; the result, or `McpError`."""
        extra = self._routing(method, name, params or {})
        response = await self._post(method, dict(params or {}), extra)
        return self._result(response)

    async def list_tools(self) -> list[dict[str, Any]]:
        return await self._all("tools/list", "tools")

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The `tools/call` result: `content`, maybe `structuredContent`, `isError` on failure."""
        if self.era == "modern" and name not in self._tools:
            await self.list_tools()  # the parameters this tool mirrors into headers
        result: dict[str, Any] = await self.request(
            "tools/call", {"name": name, "arguments": dict(arguments or {})}, name=name
        )
        return result

    async def operation(
        self, name: str, params: Mapping[str, Any] | None = None, *, tool: str | None = None
    ) -> dict[str, Any]:
        """Run an MCP-AQL operation through its endpoint tool, as an agent does; the envelope.

        The tool is the one introspection names for the operation (`tool` overrides it: to check
        what another endpoint answers); an unknown operation goes to the introspecting tool,
        whose answer is `NOT_FOUND_OPERATION`.
        """
        endpoint = tool or await self._tool_for(name)
        arguments = {"operation": name, "params": dict(params or {})}
        return _envelope(await self.call_tool(endpoint, arguments))

    async def batch(self, items: Sequence[Mapping[str, Any]], *, tool: str | None = None) -> dict[str, Any]:
        """An MCP-AQL batch (`{"operations": [...]}`) on `tool`, by default the first item's tool."""
        endpoint = tool or await self._tool_for(str(items[0].get("operation", "")) if items else "")
        return _envelope(await self.call_tool(endpoint, {"operations": [dict(item) for item in items]}))

    async def list_prompts(self) -> list[dict[str, Any]]:
        return await self._all("prompts/list", "prompts")

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = await self.request(
            "prompts/get", {"name": name, "arguments": dict(arguments or {})}, name=name
        )
        return result

    async def list_resources(self) -> list[dict[str, Any]]:
        return await self._all("resources/list", "resources")

    async def read_resource(self, uri: str) -> list[dict[str, Any]]:
        """The `contents` of `resources/read`."""
        result = await self.request("resources/read", {"uri": uri}, name=uri)
        return list(result["contents"])

    async def _tool_for(self, operation: str) -> str:
        if operation not in self._operation_tools:
            aql = self.settings.aql
            introspecting = Surface(aql.mode, aql.profile, aql.tool_prefix).introspect_tool
            envelope = _envelope(
                await self.call_tool(introspecting, {"operation": "introspect", "params": {"query": "operations"}})
            )
            families = envelope["data"]["_protocol"]["families"]
            for listed in envelope["data"]["operations"]:
                self._operation_tools[listed["name"]] = families[listed["endpoint"]]["tool"]
            self._operation_tools.setdefault(operation, introspecting)
        return self._operation_tools[operation]

    async def _all(self, method: str, key: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            result = await self.request(method, {"cursor": cursor} if cursor else {})
            items.extend(result[key])
            cursor = result.get("nextCursor")
            if not cursor:
                return items

    def _headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {**ACCEPT, "authorization": f"Bearer {self.token}", **self.session, **(extra or {})}

    def _routing(self, method: str, name: str | None, params: Mapping[str, Any]) -> dict[str, str]:
        """The 2026-07-28 headers that mirror the body: version, method, name and tool parameters."""
        if self.era == "legacy":
            return {}
        headers = {"mcp-protocol-version": MODERN, "mcp-method": method}
        if name is not None:
            headers["mcp-name"] = _header_value(name)
        if method == "tools/call" and name is not None:
            headers.update(self._param_headers(name, params.get("arguments") or {}))
        return headers

    def _param_headers(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, str]:
        schema = self._tools.get(tool, {}).get("inputSchema", {})
        headers = {}
        for declared in declared_headers(tool, schema) if schema else ():
            value: Any = arguments
            for part in declared.path:
                value = value.get(part) if isinstance(value, Mapping) else None
            if value is not None:
                headers[declared.field] = _header_value(value)
        return headers

    async def _post(self, method: str, params: dict[str, Any], extra: Mapping[str, str]) -> httpx.Response:
        message_id = next(self._ids)
        if self.era == "modern":
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        body = {"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}
        return await self.http.post("/mcp", json=body, headers=self._headers(extra))

    def _result(self, response: httpx.Response) -> Any:
        answer = self._answer(response)
        if "error" in answer:
            error = answer["error"]
            raise McpError(error["code"], error.get("message", ""), error.get("data"), response.status_code)
        result = answer["result"]
        if isinstance(result, dict) and "tools" in result:
            self._tools.update({tool["name"]: tool for tool in result["tools"]})
        return result

    def _answer(self, response: httpx.Response) -> dict[str, Any]:
        """The JSON-RPC answer, from a JSON body or from an SSE stream (notifications kept aside)."""
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            answer: dict[str, Any] = response.json()
            return answer
        found: dict[str, Any] | None = None
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if "method" in message:
                    self.notifications.append(message)
                elif "result" in message or "error" in message:
                    found = message
        if found is None:
            raise McpError(-32603, "no answer in the event stream", None, response.status_code)
        return found


@asynccontextmanager
async def plugin_client(
    *plugins: AnyPlugin | str,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    era: Era = "legacy",
    subject: str = "tester",
    scopes: Sequence[str] = ("mcp",),
    builtins: bool = False,
    state_dir: Path | None = None,
    entry_point_plugins: bool = False,
) -> AsyncIterator[PluginClient]:
    """The real app with `plugins`, started, and a client of it for `subject` (see the module docstring).

    `state_dir` keeps the store (and the development signing key) there instead of a temporary
    directory removed on exit. `entry_point_plugins=True` also loads every plugin installed in the
    environment (`aql_mcp.plugins` entry points); off by default, because the author's own package,
    once installed, would otherwise load a second time beside the instance under test.
    """
    with tempfile.TemporaryDirectory(prefix="aql-mcp-test-") as temporary:
        built = build_settings(
            plugins,
            settings or {},
            Path(state_dir or temporary),
            builtins=builtins,
            entry_point_plugins=entry_point_plugins,
        )
        app = create_app(built, plugins=[plugin for plugin in plugins if not isinstance(plugin, str)])
        base = f"http://127.0.0.1:{built.server.port}"
        with logging_at(built.logging.level):
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url=base) as http:
                    client = PluginClient(http, built, era=era, token=mint(built, subject, scopes))
                    await client.open()
                    yield client


@contextmanager
def logging_at(level: str) -> Iterator[None]:
    """The service's log lines below `level` (the settings' `logging.level`, `warning` unless
    overridden) dropped while the client runs: `create_app` leaves logging to `aql-mcp serve`, so
    the level is applied here, to structlog's filter only (the test's own rendering and capture stay
    as they are), and the previous configuration is restored on exit. Nothing first logged inside
    is cached (`cache_logger_on_first_use`): a logger cached here would keep this filter for the
    rest of the process, and drop the lines of every later test that expects them."""
    previous = structlog.get_config()
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]), cache_logger_on_first_use=False
    )
    try:
        yield
    finally:
        structlog.configure(**previous)


def build_settings(
    plugins: Sequence[AnyPlugin | str],
    overrides: Mapping[str, Mapping[str, Any]],
    state: Path,
    *,
    builtins: bool,
    entry_point_plugins: bool = False,
) -> Settings:
    """Development settings on `state` with the import-string plugins, then the overrides by section."""
    data: dict[str, dict[str, Any]] = {
        "server": {
            "dev": True,
            "port": PORT,
            "plugins": [plugin for plugin in plugins if isinstance(plugin, str)],
            "entry_point_plugins": entry_point_plugins,
            **({} if builtins else {"builtin_plugins": []}),
        },
        "store": {"path": state},
        "logging": {"level": "warning"},
    }
    for section, values in overrides.items():
        data.setdefault(section, {}).update(values)
    return Settings.model_validate(data)


def mint(settings: Settings, subject: str, scopes: Sequence[str]) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    return issuer.mint(subject=subject, scopes=list(scopes), ttl=3600)


def _envelope(result: dict[str, Any]) -> dict[str, Any]:
    """The MCP-AQL envelope of an endpoint tool's result (its `structuredContent`)."""
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        return structured
    return dict(json.loads(result["content"][0]["text"]))


def _header_value(value: Any) -> str:
    """A value as a header carries it (2026-07-28 Streamable HTTP, "Value Encoding")."""
    rendered = ("true" if value else "false") if isinstance(value, bool) else str(value)
    if FIELD_VALUE.fullmatch(rendered) and rendered == rendered.strip():
        return rendered
    return "=?base64?" + base64.b64encode(rendered.encode("utf-8")).decode("ascii") + "?="
