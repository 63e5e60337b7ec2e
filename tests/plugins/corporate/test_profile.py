import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp.exceptions import ConfigError
from aql_mcp.plugin_host.contracts import Plugin
from aql_mcp.plugins.corporate.agent_guide import BRIEF_LIMIT, example_arguments
from aql_mcp.plugins.corporate.profile import CorporatePlugin, CorporateProfile, deprecated
from aql_mcp.protocol.content import Content
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Registry, Resource, Tool, ToolOutput
from aql_mcp.settings import Settings
from aql_mcp.testing.conformance import plugin as conformance_plugin
from tests.support.asgi import CONFORMANCE, dev_settings, open_session, rpc

SERVICE = "aql-mcp"
README = "# aql-mcp\n\nThe README, mirrored as `doc://readme`.\n"
MIME_TYPES = {
    f"{SERVICE}://agent/brief": "text/markdown",
    f"{SERVICE}://agent/prompt": "text/markdown",
    "use://auth": "application/json",
    "use://http-headers": "application/json",
    "project://version": "application/json",
    "doc://readme": "text/markdown",
}
HEADERS_READ = (
    "Authorization",
    "MCP-Session-Id",
    "MCP-Protocol-Version",
    "Accept",
    "Content-Type",
    "Last-Event-ID",
    "Origin",
    "Host",
    "X-Request-Id",
    "traceparent",
    "tracestate",
)
HEADERS_WRITTEN = (
    "MCP-Session-Id",
    "X-Request-Id",
    "WWW-Authenticate",
    "Retry-After",
    "X-Accel-Buffering",
    "Access-Control-Allow-Origin",
)
CLAIMS = ("iss", "aud", "exp", "nbf", "iat", "sub", "scope", "scp")
JSON_BLOCK = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


def profile(**changes: Any) -> CorporateProfile:
    values: dict[str, Any] = {
        "service": SERVICE,
        "version": "1.2.3",
        "issuer": "http://127.0.0.1:8000",
        "audience": "http://127.0.0.1:8000/mcp",
        "auth_mode": "jwt-dev-issuer",
        "scopes_used": ("mcp", "records:write"),
        "readme_text": README,
    }
    return CorporateProfile(**{**values, **changes})


def plugin(settings: object = None) -> CorporatePlugin:
    """What the loader calls for `tests.plugins.corporate.test_profile:plugin` (a factory, not a plugin)."""
    return CorporatePlugin(profile())


class Silent:
    """Outbound and hub for a context whose handler must not talk back."""

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        raise AssertionError(f"unexpected notification {method}")

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        raise AssertionError(f"unexpected question ({sorted(requests)})")

    def missing_capability(self, capability: str) -> Exception:
        raise AssertionError(f"unexpected question ({capability})")

    async def close_connection(self) -> None:
        raise AssertionError("unexpected close")

    async def resource_updated(self, uri: str) -> None:
        raise AssertionError("unexpected update")


def context() -> Context:
    return Context(request_id="t", message_id=1, peer=None, principal=None, outbound=Silent(), hub=Silent())


async def answer(arguments: dict[str, Any], ctx: Context) -> ToolOutput:
    return "ok"


def registry_with(corporate: CorporatePlugin | None = None, *, fixtures: bool = True) -> Registry:
    registry = Registry()
    if fixtures:
        registry.plugin = "conformance"
        conformance_plugin.register(registry)
    registry.plugin = "corporate"
    (corporate or plugin()).register(registry)
    return registry


async def read(registry: Registry, uri: str) -> list[Content]:
    resource = registry.resolve(uri)
    assert resource is not None
    served, _ = resource
    assert isinstance(served, Resource)
    return await served.reader(uri, context())


async def read_text(registry: Registry, uri: str) -> str:
    [contents] = await read(registry, uri)
    return str(contents["text"])


async def prompt_text(registry: Registry, name: str) -> str:
    prompt = registry.prompt(name)
    assert prompt is not None
    [message] = await prompt.handler({}, context())
    assert message["role"] == "user"
    assert message["content"]["type"] == "text"
    return str(message["content"]["text"])


def tool_names(registry: Registry) -> list[str]:
    return [tool.name for tool in registry.tools()]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- the plugin on its own ----------------------------------------------------------------------


def test_the_plugin_is_named_corporate_and_is_a_plugin() -> None:
    assert CorporatePlugin.name == "corporate"
    assert isinstance(plugin(), Plugin)


