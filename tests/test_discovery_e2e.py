"""Skills and the Server Card on a real server (`aql-mcp serve --dev`), judged by clients others wrote:
the official `mcp` Python client, in the legacy era (a session) and the modern era, finds the Skills
extension in the server's capabilities, lists the skills and reads every file with digests and sizes
that match; a caller with no token at all reads the Server Card and both catalogs and learns no tool.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from typing import Any, Literal

import anyio
import httpx
import pytest
from mcp import types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.server import ServerProcess, start_server

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]
DEADLINE = 20.0
EXTENSION = "io.modelcontextprotocol/skills"


class ListSkills(types.Request[dict[str, Any], Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"
    params: dict[str, Any] = {}


class SkillsResult(types.Result):
    skills: list[dict[str, Any]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with start_server(tmp_path_factory.mktemp("discovery"), env={"AQL_MCP_MCP__MODERN_ERA": "true"}) as process:
        yield process


def file_bytes(contents: Any) -> bytes:
    if isinstance(contents, types.TextResourceContents):
        return contents.text.encode("utf-8")
    return base64.b64decode(contents.blob)


# `auto` probes `server/discover` and ends up in the modern era on this server.
@pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
async def test_the_official_client_lists_skills_and_reads_files_matching_their_digests(
    server: ServerProcess, mode: str, version: str
) -> None:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {server.token()}"})
    with anyio.fail_after(DEADLINE):
        async with http, Client(streamable_http_client(server.url, http_client=http), mode=mode) as client:
            assert EXTENSION in (client.server_capabilities.extensions or {})
            listing = await client.session.send_request(ListSkills(), SkillsResult)
            reads = {}
            for entry in listing.skills:
                for item in entry["resources"]:
                    result = await client.read_resource(item["uri"])
                    reads[item["uri"]] = file_bytes(result.contents[0])
            assert client.protocol_version == version
    assert "skill://mcp-aql/SKILL.md" in {entry["uri"] for entry in listing.skills}
    for entry in listing.skills:
        for item in entry["resources"]:
            raw = reads[item["uri"]]
            assert item["digest"] == "sha256:" + hashlib.sha256(raw).hexdigest()
            assert item["size"] == len(raw)


async def test_a_caller_without_a_token_reads_the_card_and_catalogs_and_learns_no_tool(server: ServerProcess) -> None:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {server.token()}"})
    with anyio.fail_after(DEADLINE):
        async with http, Client(streamable_http_client(server.url, http_client=http), mode="legacy") as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
    assert tools
    async with httpx.AsyncClient(base_url=server.base, timeout=DEADLINE) as anonymous:
        card = await anonymous.get("/mcp/server-card", headers={"accept": "application/mcp-server-card+json"})
        paths = ("/.well-known/ai-catalog.json", "/.well-known/mcp/catalog.json")
        catalogs = [await anonymous.get(path) for path in paths]
        still_guarded = await anonymous.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert card.status_code == 200
    assert card.headers["content-type"] == "application/mcp-server-card+json"
    assert card.json()["remotes"][0]["url"] == server.url
    for catalog in catalogs:
        assert catalog.status_code == 200
        assert catalog.json()["entries"][0]["url"] == server.url + "/server-card"
    for body in (card.text, *(catalog.text for catalog in catalogs)):
        assert not {name for name in tools if name in body}
    assert still_guarded.status_code == 401
