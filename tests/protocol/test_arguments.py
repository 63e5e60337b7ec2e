"""The plain argument check of `tools/call` (corporate §9.4): a shortcut that never changes an answer.

A flat object schema is checked in plain Python; only when that check cannot prove the arguments
valid does jsonschema run, and jsonschema words the error. So the check may say "not sure" as
often as it likes, but must never pass arguments jsonschema refuses.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from aql_mcp.protocol.arguments import compile_check
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import RegisteredTool, Registry, Tool

PLAIN_SCHEMAS: dict[str, dict[str, Any]] = {
    "closed": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "what to echo"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    "typed": {
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "ratio": {"type": ["number", "null"]},
            "mode": {"enum": ["fast", "slow"]},
            "anything": {},
            "flag": {"type": "boolean"},
            "items": {"type": "array"},
            "options": {"type": "object", "title": "Options"},
        },
        "required": ["count"],
    },
    "draft_07": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"count": {"type": "integer"}, "name": {"type": "string", "format": "email"}},
    },
}
OTHER_SCHEMAS: dict[str, dict[str, Any]] = {
    "min_length": {"type": "object", "properties": {"text": {"type": "string", "minLength": 3}}},
    "nested": {"type": "object", "properties": {"o": {"type": "object", "properties": {"x": {"type": "string"}}}}},
    "pattern_properties": {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
    "additional_schema": {"type": "object", "additionalProperties": {"type": "string"}},
    "reference": {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/a"}},
        "$defs": {"a": {"type": "string"}},
    },
    "integer_enum": {"type": "object", "properties": {"n": {"enum": [1, 2]}}},
    "draft_03": {
        "$schema": "http://json-schema.org/draft-03/schema#",
        "type": "object",
        "properties": {"count": {"type": "integer", "required": True}},
    },
}
KEYS = ("text", "count", "ratio", "mode", "anything", "flag", "items", "options", "name", "other")
VALUES = (None, True, False, 0, 7, -1, 1.0, 2.5, 2**70, "", "fast", "slow", "a@b.example", [], [1], {}, {"x": 1})


async def handler(arguments: dict[str, Any], ctx: Context) -> str:
    return ""


def registered(name: str, schema: dict[str, Any]) -> RegisteredTool:
    registry = Registry()
    registry.add_tool(Tool(name, "a tool", handler, schema))
    tool = registry.tool(name)
    assert tool is not None
    return tool


def argument_sets() -> list[dict[str, Any]]:
    """Every key alone with every value, and pairs of keys with a few values each."""
    sets: list[dict[str, Any]] = [{}]
    sets += [{key: value} for key in KEYS for value in VALUES]
    sets += [{a: x, b: y} for a, b in itertools.combinations(KEYS, 2) for x in VALUES[::4] for y in VALUES[1::5]]
    return sets


@pytest.mark.parametrize("name", sorted(PLAIN_SCHEMAS))
def test_the_plain_check_never_passes_arguments_jsonschema_refuses(name: str) -> None:
    tool = registered(f"tool_{name}", PLAIN_SCHEMAS[name])
    check = compile_check(tool.validator)
    assert check is not None
    passed = 0
    for arguments in argument_sets():
        if check(arguments):
            passed += 1
            assert list(tool.validator.iter_errors(arguments)) == [], arguments
    assert passed  # the shortcut is taken for some valid arguments, not only refused


def test_the_plain_check_passes_the_usual_valid_arguments() -> None:
    closed = compile_check(registered("tool_closed", PLAIN_SCHEMAS["closed"]).validator)
    typed = compile_check(registered("tool_typed", PLAIN_SCHEMAS["typed"]).validator)
    assert closed is not None
    assert typed is not None
    assert closed({"text": "bench-echo"})
    assert typed({"count": 3, "ratio": None, "mode": "fast", "anything": [1], "flag": True, "extra": 1})


@pytest.mark.parametrize("name", sorted(OTHER_SCHEMAS))
def test_schemas_with_other_keywords_or_drafts_are_left_to_jsonschema(name: str) -> None:
    assert compile_check(registered(f"tool_{name}", OTHER_SCHEMAS[name]).validator) is None