def test_registers_the_two_avatar_prompts_and_the_six_resources() -> None:
    registry = registry_with(fixtures=False)
    assert {prompt.name for prompt in registry.prompts()} == {"agent_brief", "agent_prompt"}
    resources = {resource.uri: resource for resource in registry.resources()}
    assert set(resources) == set(MIME_TYPES)
    for uri, resource in resources.items():
        assert resource.to_wire()["mimeType"] == MIME_TYPES[uri]
        assert resource.name
        assert resource.description
    assert all(prompt.description for prompt in registry.prompts())


def test_the_service_scheme_follows_the_profile_service_name() -> None:
    """Corporate §11.1: `<service-name>://`, and no other own scheme."""
    registry = registry_with(CorporatePlugin(profile(service="staff")), fixtures=False)
    schemes = {resource.uri.split("://", 1)[0] for resource in registry.resources()}
    assert schemes == {"staff", "use", "project", "doc"}
    assert registry.resolve("staff://agent/brief") is not None
    assert registry.resolve(f"{SERVICE}://agent/brief") is None


def test_registering_twice_in_one_registry_fails_naming_the_plugin() -> None:
    registry = registry_with(fixtures=False)
    with pytest.raises(ConfigError, match="corporate"):
        plugin().register(registry)


@pytest.mark.anyio
@pytest.mark.parametrize("uri", sorted(MIME_TYPES))
async def test_every_resource_reads_as_text_with_its_uri_and_mime_type(uri: str) -> None:
    """Corporate §11.4: each content item has `uri`, `mimeType` and `text` (or `blob`)."""
    [contents] = await read(registry_with(), uri)
    assert contents["uri"] == uri
    assert contents["mimeType"] == MIME_TYPES[uri]
    assert isinstance(contents["text"], str)
    assert contents["text"]
    assert "blob" not in contents


@pytest.mark.anyio
async def test_auth_resource_describes_scheme_issuer_audience_claims_scopes_and_refusals() -> None:
    document = json.loads(await read_text(registry_with(), "use://auth"))
    assert document["scheme"] == "Bearer"
    assert document["issuer"] == "http://127.0.0.1:8000"
    assert document["audience"] == "http://127.0.0.1:8000/mcp"
    assert set(CLAIMS) <= set(document["claims"])
    assert document["scopes"] == ["mcp", "records:write"]
    assert len(document["tokenKinds"]) == 1
    refusals = document["refusals"]
    places = " ".join(refusal["where"] for refusal in refusals)
    assert all(place in places for place in ("HTTP 401", "HTTP 403", "HTTP 503", "in-band"))
    assert {r.get("jsonrpcCode") for r in refusals} <= {-32000, -32006, None}


@pytest.mark.anyio
async def test_auth_resource_lists_one_token_kind_per_configured_mode() -> None:
    registry = registry_with(CorporatePlugin(profile(auth_mode="jwt-jwks+opaque")), fixtures=False)
    document = json.loads(await read_text(registry, "use://auth"))
    assert document["mode"] == "jwt-jwks+opaque"
    assert len(document["tokenKinds"]) == 2


@pytest.mark.anyio
async def test_http_headers_resource_describes_every_header_read_and_written() -> None:
    """Corporate §11.2: `use://http-headers` MUST exist when the service uses non-standard headers."""
    document = json.loads(await read_text(registry_with(), "use://http-headers"))
    read_names = [entry["name"] for entry in document["reads"]]
    written_names = [entry["name"] for entry in document["writes"]]
    assert set(HEADERS_READ) <= set(read_names)
    assert set(HEADERS_WRITTEN) <= set(written_names)
    assert len(read_names) == len(set(read_names))
    assert all(isinstance(e["description"], str) and e["description"] for e in document["reads"] + document["writes"])


@pytest.mark.anyio
async def test_version_resource_is_the_name_and_version() -> None:
    document = json.loads(await read_text(registry_with(), "project://version"))
    assert document == {"name": SERVICE, "version": "1.2.3"}


@pytest.mark.anyio
async def test_readme_resource_is_the_readme_text() -> None:
    assert await read_text(registry_with(), "doc://readme") == README


@pytest.mark.anyio
async def test_agent_brief_is_at_most_2_kb_and_names_every_tool() -> None:
    """Corporate §10.3: the brief SHOULD NOT exceed 2 KB."""
    registry = registry_with()
    brief = await prompt_text(registry, "agent_brief")
    assert len(brief.encode("utf-8")) <= BRIEF_LIMIT
    for name in tool_names(registry):
        assert f"`{name}`" in brief


