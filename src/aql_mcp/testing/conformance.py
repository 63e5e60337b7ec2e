"""The fixtures the official MCP conformance suite (0.1.16) calls on a server under test.

The suite's server scenarios call tools, prompts and resources by fixed names (the "everything
server" set of the suite's `src/scenarios/server/*.ts`). This plugin implements them for
real on the service's own seams: logging, progress, sampling and elicitation go through the
`Context`, errors are `ToolError`s, media are genuine PNG/WAV bytes. Load it only in test and
conformance deployments (`aql_mcp.testing.conformance:plugin`).
"""

from __future__ import annotations

import io
import json
import struct
import wave
import zlib
from collections.abc import Mapping
from typing import Any

import anyio

from aql_mcp.exceptions import InvalidParams, ToolError
from aql_mcp.protocol.content import Content, audio, blob_contents, embedded, image, message, text, text_contents
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Prompt, PromptArgument, Registry, Resource, ResourceTemplate, Tool
from aql_mcp.testing import rounds, task_fixtures
from aql_mcp.testing.list_changes import register_list_changes
from aql_mcp.testing.schemas import (
    custom_headers_schema,
    defaults_schema,
    enums_schema,
    json_schema_2020_12,
    object_schema,
    user_schema,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
STEP_DELAY = 0.05  # the suite's reference servers space log and progress messages ~50 ms apart
RECONNECT_GRACE = 0.2  # time for the client to resume with GET after the connection closes (SEP-1699)
LOGGER = "conformance"
ARG1_SUGGESTIONS = ("test", "testValue1", "testing", "value1", "value2")
TEMPLATE_IDS = ("123", "456", "789")


def build_pixel_png(rgba: tuple[int, int, int, int]) -> bytes:
    """A 1x1 8-bit RGBA PNG (PNG spec §11.2.2 IHDR, §11.2.4 IDAT: one scanline, filter byte 0)."""
    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    scanline = b"\x00" + bytes(rgba)
    return b"".join(
        (
            PNG_SIGNATURE,
            _png_chunk(b"IHDR", header),
            _png_chunk(b"IDAT", zlib.compress(scanline)),
            _png_chunk(b"IEND", b""),
        )
    )


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def build_silent_wav(frames: int = 8, rate: int = 8000) -> bytes:
    """A few frames of 16-bit mono silence in a RIFF/WAVE container."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\x00\x00" * frames)
    return buffer.getvalue()


PIXEL_PNG = build_pixel_png((255, 0, 0, 255))
SILENT_WAV = build_silent_wav()


# --- tools -------------------------------------------------------------------------------------


async def simple_text(_arguments: dict[str, Any], _ctx: Context) -> str:
    return "This is a simple text response for testing."


async def image_content(_arguments: dict[str, Any], _ctx: Context) -> list[Content]:
    return [image(PIXEL_PNG, "image/png")]


async def audio_content(_arguments: dict[str, Any], _ctx: Context) -> list[Content]:
    return [audio(SILENT_WAV, "audio/wav")]


async def embedded_resource(_arguments: dict[str, Any], _ctx: Context) -> list[Content]:
    return [embedded(text_contents("test://embedded-resource", "This is an embedded resource content."))]


async def mixed_content(_arguments: dict[str, Any], _ctx: Context) -> list[Content]:
    body = json.dumps({"test": "data", "value": 123})
    return [
        text("Multiple content types test:"),
        image(PIXEL_PNG, "image/png"),
        embedded(text_contents("test://mixed-content-resource", body, "application/json")),
    ]


async def tool_with_logging(_arguments: dict[str, Any], ctx: Context) -> str:
    for step, line in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
        if step:
            await anyio.sleep(STEP_DELAY)
        await ctx.log("info", line, LOGGER)
    return "Tool with logging executed successfully"


async def tool_with_progress(_arguments: dict[str, Any], ctx: Context) -> str:
    for step, value in enumerate((0, 50, 100)):
        if step:
            await anyio.sleep(STEP_DELAY)
        await ctx.progress(value, 100, f"Completed step {value} of 100")
    return "Reported progress 0, 50 and 100 of 100"


async def error_handling(_arguments: dict[str, Any], _ctx: Context) -> str:
    raise ToolError("This tool intentionally returns an error for testing")


async def sampling(arguments: dict[str, Any], ctx: Context) -> str:
    prompt = {"type": "text", "text": arguments["prompt"]}
    result = await ctx.sample({"messages": [{"role": "user", "content": prompt}], "maxTokens": 100})
    return f"LLM response: {sampled_text(result)}"


def sampled_text(result: Mapping[str, Any]) -> str:
    """The text of a sampling answer: `content` is one block, or a list since 2025-11-25 (tool use)."""
    blocks = result.get("content")
    if isinstance(blocks, dict):
        blocks = [blocks]
    if not isinstance(blocks, list):
        blocks = []
    texts = [block["text"] for block in blocks if isinstance(block, dict) and block.get("type") == "text"]
    if not texts:
        raise ToolError("The client's sampling answer held no text")
    return "\n".join(texts)


async def elicitation(arguments: dict[str, Any], ctx: Context) -> str:
    return describe_elicitation(await ctx.elicit(arguments["message"], user_schema()))


async def elicitation_defaults(_arguments: dict[str, Any], ctx: Context) -> str:
    return describe_elicitation(await ctx.elicit("Please review the fields; each has a default", defaults_schema()))


async def elicitation_enums(_arguments: dict[str, Any], ctx: Context) -> str:
    return describe_elicitation(await ctx.elicit("Please choose from each kind of enum", enums_schema()))


def describe_elicitation(result: Mapping[str, Any]) -> str:
    """The wording of the suite's reference servers; content only comes with `accept`."""
    content = result.get("content") if result.get("action") == "accept" else None
    return f"Elicitation completed: action={result.get('action')}, content={json.dumps(content or {})}"


async def json_schema_tool(arguments: dict[str, Any], _ctx: Context) -> str:
    return f"JSON Schema 2020-12 tool called with: {json.dumps(arguments, sort_keys=True)}"


async def custom_headers(arguments: dict[str, Any], _ctx: Context) -> str:
    return f"Custom headers tool called with: {json.dumps(arguments, sort_keys=True)}"


async def reconnection(_arguments: dict[str, Any], ctx: Context) -> str:
    # The transport ends the POST connection after an event with an id; the result written later
    # is replayed on the client's GET with Last-Event-ID (MCP 2025-11-25 transports, Resumability).
    await ctx.close_connection()
    await anyio.sleep(RECONNECT_GRACE)
    return "Reconnection test completed"


def _tools() -> list[Tool]:
    prompt_arg = {"prompt": {"type": "string", "description": "The prompt to send to the client's model"}}
    message_arg = {"message": {"type": "string", "description": "The message to show the user"}}
    prompt_schema = object_schema(prompt_arg, ["prompt"])
    message_schema = object_schema(message_arg, ["message"])
    dialect = json_schema_2020_12()
    headers = custom_headers_schema()
    return [
        Tool("test_simple_text", "Returns one text block", simple_text),
        Tool("test_image_content", "Returns a 1x1 PNG image block", image_content),
        Tool("test_audio_content", "Returns a short silent WAV audio block", audio_content),
        Tool("test_embedded_resource", "Returns an embedded text resource", embedded_resource),
        Tool("test_multiple_content_types", "Returns text, image and resource blocks", mixed_content),
        Tool("test_tool_with_logging", "Sends three info log messages while it runs", tool_with_logging),
        Tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100", tool_with_progress),
        Tool("test_error_handling", "Always fails with an isError result", error_handling),
        Tool("test_sampling", "Asks the client's model to answer a prompt", sampling, prompt_schema),
        Tool("test_elicitation", "Asks the user for a username and email", elicitation, message_schema),
        Tool("test_elicitation_sep1034_defaults", "Elicits primitives with defaults", elicitation_defaults),
        Tool("test_elicitation_sep1330_enums", "Elicits the five enum schema variants", elicitation_enums),
        Tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json_schema_tool, dialect),
        Tool("test_reconnection", "Closes its connection mid-call, answers after resumption", reconnection),
        Tool("test_custom_headers", "Mirrors some arguments into Mcp-Param headers", custom_headers, headers),
    ]


