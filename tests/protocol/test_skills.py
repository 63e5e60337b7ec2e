"""`skills/list` and `skills/get` (`protocol/skills.py`) through the whole app, in both eras, against
the Skills extension (SEP-2640, `io.modelcontextprotocol/skills`; stable specification of
modelcontextprotocol/ext-skills, and its SDK's tests for the 2025-era negotiation).

What is checked, in our words:
- the server declares `io.modelcontextprotocol/skills` under `capabilities.extensions`, beside
  `resources`: in the `initialize` result (2025-11-25) and in `server/discover` (2026-07-28);
- `skills/list` answers `skills`, each entry `{uri, frontmatter, resources}`; `uri` is the skill's
  SKILL.md; `frontmatter` holds `name` and `description`, the name equal to the last segment before
  SKILL.md, and equals the YAML frontmatter of the SKILL.md a read returns;
- `resources` lists every file once, SKILL.md included, each `{uri, digest, size}`: the sha256 of
  the bytes `resources/read` returns (text as UTF-8, a blob decoded) and their length;
- SKILL.md reads as `text/markdown`;
- pages follow the base protocol (`cursor`/`nextCursor`) and never split an entry;
- `skills/get` answers `{skill}` with the entry the listing has; a URI that names no skill is -32602;
- in 2026-07-28 both results carry `resultType: "complete"`, `ttlMs` and `cacheScope`; in
  2025-11-25 they do not (no `CacheableResult` there);
- a caller sees only the skills whose files it could read, and is refused one it may not read as a
  read of it would be.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from aql_mcp.testing.client import McpError, PluginClient, plugin_client
from tests.support.asgi import MCP_HEADERS, asgi_client, dev_settings, initialize_params, rpc
from tests.support.guided import TABLE, URI, Guided
from tests.support.modern import modern_body, modern_headers

pytestmark = pytest.mark.anyio
EXTENSION = "io.modelcontextprotocol/skills"
BUILT_IN = {
    "skill://mcp-aql/SKILL.md",
    "skill://records-workspace/SKILL.md",
    "skill://agent-guide/SKILL.md",
    "skill://background-executions/SKILL.md",
    "skill://execution-safety/SKILL.md",
}
ERAS = ["legacy", "modern"]


async def read_bytes(client: PluginClient, uri: str) -> tuple[bytes, str]:
    """The file's bytes as `resources/read` serves them, and its media type."""
    result = await client.request("resources/read", {"uri": uri}, name=uri)
    (content,) = result["contents"]
    assert content["uri"] == uri
    raw = content["text"].encode("utf-8") if "text" in content else base64.b64decode(content["blob"])
    return raw, content["mimeType"]


async def check_entry(client: PluginClient, entry: dict[str, Any]) -> None:
    assert set(entry) == {"uri", "frontmatter", "resources"}
    uri, frontmatter = entry["uri"], entry["frontmatter"]
    assert uri.startswith("skill://")
    assert uri.endswith("/SKILL.md")
    assert isinstance(frontmatter["name"], str)
    assert isinstance(frontmatter["description"], str)
    assert uri.split("/")[-2] == frontmatter["name"]
    listed = [item["uri"] for item in entry["resources"]]
    assert listed[0] == uri
    assert len(listed) == len(set(listed))
    root = uri.removesuffix("SKILL.md")
    for item in entry["resources"]:
        assert set(item) == {"uri", "digest", "size"}
        assert item["uri"].startswith(root)
        raw, mime_type = await read_bytes(client, item["uri"])
        assert item["digest"] == "sha256:" + hashlib.sha256(raw).hexdigest()
        assert item["size"] == len(raw)
        if item["uri"] == uri:
            assert mime_type == "text/markdown"
            assert raw.startswith(b"---\n")
            assert yaml.safe_load(raw.split(b"---\n")[1]) == frontmatter


@pytest.mark.parametrize("era", ERAS)
async def test_every_listed_skill_matches_what_resources_read_serves(era: Any) -> None:
    async with plugin_client(Guided(), builtins=True, era=era) as client:
        result = await client.request("skills/list", {})
        entries = {entry["uri"]: entry for entry in result["skills"]}
        assert set(entries) == BUILT_IN | {URI}
        for entry in result["skills"]:
            await check_entry(client, entry)
        guided = entries[URI]
        assert [item["uri"].removeprefix("skill://acme/tools/guided-usage/") for item in guided["resources"]] == [
            "SKILL.md",
            "references/notes.md",
            "data/table.bin",
        ]
        assert guided["resources"][2]["size"] == len(TABLE)
        assert "nextCursor" not in result


@pytest.mark.parametrize("era", ERAS)
async def test_skills_get_answers_the_listed_entry_and_minus_32602_for_no_skill(era: Any) -> None:
    async with plugin_client(Guided(), era=era) as client:
        (listed,) = (await client.request("skills/list", {}))["skills"]
        got = await client.request("skills/get", {"uri": URI})
        assert got["skill"] == listed
        for uri in ("skill://acme/tools/nothing/SKILL.md", "skill://acme/tools/guided-usage/references/notes.md"):
            with pytest.raises(McpError) as refused:
                await client.request("skills/get", {"uri": uri})
            assert refused.value.code == -32602
        with pytest.raises(McpError) as missing:
            await client.request("skills/get", {})
        assert missing.value.code == -32602


