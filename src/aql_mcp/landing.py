"""`GET /`: a small HTML page saying what this service is and where its endpoints are."""

from __future__ import annotations

from html import escape

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from aql_mcp import __version__

ENDPOINTS = (
    ("POST/GET/DELETE", "/mcp", "MCP endpoint (Streamable HTTP, protocol 2025-11-25; bearer token required)"),
    ("GET", "/health", "liveness: status, version, uptime"),
    ("GET", "/ready", "readiness: status and dependency checks"),
    ("GET", "/.well-known/oauth-protected-resource", "OAuth protected resource metadata (RFC 9728)"),
)
# Shown when `discovery.server_card` serves them (discovery.py).
DISCOVERY = (
    ("GET", "/mcp/server-card", "MCP Server Card (SEP-2127, experimental)"),
    ("GET", "/.well-known/ai-catalog.json", "catalog of this domain's MCP servers"),
)


class ServicePage:
    def __init__(self, *, name: str, dev: bool, discovery: bool = False) -> None:
        rows = "".join(
            f"<tr><td>{escape(m)}</td><td><code>{escape(p)}</code></td><td>{escape(d)}</td></tr>"
            for m, p, d in (*ENDPOINTS, *(DISCOVERY if discovery else ()))
        )
        mode = (
            "<p><strong>Development mode</strong>: tokens come from <code>aql-mcp dev-token</code>.</p>" if dev else ""
        )
        # The tool catalog is not shown: listing tools needs a token (anonymous listing is off).
        self.html = (
            f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(name)}</title></head>"
            f"<body><h1>{escape(name)}</h1><p>Version {escape(__version__)}. An MCP server: agents call it over "
            f"Streamable HTTP at <code>/mcp</code>.</p>{mode}"
            f"<table><tr><th>Method</th><th>Path</th><th>Purpose</th></tr>{rows}</table>"
            "<p>The tool catalog is available to authenticated MCP clients via <code>tools/list</code>.</p>"
            "</body></html>"
        )

    async def render(self, request: Request) -> Response:
        return HTMLResponse(self.html)