# --- resources ---------------------------------------------------------------------------------


class WatchedResource:
    """`test://watched-resource`: touching it bumps its revision and notifies its subscribers."""

    uri = "test://watched-resource"

    def __init__(self) -> None:
        self.revision = 0

    async def read(self, uri: str, _ctx: Context) -> list[Content]:
        return [text_contents(uri, f"Watched resource content, revision {self.revision}")]

    async def touch(self, _arguments: dict[str, Any], ctx: Context) -> str:
        self.revision += 1
        await ctx.resource_updated(self.uri)
        return f"{self.uri} is now at revision {self.revision}"


async def read_static_text(uri: str, _ctx: Context) -> list[Content]:
    return [text_contents(uri, "This is the content of the static text resource.")]


async def read_static_binary(uri: str, _ctx: Context) -> list[Content]:
    return [blob_contents(uri, PIXEL_PNG, "image/png")]


async def read_example(uri: str, _ctx: Context) -> list[Content]:
    return [text_contents(uri, "This is an example resource for prompts to embed.")]


async def read_template(uri: str, variables: dict[str, str], _ctx: Context) -> list[Content]:
    item_id = variables["id"]
    data = {"id": item_id, "templateTest": True, "data": f"Data for ID: {item_id}"}
    body = json.dumps(data, separators=(",", ":"))
    return [text_contents(uri, body, "application/json")]