@pytest.mark.anyio
async def test_agent_brief_shortens_descriptions_to_fit_many_tools_with_long_multibyte_descriptions() -> None:
    registry = registry_with(fixtures=False)
    for index in range(30):
        registry.add_tool(Tool(f"tool_{index:02d}", "Überprüft café records — " * 20, answer))
    brief = await prompt_text(registry, "agent_brief")
    assert len(brief.encode("utf-8")) <= BRIEF_LIMIT
    assert all(f"`{name}`" in brief for name in tool_names(registry))


@pytest.mark.anyio
async def test_agent_brief_counts_the_tools_that_do_not_fit_when_names_alone_exceed_2_kb() -> None:
    registry = registry_with(fixtures=False)
    for index in range(300):
        registry.add_tool(Tool(f"a_rather_long_tool_name_{index:03d}", "Does one thing.", answer))
    brief = await prompt_text(registry, "agent_brief")
    assert len(brief.encode("utf-8")) <= BRIEF_LIMIT
    shown = sum(f"`{name}`" in brief for name in tool_names(registry))
    assert 0 < shown < 300
    assert str(300 - shown) in brief


@pytest.mark.anyio
async def test_the_brief_and_prompt_follow_tools_added_and_removed_after_registration() -> None:
    registry = registry_with()
    registry.add_tool(Tool("late_tool", "Registered after the corporate plugin.", answer))
    assert "`late_tool`" in await prompt_text(registry, "agent_brief")
    assert "`late_tool`" in await prompt_text(registry, "agent_prompt")
    registry.remove_tool("late_tool")
    assert "late_tool" not in await prompt_text(registry, "agent_brief")
    assert "late_tool" not in await read_text(registry, f"{SERVICE}://agent/prompt")


@pytest.mark.anyio
async def test_agent_prompt_names_every_tool_prompt_and_resource() -> None:
    registry = registry_with()
    text = await prompt_text(registry, "agent_prompt")
    for name in tool_names(registry):
        assert f"`{name}`" in text
    for prompt in registry.prompts():
        assert f"`{prompt.name}`" in text
    for resource in registry.resources():
        assert f"`{resource.uri}`" in text
    for template in registry.templates():
        assert f"`{template.uri_template}`" in text


@pytest.mark.anyio
async def test_agent_prompt_lists_each_tools_parameters() -> None:
    registry = registry_with()
    text = await prompt_text(registry, "agent_prompt")
    section = text.split("### `test_sampling`", 1)[1].split("###", 1)[0]
    assert "`prompt` (string, required)" in section


@pytest.mark.anyio
async def test_agent_prompt_example_is_a_valid_tools_call_of_a_registered_tool() -> None:
    """Corporate §10.4: examples SHOULD be included; this one must be callable as written."""
    registry = registry_with(fixtures=False)
    schema = {
        "type": "object",
        "properties": {
            "collection": {"type": "string", "description": "Collection name"},
            "limit": {"type": "integer", "default": 10},
            "order": {"type": "string", "enum": ["asc", "desc"]},
        },
        "required": ["collection", "limit", "order"],
        "additionalProperties": False,
    }
    registry.add_tool(Tool("list_records", "Lists records.", answer, schema, annotations={"readOnlyHint": True}))
    blocks = JSON_BLOCK.findall(await prompt_text(registry, "agent_prompt"))
    request = json.loads(blocks[0])
    assert request["method"] == "tools/call"
    entry = registry.tool(request["params"]["name"])
    assert entry is not None
    assert entry.validator.is_valid(request["params"]["arguments"])


@pytest.mark.anyio
async def test_agent_prompt_shows_array_item_types_a_tools_guide_and_prefers_a_schema_example() -> None:
    """Corporate §10.4: each tool's parameters with their real types, and an example that works as written."""
    registry = registry_with(fixtures=False)
    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"type": "string"}, "description": "Tags."}},
        "required": ["tags"],
        "examples": [{"tags": ["a"]}],
    }
    registry.add_tool(Tool("plain_read", "Reads.", answer, annotations={"readOnlyHint": True}))
    registry.add_tool(
        Tool("tagged", "Tags.", answer, schema, annotations={"readOnlyHint": True}, guide=lambda: "Guide text.")
    )
    text = await prompt_text(registry, "agent_prompt")
    section = text.split("### `tagged`", 1)[1].split("###", 1)[0]
    assert "`tags` (array of string, required)" in section
    assert "Guide text." in section
    request = json.loads(JSON_BLOCK.findall(text)[0])
    assert request["params"] == {"name": "tagged", "arguments": {"tags": ["a"]}}


