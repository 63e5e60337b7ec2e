"""The Server Card and the catalogs (`discovery.py`), checked against the Server Card extension
(SEP-2127, experimental; modelcontextprotocol/experimental-ext-server-card: schema.ts and
docs/discovery.md, with the earlier MCP Catalog text of that file for `/.well-known/mcp/catalog.json`).

What is checked, in our words:
- the card is served at the MCP URL plus `/server-card`, as `application/mcp-server-card+json`;
- it has `$schema` (the v1 server-card schema URL), `name` in reverse-DNS `namespace/name` form (3 to
  200 characters), `version`, `description` (1 to 100 characters), and nothing outside the card's
  fields; `remotes` gives the transport (`streamable-http`), the URL and the protocol versions, which
  agree with what `server/discover` answers;
- the card names no tool, prompt or resource (primitives are left to the runtime listings) and no
  URL but the public MCP URL;
- the catalog (`specVersion`, `entries`) has one entry: `identifier` (`urn:air:` anchored on the
  publisher's domain), `type` = the card's media type, `url` = where the card is; it is served at
  `/.well-known/ai-catalog.json` as `application/ai-catalog+json`, and at the earlier location
  `/.well-known/mcp/catalog.json`;
- both are cacheable: `Cache-Control: public, max-age=N`, an `ETag`, and a 304 for `If-None-Match`;
- a browser may read the ETag (`Access-Control-Expose-Headers`);
- anonymous: no token needed; the service's own guards still apply (Host, Origin, request id, a rate
  limit); off by the setting (404), and off outside development mode unless set.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp import __version__
from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.discovery import enabled
from aql_mcp.settings import Settings
from tests.support.asgi import asgi_client, dev_settings, open_session, rpc
from tests.support.modern import MODERN, modern_body, modern_headers

pytestmark = pytest.mark.anyio
CARD = "/mcp/server-card"
AI_CATALOG = "/.well-known/ai-catalog.json"
MCP_CATALOG = "/.well-known/mcp/catalog.json"
PUBLIC = "https://mcp.example.com"
CARD_TYPE = "application/mcp-server-card+json"
CARD_FIELDS = {
    "$schema",
    "name",
    "version",
    "description",
    "title",
    "websiteUrl",
    "repository",
    "icons",
    "remotes",
    "_meta",
}
REMOTE_FIELDS = {"type", "url", "headers", "variables", "supportedProtocolVersions"}
INPUT_FIELDS = {"name", "description", "isRequired", "isSecret", "format", "default", "placeholder", "value", "choices"}
HOST = {"host": "127.0.0.1:8000"}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return dev_settings(tmp_path, server={"public_url": PUBLIC})


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(settings) as http:
        yield http


def token(settings: Settings) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    return issuer.mint(subject="tester", scopes=["mcp"], ttl=600)


async def test_the_card_has_the_card_fields_and_only_those(client: httpx.AsyncClient, settings: Settings) -> None:
    response = await client.get(CARD, headers={**HOST, "accept": CARD_TYPE})

    assert response.status_code == 200
    assert response.headers["content-type"] == CARD_TYPE
    card = response.json()
    assert set(card) <= CARD_FIELDS
    assert card["$schema"] == "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
    assert re.fullmatch(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+", card["name"])
    assert 3 <= len(card["name"]) <= 200
    assert card["name"] == "com.example.mcp/aql-mcp"
    assert card["version"] == __version__
    assert 1 <= len(card["description"]) <= 100
    assert card["title"] == "aql-mcp"
    (remote,) = card["remotes"]
    assert set(remote) <= REMOTE_FIELDS
    assert remote["type"] == "streamable-http"
    assert remote["url"] == f"{PUBLIC}/mcp"
    for header in remote["headers"]:
        assert set(header) <= INPUT_FIELDS | {"variables"}
        assert header["isSecret"] is True
    # The versions agree with the runtime's own answer (SEP-2127, "Consistency with Runtime Behavior").
    discover = await client.post(
        "/mcp",
        json=modern_body("server/discover", {}, META, 1),
        headers={**modern_headers(token(settings), "server/discover"), **HOST},
    )
    assert remote["supportedProtocolVersions"] == discover.json()["result"]["supportedVersions"]


META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "discovery-tests", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.mark.parametrize(
    ("path", "media_type"), [(AI_CATALOG, "application/ai-catalog+json"), (MCP_CATALOG, "application/json")]
)
async def test_the_catalog_points_at_the_card(client: httpx.AsyncClient, path: str, media_type: str) -> None:
    response = await client.get(path, headers=HOST)

    assert response.status_code == 200
    assert response.headers["content-type"] == media_type
    catalog = response.json()
    assert set(catalog) == {"specVersion", "entries"}
    assert catalog["specVersion"] == "1.0"
    (entry,) = catalog["entries"]
    assert entry == {
        "identifier": "urn:air:mcp.example.com:mcp:aql-mcp",
        "type": CARD_TYPE,
        "url": f"{PUBLIC}{CARD}",
    }
    card = await client.get(entry["url"].removeprefix(PUBLIC), headers=HOST)
    assert card.headers["content-type"] == entry["type"]


@pytest.mark.parametrize("path", [CARD, AI_CATALOG, MCP_CATALOG])
async def test_each_document_is_cacheable_and_revalidates_with_its_etag(client: httpx.AsyncClient, path: str) -> None:
    first = await client.get(path, headers=HOST)
    etag = first.headers["etag"]

    assert first.headers["cache-control"] == "public, max-age=3600"
    assert re.fullmatch(r'"[^"]+"', etag)
    assert "etag" in first.headers["access-control-expose-headers"].lower()
    for validator in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        again = await client.get(path, headers={**HOST, "if-none-match": validator})
        assert again.status_code == 304, validator
        assert again.content == b""
        assert again.headers["etag"] == etag
    changed = await client.get(path, headers={**HOST, "if-none-match": '"something-else"'})
    assert changed.status_code == 200
    assert changed.content == first.content


async def test_max_age_follows_the_setting(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, discovery={"max_age_seconds": 60})
    async with asgi_client(settings) as http:
        response = await http.get(CARD, headers=HOST)
    assert response.headers["cache-control"] == "public, max-age=60"


async def test_an_anonymous_caller_reads_both_and_learns_no_tool(client: httpx.AsyncClient, settings: Settings) -> None:
    session = await open_session(client, token(settings))
    tools = (await client.post("/mcp", json=rpc("tools/list", {}), headers=session)).json()["result"]["tools"]
    names = {tool["name"] for tool in tools}
    assert names
    bodies = []
    for path in (CARD, AI_CATALOG, MCP_CATALOG):
        response = await client.get(path, headers=HOST)  # no Authorization
        assert response.status_code == 200
        bodies.append(response.text)
    for body in bodies:
        for name in names | {"introspect", "create_record", "delete_collection", "skill://", "aql-mcp://"}:
            assert name not in body
        urls = set(re.findall(r"https?://[^\"\s]+", body))
        assert urls <= {
            f"{PUBLIC}/mcp",
            f"{PUBLIC}{CARD}",
            "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json",
        }


async def test_the_routes_are_not_the_mcp_endpoint(client: httpx.AsyncClient) -> None:
    """`/mcp/server-card` is its own route: neither `/mcp`'s authentication nor its methods apply."""
    assert (await client.post(CARD, headers=HOST, json={})).status_code == 405
    endpoint = await client.get("/mcp", headers=HOST)
    assert endpoint.status_code == 401
    assert "www-authenticate" in endpoint.headers
    assert (await client.get(CARD, headers=HOST)).status_code == 200