async def complete_template_id(prefix: str, _context: Mapping[str, str]) -> list[str]:
    return [value for value in TEMPLATE_IDS if value.startswith(prefix)]


def _resources(watched: WatchedResource) -> list[Resource]:
    return [
        Resource("test://static-text", "static-text", read_static_text, "Static text", "text/plain"),
        Resource("test://static-binary", "static-binary", read_static_binary, "A 1x1 PNG", "image/png"),
        Resource(watched.uri, "watched-resource", watched.read, "Changes on each update", "text/plain"),
        Resource("test://example-resource", "example-resource", read_example, "Text to embed", "text/plain"),
    ]


# --- prompts -----------------------------------------------------------------------------------


def required_argument(arguments: Mapping[str, str], name: str) -> str:
    value = arguments.get(name)
    if value is None:
        raise InvalidParams(f"Invalid params: prompt argument {name!r} is required")
    return value


async def simple_prompt(_arguments: dict[str, str], _ctx: Context) -> list[Content]:
    return [message("user", text("This is a simple prompt for testing."))]


async def prompt_with_arguments(arguments: dict[str, str], _ctx: Context) -> list[Content]:
    arg1, arg2 = required_argument(arguments, "arg1"), required_argument(arguments, "arg2")
    return [message("user", text(f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"))]


async def embedding(arguments: dict[str, str], _ctx: Context) -> list[Content]:
    uri = required_argument(arguments, "resourceUri")
    return [
        message("user", embedded(text_contents(uri, "Embedded resource content for testing."))),
        message("user", text("Please process the embedded resource above.")),
    ]


async def prompt_with_image(_arguments: dict[str, str], _ctx: Context) -> list[Content]:
    return [
        message("user", image(PIXEL_PNG, "image/png")),
        message("user", text("Please analyze the image above.")),
    ]


async def complete_arg1(prefix: str, _context: Mapping[str, str]) -> list[str]:
    return [value for value in ARG1_SUGGESTIONS if value.startswith(prefix)]


def _prompts() -> list[Prompt]:
    two_args = (
        PromptArgument("arg1", "First test argument", required=True, complete=complete_arg1),
        PromptArgument("arg2", "Second test argument", required=True),
    )
    resource_uri = (PromptArgument("resourceUri", "URI of the resource to embed", required=True),)
    return [
        Prompt("test_simple_prompt", "A prompt without arguments", simple_prompt),
        Prompt("test_prompt_with_arguments", "A prompt with two arguments", prompt_with_arguments, two_args),
        Prompt("test_prompt_with_embedded_resource", "A prompt that embeds a resource", embedding, resource_uri),
        Prompt("test_prompt_with_image", "A prompt that includes an image", prompt_with_image),
    ]


class ConformancePlugin:
    """Registers the conformance fixtures; each registry gets its own watched-resource state."""

    name = "conformance"

    def register(self, registry: Registry) -> None:
        watched = WatchedResource()
        for tool in _tools():
            registry.add_tool(tool)
        registry.add_tool(Tool("test_update_watched_resource", "Changes the watched resource", watched.touch))
        for resource in _resources(watched):
            registry.add_resource(resource)
        registry.add_resource_template(
            ResourceTemplate(
                "test://template/{id}/data",
                "template",
                read_template,
                "JSON data for an id",
                "application/json",
                complete={"id": complete_template_id},
            )
        )
        for prompt in _prompts():
            registry.add_prompt(prompt)
        rounds.register(registry)
        register_list_changes(registry)
        task_fixtures.register(registry)


plugin = ConformancePlugin()
