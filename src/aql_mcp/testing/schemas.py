"""The input and elicitation schemas of the conformance fixtures (conformance.py): functions, so
every caller gets its own dict, each shaped as the official suite's scenario asks."""

from __future__ import annotations

from typing import Any


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def json_schema_2020_12() -> dict[str, Any]:
    """The suite's expected inputSchema (SEP-1613 keywords, plus the SEP-2106 vocabulary it checks later)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": False,
    }


def user_schema() -> dict[str, Any]:
    """What `test_elicitation` asks for (conformance scenario tools-call-elicitation)."""
    return {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "Your username"},
            "email": {"type": "string", "description": "Your email address"},
        },
        "required": ["username", "email"],
    }


def defaults_schema() -> dict[str, Any]:
    """One field per primitive type, each with a default (SEP-1034)."""
    return {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }


def enums_schema() -> dict[str, Any]:
    """The five enum shapes of SEP-1330 (MCP 2025-11-25 client/elicitation, Enum Schema)."""
    options = ["option1", "option2", "option3"]
    titled_single = [{"const": f"value{n}", "title": f"{word} Option"} for n, word in _ordinals()]
    titled_multi = [{"const": f"value{n}", "title": f"{word} Choice"} for n, word in _ordinals()]
    return {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Select one option", "enum": options},
            "titledSingle": {
                "type": "string",
                "description": "Select one titled option",
                "oneOf": titled_single,
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy enumNames)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select several options",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": list(options)},
            },
            "titledMulti": {
                "type": "array",
                "description": "Select several titled options",
                "minItems": 1,
                "maxItems": 3,
                "items": {"anyOf": titled_multi},
            },
        },
        "required": [],
    }


def custom_headers_schema() -> dict[str, Any]:
    """Parameters a modern client mirrors into `Mcp-Param-*` headers, one per allowed type, and one
    it does not (2026-07-28 server/tools, "x-mcp-header"; conformance http-custom-header-server-validation)."""
    return object_schema(
        {
            "region": {"type": "string", "description": "Where to run", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "description": "How urgent", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "description": "Whether to say more", "x-mcp-header": "Verbose"},
            "query": {"type": "string", "description": "What to run (not mirrored)"},
        },
        ["region", "priority", "verbose"],
    )


def _ordinals() -> list[tuple[int, str]]:
    return [(1, "First"), (2, "Second"), (3, "Third")]