async def test_host_origin_and_request_id_still_apply(client: httpx.AsyncClient) -> None:
    assert (await client.get(CARD, headers={"host": "evil.example"})).status_code == 421
    refused = await client.get(CARD, headers={**HOST, "origin": "https://evil.example"})
    assert refused.status_code == 403
    allowed = await client.get(CARD, headers={**HOST, "origin": "http://127.0.0.1:8000"})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "http://127.0.0.1:8000"
    assert allowed.headers["x-request-id"]


async def test_a_flood_of_anonymous_reads_is_rate_limited(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, limits={"rate_per_second": 0.001, "rate_burst": 2})
    async with asgi_client(settings) as http:
        statuses = [(await http.get(CARD, headers=HOST)).status_code for _ in range(3)]
        last = await http.get(CARD, headers=HOST)
    assert statuses == [200, 200, 429]
    assert int(last.headers["retry-after"]) >= 1


@pytest.mark.parametrize("path", [CARD, AI_CATALOG, MCP_CATALOG])
async def test_the_setting_off_serves_nothing(tmp_path: Path, path: str) -> None:
    settings = dev_settings(tmp_path, discovery={"server_card": False})
    async with asgi_client(settings) as http:
        assert (await http.get(path, headers=HOST)).status_code == 404
        page = (await http.get("/", headers=HOST)).text
    assert "server-card" not in page


async def test_the_service_page_names_the_card_when_it_is_served(client: httpx.AsyncClient) -> None:
    page = (await client.get("/", headers=HOST)).text
    assert CARD in page
    assert AI_CATALOG in page


def test_unset_it_is_on_in_development_mode_only() -> None:
    def settings(dev: bool, chosen: bool | None) -> Settings:
        sections: dict[str, Any] = {"server": {"dev": dev}, "discovery": {"server_card": chosen}}
        return Settings(**sections)

    assert enabled(settings(True, None)) is True
    assert enabled(settings(False, None)) is False
    assert enabled(settings(False, True)) is True
    assert enabled(settings(True, False)) is False


def test_a_card_name_outside_the_reverse_dns_form_is_refused() -> None:
    with pytest.raises(ValueError, match=r"discovery\.name"):
        Settings(discovery={"name": "no-slash"})
    assert Settings(discovery={"name": "com.example/aql"}).discovery.name == "com.example/aql"