async def test_modern_results_are_complete_and_cacheable_legacy_ones_are_not() -> None:
    async with plugin_client(Guided(), era="modern") as modern:
        for method, params in (("skills/list", {}), ("skills/get", {"uri": URI})):
            result = await modern.request(method, params)
            assert result["resultType"] == "complete"
            assert isinstance(result["ttlMs"], int)
            assert result["ttlMs"] >= 0
            assert result["cacheScope"] in ("public", "private")
    async with plugin_client(Guided()) as legacy:
        for method, params in (("skills/list", {}), ("skills/get", {"uri": URI})):
            result = await legacy.request(method, params)
            assert not {"resultType", "ttlMs", "cacheScope"} & set(result)


@pytest.mark.parametrize("era", ERAS)
async def test_pages_never_split_an_entry_and_together_hold_every_skill(era: Any) -> None:
    async with plugin_client(Guided(), builtins=True, era=era, settings={"streams": {"page_size": 2}}) as client:
        seen: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        while True:
            page = await client.request("skills/list", params)
            assert 1 <= len(page["skills"]) <= 2
            seen.extend(page["skills"])
            if "nextCursor" not in page:
                break
            params = {"cursor": page["nextCursor"]}
        assert {entry["uri"] for entry in seen} == BUILT_IN | {URI}
        assert all(entry["resources"][0]["uri"] == entry["uri"] for entry in seen)
        with pytest.raises(McpError) as bad:
            await client.request("skills/list", {"cursor": "not-ours"})
        assert bad.value.code == -32602


@pytest.mark.parametrize("era", ERAS)
async def test_a_caller_sees_only_the_skills_it_could_read(era: Any) -> None:
    policy = {"auth": {"policy": {"resources": {"skill://acme/*": ["guides"]}}}}
    async with plugin_client(Guided(), builtins=True, era=era, settings=policy) as client:
        listed = {entry["uri"] for entry in (await client.request("skills/list", {}))["skills"]}
        assert listed == BUILT_IN
        with pytest.raises(McpError) as refused:
            await client.request("skills/get", {"uri": URI})
        with pytest.raises(McpError) as read:
            await client.request("resources/read", {"uri": URI}, name=URI)
        # The same refusal a read gets (its HTTP status is the era's: 200 in a legacy session, 403 modern).
        assert (refused.value.code, refused.value.status) == (read.value.code, read.value.status)
        assert refused.value.code == -32000
        assert refused.value.data["reason"] == "insufficient_scope"

        reader = await client.as_user("reader", scopes=("mcp", "guides"))
        listed = {entry["uri"] for entry in (await reader.request("skills/list", {}))["skills"]}
        assert listed == BUILT_IN | {URI}
        assert (await reader.request("skills/get", {"uri": URI}))["skill"]["uri"] == URI


async def test_initialize_declares_the_extension_beside_resources() -> None:
    async with plugin_client(Guided()) as client:
        headers = {**MCP_HEADERS, "authorization": f"Bearer {client.token}"}
        response = await client.http.post("/mcp", json=rpc("initialize", initialize_params()), headers=headers)
        capabilities = response.json()["result"]["capabilities"]
        assert capabilities["extensions"][EXTENSION] == {}
        assert "resources" in capabilities


async def test_server_discover_declares_the_extension_beside_tasks_and_resources() -> None:
    async with plugin_client(Guided(), era="modern") as client:
        result = await client.request("server/discover", {})
        extensions = result["capabilities"]["extensions"]
        assert extensions[EXTENSION] == {}
        assert "io.modelcontextprotocol/tasks" in extensions
        assert "resources" in result["capabilities"]


async def test_anonymous_listing_does_not_open_the_skills(tmp_path: Path) -> None:
    """`auth.anonymous_listing` opens `tools/list` and `prompts/list`; a guide names tools, so the
    skills still need a token in both eras (401, the bearer challenge)."""
    async with asgi_client(dev_settings(tmp_path, auth={"anonymous_listing": True})) as http:
        opened = await http.post("/mcp", json=rpc("initialize", initialize_params()), headers=MCP_HEADERS)
        session = {
            **MCP_HEADERS,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
        await http.post("/mcp", json=rpc("notifications/initialized", message_id=None), headers=session)
        assert (await http.post("/mcp", json=rpc("tools/list", {}, 2), headers=session)).status_code == 200
        refused = [await http.post("/mcp", json=rpc(method, params, 3), headers=session) for method, params in CALLS]
        for method, params in CALLS:
            headers = {k: v for k, v in modern_headers("", method).items() if k != "authorization"}
            refused.append(await http.post("/mcp", json=modern_body(method, params, MODERN_META, 4), headers=headers))
    for response in refused:
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer ")


CALLS = [("skills/list", {}), ("skills/get", {"uri": "skill://mcp-aql/SKILL.md"})]
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "skills-tests", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
