import base64
import io
import json
import struct
import wave
import zlib
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator

from aql_mcp.exceptions import CapabilityNotDeclared, ConfigError, InvalidParams, ToolError
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import TOOL_NAME, Prompt, Registry, Resource, ResourceTemplate
from aql_mcp.testing.conformance import PNG_SIGNATURE, plugin

TOOLS = (
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_logging",
    "test_error_handling",
    "test_tool_with_progress",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "json_schema_2020_12_tool",
    "test_reconnection",
    "test_custom_headers",
    "test_update_watched_resource",
    # MCP 2026-07-28 rounds (src/aql_mcp/testing/rounds.py)
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
    "test_missing_capability",
    "test_streaming_elicitation",
    "test_logging_tool",
    "test_trigger_tool_change",
    "test_trigger_prompt_change",
    # The Tasks extension (src/aql_mcp/testing/task_fixtures.py)
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
)
PROMPTS = (
    "test_simple_prompt",
    "test_prompt_with_arguments",
    "test_prompt_with_embedded_resource",
    "test_prompt_with_image",
    "test_input_required_result_prompt",
)
RESOURCES = (
    "test://static-text",
    "test://static-binary",
    "test://watched-resource",
    "test://example-resource",
)
SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "This is a test response from the client"},
}
ELICITED = {"action": "accept", "content": {"username": "testuser", "email": "test@example.com"}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class FakePeer:
    id: str = "s"
    protocol_version: str = "2025-11-25"
    client_capabilities: dict[str, Any] = field(default_factory=lambda: {"sampling": {}, "elicitation": {}})
    log_level: str = "debug"

    async def set_log_level(self, level: str) -> None:
        raise AssertionError(f"fixtures must not change the session's log level ({level})")

    def subscribe(self, uri: str) -> None:
        raise AssertionError(f"fixtures must not subscribe ({uri})")

    def unsubscribe(self, uri: str) -> None:
        raise AssertionError(f"fixtures must not unsubscribe ({uri})")


@dataclass
class RecordingOutbound:
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    notifications: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    closed: int = 0

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        self.notifications.append((method, params))

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for asked in requests.values():
            self.requests.append((asked["method"], asked["params"]))
        return {key: self.answers[asked["method"]] for key, asked in requests.items()}

    def missing_capability(self, capability: str) -> Exception:
        return CapabilityNotDeclared(capability)

    async def close_connection(self) -> None:
        self.closed += 1


@dataclass
class RecordingHub:
    updated: list[str] = field(default_factory=list)

    async def resource_updated(self, uri: str) -> None:
        self.updated.append(uri)


@dataclass
class Harness:
    registry: Registry
    outbound: RecordingOutbound
    hub: RecordingHub
    ctx: Context

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        entry = self.registry.tool(name)
        assert entry is not None
        with anyio.fail_after(2):
            return await entry.tool.handler(arguments or {}, self.ctx)

    def prompt(self, name: str) -> Prompt:
        prompt = self.registry.prompt(name)
        assert prompt is not None
        return prompt

    async def read(self, uri: str) -> list[dict[str, Any]]:
        resolved = self.registry.resolve(uri)
        assert resolved is not None
        served, variables = resolved
        if isinstance(served, ResourceTemplate):
            return await served.reader(uri, variables, self.ctx)
        assert isinstance(served, Resource)
        return await served.reader(uri, self.ctx)


def make_harness(peer: FakePeer | None = None) -> Harness:
    registry = Registry()
    plugin.register(registry)
    outbound = RecordingOutbound(answers={"sampling/createMessage": SAMPLED, "elicitation/create": ELICITED})
    hub = RecordingHub()
    ctx = Context(
        request_id="t",
        message_id=1,
        peer=peer or FakePeer(),
        principal=None,
        outbound=outbound,
        hub=hub,
        progress_token="p",
    )
    return Harness(registry, outbound, hub, ctx)


@pytest.fixture
def harness() -> Harness:
    return make_harness()


def decode_png(data: str) -> bytes:
    raw = base64.b64decode(data)
    assert raw.startswith(PNG_SIGNATURE)
    return raw


def test_plugin_is_named_conformance() -> None:
    assert plugin.name == "conformance"


def test_registers_every_fixture_with_a_description(harness: Harness) -> None:
    tools = {tool.name: tool for tool in harness.registry.tools()}
    prompts = {prompt.name: prompt for prompt in harness.registry.prompts()}
    assert set(tools) == set(TOOLS)
    assert set(prompts) == set(PROMPTS)
    assert {resource.uri for resource in harness.registry.resources()} == set(RESOURCES)
    assert all(tool.description and TOOL_NAME.match(tool.name) for tool in tools.values())
    assert all(prompt.description for prompt in prompts.values())


def test_every_input_schema_is_a_valid_2020_12_object_schema(harness: Harness) -> None:
    for tool in harness.registry.tools():
        Draft202012Validator.check_schema(tool.input_schema)
        assert tool.input_schema["type"] == "object"
        assert tool.to_wire()["inputSchema"] is tool.input_schema


def test_registering_twice_in_one_registry_fails(harness: Harness) -> None:
    with pytest.raises(ConfigError, match="registered by plugin"):
        plugin.register(harness.registry)


def test_json_schema_tool_keeps_2020_12_keywords(harness: Harness) -> None:
    entry = harness.registry.tool("json_schema_2020_12_tool")
    assert entry is not None
    schema = entry.tool.to_wire()["inputSchema"]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "address" in schema["$defs"]
    assert schema["additionalProperties"] is False
    assert schema["allOf"][0]["anyOf"]
    assert {"if", "then", "else"} <= set(schema)
    assert entry.validator.is_valid({"name": "n", "email": "e", "address": {"city": "c"}})
    assert not entry.validator.is_valid({"name": "n"})
    assert not entry.validator.is_valid({"email": "e", "extra": 1})


@pytest.mark.anyio
async def test_json_schema_tool_echoes_its_arguments(harness: Harness) -> None:
    result = await harness.call("json_schema_2020_12_tool", {"name": "n", "email": "e"})
    assert '"email": "e"' in result


def test_custom_headers_tool_mirrors_a_string_an_integer_and_a_boolean(harness: Harness) -> None:
    """The suite's http-custom-header-server-validation needs a string-typed `x-mcp-header` parameter."""
    headers = harness.registry.param_headers("test_custom_headers")
    assert [(p.field, p.path) for p in headers] == [
        ("Mcp-Param-Region", ("region",)),
        ("Mcp-Param-Priority", ("priority",)),
        ("Mcp-Param-Verbose", ("verbose",)),
    ]


@pytest.mark.anyio
async def test_custom_headers_tool_echoes_its_arguments(harness: Harness) -> None:
    assert '"region": "eu"' in await harness.call("test_custom_headers", {"region": "eu"})


@pytest.mark.anyio
async def test_simple_text_returns_non_empty_text(harness: Harness) -> None:
    assert await harness.call("test_simple_text") == "This is a simple text response for testing."


@pytest.mark.anyio
async def test_image_content_is_a_valid_one_pixel_png(harness: Harness) -> None:
    [block] = await harness.call("test_image_content")
    assert block["type"] == "image"
    assert block["mimeType"] == "image/png"
    raw = decode_png(block["data"])
    length, kind = struct.unpack(">I4s", raw[8:16])
    width, height = struct.unpack(">II", raw[16:24])
    assert (length, kind, width, height) == (13, b"IHDR", 1, 1)
    assert struct.unpack(">I", raw[29:33])[0] == zlib.crc32(raw[12:29])
    assert raw.endswith(b"IEND\xaeB`\x82")


@pytest.mark.anyio
async def test_audio_content_is_a_wav_file(harness: Harness) -> None:
    [block] = await harness.call("test_audio_content")
    assert block["type"] == "audio"
    assert block["mimeType"] == "audio/wav"
    raw = base64.b64decode(block["data"])
    assert raw[:4] == b"RIFF"
    assert raw[8:12] == b"WAVE"
    with wave.open(io.BytesIO(raw)) as wav:
        assert wav.getnframes() > 0


@pytest.mark.anyio
async def test_embedded_resource_holds_text_contents(harness: Harness) -> None:
    [block] = await harness.call("test_embedded_resource")
    assert block["type"] == "resource"
    assert block["resource"] == {
        "uri": "test://embedded-resource",
        "mimeType": "text/plain",
        "text": "This is an embedded resource content.",
    }


@pytest.mark.anyio
async def test_multiple_content_types_returns_text_image_and_json_resource(harness: Harness) -> None:
    blocks = await harness.call("test_multiple_content_types")
    assert [block["type"] for block in blocks] == ["text", "image", "resource"]
    decode_png(blocks[1]["data"])
    resource = blocks[2]["resource"]
    assert resource["uri"] == "test://mixed-content-resource"
    assert resource["mimeType"] == "application/json"
    assert json.loads(resource["text"]) == {"test": "data", "value": 123}


@pytest.mark.anyio
async def test_tool_with_logging_sends_three_info_messages(harness: Harness) -> None:
    await harness.call("test_tool_with_logging")
    assert [method for method, _ in harness.outbound.notifications] == ["notifications/message"] * 3
    assert [params["data"] for _, params in harness.outbound.notifications] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    assert {params["level"] for _, params in harness.outbound.notifications} == {"info"}


@pytest.mark.anyio
async def test_tool_with_logging_respects_the_session_level() -> None:
    harness = make_harness(FakePeer(log_level="warning"))
    await harness.call("test_tool_with_logging")
    assert harness.outbound.notifications == []


@pytest.mark.anyio
async def test_error_handling_raises_tool_error(harness: Harness) -> None:
    with pytest.raises(ToolError) as caught:
        await harness.call("test_error_handling")
    assert str(caught.value)


@pytest.mark.anyio
async def test_tool_with_progress_reports_0_50_100_of_100(harness: Harness) -> None:
    await harness.call("test_tool_with_progress")
    sent = harness.outbound.notifications
    assert {method for method, _ in sent} == {"notifications/progress"}
    assert [(p["progressToken"], p["progress"], p["total"]) for _, p in sent] == [
        ("p", 0, 100),
        ("p", 50, 100),
        ("p", 100, 100),
    ]


@pytest.mark.anyio
async def test_sampling_sends_the_prompt_and_returns_the_answer(harness: Harness) -> None:
    result = await harness.call("test_sampling", {"prompt": "Test prompt for sampling"})
    [(method, params)] = harness.outbound.requests
    assert method == "sampling/createMessage"
    assert params == {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Test prompt for sampling"}}],
        "maxTokens": 100,
    }
    assert "This is a test response from the client" in result


@pytest.mark.anyio
async def test_sampling_accepts_a_list_of_content_blocks(harness: Harness) -> None:
    harness.outbound.answers["sampling/createMessage"] = {
        "role": "assistant",
        "content": [{"type": "text", "text": "one"}, {"type": "image", "data": "", "mimeType": "image/png"}],
    }
    assert (await harness.call("test_sampling", {"prompt": "p"})).endswith("one")


@pytest.mark.anyio
@pytest.mark.parametrize("answer", [{"content": {"type": "image"}}, {"content": "text"}, {}])
async def test_sampling_without_text_is_a_tool_error(harness: Harness, answer: dict[str, Any]) -> None:
    harness.outbound.answers["sampling/createMessage"] = answer
    with pytest.raises(ToolError):
        await harness.call("test_sampling", {"prompt": "p"})


@pytest.mark.anyio
async def test_sampling_needs_the_client_capability() -> None:
    harness = make_harness(FakePeer(client_capabilities={}))
    with pytest.raises(CapabilityNotDeclared):
        await harness.call("test_sampling", {"prompt": "p"})
    assert harness.outbound.requests == []


@pytest.mark.anyio
async def test_elicitation_asks_for_username_and_email(harness: Harness) -> None:
    result = await harness.call("test_elicitation", {"message": "Please provide your information"})
    [(method, params)] = harness.outbound.requests
    assert method == "elicitation/create"
    assert params["message"] == "Please provide your information"
    assert params["mode"] == "form"
    schema = params["requestedSchema"]
    assert schema["required"] == ["username", "email"]
    assert {name: prop["type"] for name, prop in schema["properties"].items()} == {
        "username": "string",
        "email": "string",
    }
    assert "action=accept" in result
    assert "testuser" in result


@pytest.mark.anyio
async def test_declined_elicitation_reports_no_content(harness: Harness) -> None:
    harness.outbound.answers["elicitation/create"] = {"action": "decline", "content": {"username": "x"}}
    result = await harness.call("test_elicitation", {"message": "m"})
    assert result.endswith("action=decline, content={}")


@pytest.mark.anyio
async def test_sep1034_schema_has_a_default_for_every_primitive(harness: Harness) -> None:
    await harness.call("test_elicitation_sep1034_defaults")
    properties = harness.outbound.requests[0][1]["requestedSchema"]["properties"]
    assert {name: (prop["type"], prop["default"]) for name, prop in properties.items()} == {
        "name": ("string", "John Doe"),
        "age": ("integer", 30),
        "score": ("number", 95.5),
        "status": ("string", "active"),
        "verified": ("boolean", True),
    }
    assert properties["status"]["enum"] == ["active", "inactive", "pending"]


@pytest.mark.anyio
async def test_sep1330_schema_has_the_five_enum_shapes(harness: Harness) -> None:
    await harness.call("test_elicitation_sep1330_enums")
    schema = harness.outbound.requests[0][1]["requestedSchema"]
    Draft202012Validator.check_schema(schema)
    props = schema["properties"]
    assert props["untitledSingle"]["type"] == "string"
    assert props["untitledSingle"]["enum"]
    assert not {"oneOf", "enumNames"} & set(props["untitledSingle"])
    assert props["titledSingle"]["type"] == "string"
    assert "enum" not in props["titledSingle"]
    assert all(isinstance(o["const"], str) and o["title"] for o in props["titledSingle"]["oneOf"])
    assert len(props["legacyEnum"]["enum"]) == len(props["legacyEnum"]["enumNames"])
    assert props["untitledMulti"]["type"] == "array"
    assert props["untitledMulti"]["items"]["type"] == "string"
    assert props["untitledMulti"]["items"]["enum"]
    assert "anyOf" not in props["untitledMulti"]["items"]
    assert props["titledMulti"]["type"] == "array"
    assert "enum" not in props["titledMulti"]["items"]
    assert all(isinstance(o["const"], str) and o["title"] for o in props["titledMulti"]["items"]["anyOf"])


@pytest.mark.anyio
async def test_reconnection_closes_the_connection_then_answers(harness: Harness) -> None:
    result = await harness.call("test_reconnection")
    assert harness.outbound.closed == 1
    assert result


@pytest.mark.anyio
async def test_static_resources_read_text_and_png_blob(harness: Harness) -> None:
    [text] = await harness.read("test://static-text")
    assert text == {
        "uri": "test://static-text",
        "mimeType": "text/plain",
        "text": "This is the content of the static text resource.",
    }
    [blob] = await harness.read("test://static-binary")
    assert blob["uri"] == "test://static-binary"
    assert blob["mimeType"] == "image/png"
    decode_png(blob["blob"])
    [example] = await harness.read("test://example-resource")
    assert example["text"]


@pytest.mark.anyio
async def test_template_reads_json_with_the_id(harness: Harness) -> None:
    [contents] = await harness.read("test://template/123/data")
    assert contents["uri"] == "test://template/123/data"
    assert contents["mimeType"] == "application/json"
    assert json.loads(contents["text"]) == {"id": "123", "templateTest": True, "data": "Data for ID: 123"}


@pytest.mark.anyio
async def test_template_completes_ids_by_prefix(harness: Harness) -> None:
    template = harness.registry.template("test://template/{id}/data")
    assert template is not None
    assert await template.complete["id"]("4", {}) == ["456"]


@pytest.mark.anyio
async def test_updating_the_watched_resource_notifies_and_changes_it(harness: Harness) -> None:
    [before] = await harness.read("test://watched-resource")
    await harness.call("test_update_watched_resource")
    [after] = await harness.read("test://watched-resource")
    assert harness.hub.updated == ["test://watched-resource"]
    assert before["text"] != after["text"]


@pytest.mark.anyio
async def test_watched_resource_state_is_per_registry(harness: Harness) -> None:
    await harness.call("test_update_watched_resource")
    [fresh] = await make_harness().read("test://watched-resource")
    [touched] = await harness.read("test://watched-resource")
    assert fresh["text"] != touched["text"]


@pytest.mark.anyio
async def test_simple_prompt_has_a_user_text_message(harness: Harness) -> None:
    messages = await harness.prompt("test_simple_prompt").handler({}, harness.ctx)
    assert messages
    assert all(m["role"] == "user" and m["content"]["type"] == "text" for m in messages)


@pytest.mark.anyio
async def test_prompt_with_arguments_uses_both_values(harness: Harness) -> None:
    prompt = harness.prompt("test_prompt_with_arguments")
    assert [(a.name, a.required) for a in prompt.arguments] == [("arg1", True), ("arg2", True)]
    messages = await prompt.handler({"arg1": "testValue1", "arg2": "testValue2"}, harness.ctx)
    assert "testValue1" in json.dumps(messages)
    assert "testValue2" in json.dumps(messages)


@pytest.mark.anyio
async def test_prompt_without_a_required_argument_is_invalid_params(harness: Harness) -> None:
    with pytest.raises(InvalidParams):
        await harness.prompt("test_prompt_with_arguments").handler({"arg1": "x"}, harness.ctx)


@pytest.mark.anyio
async def test_arg1_completion_filters_by_prefix(harness: Harness) -> None:
    complete = harness.prompt("test_prompt_with_arguments").arguments[0].complete
    assert complete is not None
    values = await complete("test", {})
    assert values
    assert all(value.startswith("test") for value in values)
    assert await complete("zzz", {}) == []


@pytest.mark.anyio
async def test_prompt_with_embedded_resource_embeds_the_uri(harness: Harness) -> None:
    prompt = harness.prompt("test_prompt_with_embedded_resource")
    messages = await prompt.handler({"resourceUri": "test://example-resource"}, harness.ctx)
    [resource] = [m["content"] for m in messages if m["content"]["type"] == "resource"]
    assert resource["resource"]["uri"] == "test://example-resource"


@pytest.mark.anyio
async def test_prompt_with_image_has_a_png(harness: Harness) -> None:
    messages = await harness.prompt("test_prompt_with_image").handler({}, harness.ctx)
    [picture] = [m["content"] for m in messages if m["content"]["type"] == "image"]
    assert picture["mimeType"] == "image/png"
    decode_png(picture["data"])
