"""What a client reads before it connects: the Server Card and the domain catalog (docs/discovery.md).

The Server Card (SEP-2127, experimental) is served at `<mcp-url>/server-card` as
`application/mcp-server-card+json`; the catalog lists it, at `/.well-known/ai-catalog.json` (the
extension's current text, an AI Catalog) and at `/.well-known/mcp/catalog.json` (its earlier MCP
Catalog location, which peers still probe). Both are anonymous and public by design, so they hold
only what `GET /` already shows: the service's name, version, its public MCP URL and the protocol
versions it speaks. No tool, prompt or resource is named (the card leaves primitives to the
protocol's own listings), and no other URL. Each document is built once; its ETag is a digest of
its bytes, so `If-None-Match` revalidates it with a 304.
"""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Any
from urllib.parse import urlsplit

import orjson
from starlette.requests import Request
from starlette.responses import Response

from aql_mcp import __version__
from aql_mcp.protocol.versions import supported_versions
from aql_mcp.settings import Settings

CARD_PATH = "/mcp/server-card"
CARD_TYPE = "application/mcp-server-card+json"
CARD_SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
AI_CATALOG_PATH = "/.well-known/ai-catalog.json"
AI_CATALOG_TYPE = "application/ai-catalog+json"
MCP_CATALOG_PATH = "/.well-known/mcp/catalog.json"
CATALOG_SPEC_VERSION = "1.0"


def enabled(settings: Settings) -> bool:
    """`discovery.server_card`; unset, the documents are served in development mode only."""
    chosen = settings.discovery.server_card
    return settings.server.dev if chosen is None else chosen


def mcp_url(settings: Settings) -> str:
    return f"{settings.base_url}/mcp"


def card_name(settings: Settings) -> str:
    """`discovery.name`, else `<public host, reversed>/<server.name>` (`com.example.mcp/aql-mcp`):
    the card's reverse-DNS name. An IP address or a single label stays as it is."""
    if settings.discovery.name:
        return settings.discovery.name
    host = urlsplit(settings.base_url).hostname or "localhost"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        host = ".".join(reversed(host.split(".")))
    return f"{host}/{settings.server.name}"


def server_card(settings: Settings) -> dict[str, Any]:
    """The Server Card: identity, and the one remote with the versions it speaks (SEP-2127 `ServerCard`)."""
    return {
        "$schema": CARD_SCHEMA,
        "name": card_name(settings),
        "version": __version__,
        "description": settings.discovery.description,
        "title": settings.server.name,
        "remotes": [
            {
                "type": "streamable-http",
                "url": mcp_url(settings),
                # The same list an unsupported version is answered with, and `server/discover` names.
                "supportedProtocolVersions": supported_versions(modern_enabled=settings.mcp.modern_era),
                "headers": [
                    {
                        "name": "Authorization",
                        "description": "A bearer token from the identity provider this service trusts.",
                        "isRequired": True,
                        "isSecret": True,
                        "value": "Bearer {token}",
                        "variables": {"token": {"description": "Access token", "isRequired": True, "isSecret": True}},
                    }
                ],
            }
        ],
    }


def catalog(settings: Settings) -> dict[str, Any]:
    """The catalog: one entry pointing at the card (AI Catalog entry: identifier, type, url)."""
    publisher = urlsplit(settings.base_url).hostname or "localhost"
    suffix = card_name(settings).rpartition("/")[2]
    entry = {
        "identifier": f"urn:air:{publisher}:mcp:{suffix}",
        "type": CARD_TYPE,
        "url": mcp_url(settings) + "/server-card",
    }
    return {"specVersion": CATALOG_SPEC_VERSION, "entries": [entry]}


class Document:
    """One discovery document, answered with its media type, caching headers and ETag."""

    def __init__(self, content: dict[str, Any], media_type: str, *, max_age: int) -> None:
        self.body = orjson.dumps(content)
        self.etag = '"' + hashlib.sha256(self.body).hexdigest()[:32] + '"'
        self.headers = {
            "etag": self.etag,
            "cache-control": f"public, max-age={max_age}",
            # A browser reading the card across origins may revalidate with it (SEP-2127, "CORS").
            "access-control-expose-headers": "ETag",
        }
        self.media_type = media_type

    async def respond(self, request: Request) -> Response:
        if self.matches(request.headers.get("if-none-match")):
            return Response(status_code=304, headers=self.headers)
        return Response(self.body, media_type=self.media_type, headers=self.headers)

    def matches(self, if_none_match: str | None) -> bool:
        """RFC 9110 §13.1.2: `*`, or any listed tag equal to ours by weak comparison."""
        if if_none_match is None:
            return False
        tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
        return "*" in tags or self.etag in tags


def documents(settings: Settings) -> dict[str, Document]:
    """Path -> document, or nothing when `discovery.server_card` leaves them off (a 404 then)."""
    if not enabled(settings):
        return {}
    max_age = settings.discovery.max_age_seconds
    listing = catalog(settings)
    return {
        CARD_PATH: Document(server_card(settings), CARD_TYPE, max_age=max_age),
        AI_CATALOG_PATH: Document(listing, AI_CATALOG_TYPE, max_age=max_age),
        MCP_CATALOG_PATH: Document(listing, "application/json", max_age=max_age),
    }