def test_example_arguments_fill_required_parameters_with_values_of_the_right_type() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "flag": {"type": ["boolean", "null"]},
            "tags": {"type": "array"},
            "meta": {"type": "object"},
            "kind": {"const": "fixed"},
            "optional": {"type": "string"},
        },
        "required": ["name", "count", "ratio", "flag", "tags", "meta", "kind"],
    }
    arguments = example_arguments(schema)
    assert set(arguments) == set(schema["required"])
    assert isinstance(arguments["name"], str)
    assert isinstance(arguments["count"], int)
    assert isinstance(arguments["ratio"], float)
    assert arguments["flag"] is True
    assert (arguments["tags"], arguments["meta"], arguments["kind"]) == ([], {}, "fixed")
    assert example_arguments({"type": "object"}) == {}


@pytest.mark.anyio
async def test_the_mirror_resources_equal_the_prompts() -> None:
    """Corporate §11.2: `<service>://agent/brief` and `/prompt` mirror the prompts."""
    registry = registry_with()
    assert await read_text(registry, f"{SERVICE}://agent/brief") == await prompt_text(registry, "agent_brief")
    assert await read_text(registry, f"{SERVICE}://agent/prompt") == await prompt_text(registry, "agent_prompt")


@pytest.mark.anyio
async def test_operator_overrides_replace_the_generated_texts_in_prompts_and_mirrors() -> None:
    corporate = CorporatePlugin(profile(brief_override="Our brief.", prompt_override="Our prompt."))
    registry = registry_with(corporate)
    assert await prompt_text(registry, "agent_brief") == "Our brief."
    assert await prompt_text(registry, "agent_prompt") == "Our prompt."
    assert await read_text(registry, f"{SERVICE}://agent/brief") == "Our brief."
    assert await read_text(registry, f"{SERVICE}://agent/prompt") == "Our prompt."


def test_deprecated_prefixes_the_description_with_its_deadline() -> None:
    """Corporate §17.2: a `[DEPRECATED]` prefix and a support deadline."""
    assert deprecated("Lists records.", deadline="2026-09-01") == "[DEPRECATED until 2026-09-01] Lists records."


@pytest.mark.anyio
async def test_the_brief_marks_deprecated_and_read_only_tools() -> None:
    registry = registry_with(fixtures=False)
    registry.add_tool(Tool("old_list", deprecated("Lists records.", deadline="2026-09-01"), answer))
    registry.add_tool(Tool("read_record", "Reads a record.", answer, annotations={"readOnlyHint": True}))
    brief = await prompt_text(registry, "agent_brief")
    [old_line] = [line for line in brief.splitlines() if "`old_list`" in line]
    [read_line] = [line for line in brief.splitlines() if "`read_record`" in line]
    assert "2026-09-01" in old_line
    assert "read-only" in read_line


# --- through the app, in process ------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return dev_settings(
        tmp_path,
        server={"plugins": [CONFORMANCE, "tests.plugins.corporate.test_profile:plugin"], "builtin_plugins": []},
    )


async def call(client: httpx.AsyncClient, session: dict[str, str], method: str, params: dict[str, Any]) -> Any:
    response = await client.post("/mcp", json=rpc(method, params), headers=session)
    assert response.status_code == 200, response.text
    return response.json()["result"]


@pytest.mark.anyio
async def test_resources_read_through_the_app_returns_uri_mime_type_and_text(
    client: httpx.AsyncClient, token: str
) -> None:
    """Corporate §11.4 on the wire: `result.contents[]` with `uri`, `mimeType`, `text`."""
    session = await open_session(client, token)
    listed = {r["uri"]: r for r in (await call(client, session, "resources/list", {}))["resources"]}
    for uri, mime_type in MIME_TYPES.items():
        assert listed[uri]["mimeType"] == mime_type
        [contents] = (await call(client, session, "resources/read", {"uri": uri}))["contents"]
        assert (contents["uri"], contents["mimeType"]) == (uri, mime_type)
        assert isinstance(contents["text"], str)
        if mime_type == "application/json":
            assert isinstance(json.loads(contents["text"]), dict)


@pytest.mark.anyio
async def test_prompts_through_the_app_name_every_tool_served_and_the_brief_fits_2_kb(
    client: httpx.AsyncClient, token: str
) -> None:
    session = await open_session(client, token)
    served = [tool["name"] for tool in (await call(client, session, "tools/list", {}))["tools"]]
    brief = await call(client, session, "prompts/get", {"name": "agent_brief"})
    prompt = await call(client, session, "prompts/get", {"name": "agent_prompt"})
    brief_text = brief["messages"][0]["content"]["text"]
    prompt_text = prompt["messages"][0]["content"]["text"]
    assert len(brief_text.encode("utf-8")) <= BRIEF_LIMIT
    assert served
    for name in served:
        assert f"`{name}`" in brief_text
        assert f"`{name}`" in prompt_text
