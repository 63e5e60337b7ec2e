"""`Mcp-Param-{Name}` headers (MCP 2026-07-28 Streamable HTTP, "Custom Headers from Tool
Parameters"): which annotations a tool may declare, and when a header agrees with its argument."""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.exceptions import ConfigError, HeaderMismatch
from aql_mcp.protocol.param_headers import (
    ParamHeader,
    check_param_headers,
    declared_headers,
    decode_header_value,
    requested_param_headers,
)

REGION = ParamHeader("Region", ("region",))
PRIORITY = ParamHeader("Priority", ("priority",))
VERBOSE = ParamHeader("Verbose", ("verbose",))


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def annotated(kind: Any, name: Any = "Region") -> dict[str, Any]:
    return {"type": kind, "x-mcp-header": name}


def raw(**headers: str) -> list[tuple[bytes, bytes]]:
    return [(f"mcp-param-{key}".lower().encode(), value.encode("latin-1")) for key, value in headers.items()]


def mismatch_of(declared: tuple[ParamHeader, ...], headers: list[tuple[bytes, bytes]], arguments: Any) -> str:
    with pytest.raises(HeaderMismatch) as raised:
        check_param_headers(headers, declared, arguments)
    assert raised.value.status == 400
    assert raised.value.code == -32020
    header: str = raised.value.data["header"]
    return header


# --- declared_headers: the annotations a tool may carry ("Schema Extension") ------------------------


def test_string_integer_and_boolean_parameters_are_declared_in_schema_order() -> None:
    declared = declared_headers(
        "t", schema(region=annotated("string"), priority=annotated("integer", "Priority"), q={"type": "string"})
    )
    assert declared == (REGION, ParamHeader("Priority", ("priority",)))
    assert declared[0].field == "Mcp-Param-Region"
    assert declared[0].key == b"mcp-param-region"


def test_a_nested_property_reached_through_properties_alone_is_declared() -> None:
    """ "Schema Extension": nested object properties are permitted when every step is `properties`."""
    nested = schema(target={"type": "object", "properties": {"zone": annotated("string", "Zone")}})
    assert declared_headers("t", nested) == (ParamHeader("Zone", ("target", "zone")),)


def test_a_nullable_primitive_may_be_annotated() -> None:
    assert declared_headers("t", schema(region=annotated(["string", "null"]))) == (REGION,)


def test_a_schema_without_annotations_declares_nothing() -> None:
    assert declared_headers("t", schema(region={"type": "string"})) == ()


def test_the_annotation_key_inside_data_or_as_a_property_name_is_no_annotation() -> None:
    data = {"x-mcp-header": "Region"}
    tricky = schema(**{"x-mcp-header": {"type": "string"}}, blob={"type": "object", "default": data, "const": data})
    assert declared_headers("t", tricky) == ()


@pytest.mark.parametrize(
    "name",
    ["", "Has Space", "Has:Colon", "Line\r\nBreak", "Tab\t", "Régión", "a/b", 7, None, ["Region"]],
)
def test_a_name_that_is_not_an_http_token_fails_registration(name: Any) -> None:
    """ "Schema Extension": non-empty, RFC 9110 `1*tchar`, no control characters."""
    with pytest.raises(ConfigError) as raised:
        declared_headers("bad_tool", schema(region=annotated("string", name)))
    assert "bad_tool" in str(raised.value)
    assert "region" in str(raised.value)


@pytest.mark.parametrize("kind", ["number", "object", "array", "null", None, ["string", "integer"], ["null"], 3])
def test_a_parameter_that_is_not_string_integer_or_boolean_fails_registration(kind: Any) -> None:
    """ "Schema Extension": primitive types only; `number` is not permitted."""
    with pytest.raises(ConfigError) as raised:
        declared_headers("bad_tool", schema(region=annotated(kind)))
    assert "bad_tool" in str(raised.value)
    assert "region" in str(raised.value)


@pytest.mark.parametrize(
    "where",
    [
        {"type": "object", "x-mcp-header": "Root"},
        schema(tags={"type": "array", "items": annotated("string")}),
        schema(tags={"type": "array", "prefixItems": [annotated("string")]}),
        {**schema(), "anyOf": [schema(region=annotated("string"))]},
        {**schema(), "oneOf": [schema(region=annotated("string"))]},
        {**schema(), "allOf": [schema(region=annotated("string"))]},
        {**schema(), "not": schema(region=annotated("string"))},
        {**schema(), "if": schema(region=annotated("string")), "then": {}},
        {**schema(), "then": schema(region=annotated("string"))},
        {**schema(region={"$ref": "#/$defs/r"}), "$defs": {"r": annotated("string")}},
        {**schema(), "patternProperties": {"^r": annotated("string")}},
        {**schema(), "additionalProperties": annotated("string")},
        schema(region={"anyOf": [annotated("string")]}),
    ],
)
def test_an_annotation_not_statically_reachable_fails_registration(where: dict[str, Any]) -> None:
    """ "Schema Extension": the chain from the root MUST be `properties` keys only."""
    with pytest.raises(ConfigError) as raised:
        declared_headers("bad_tool", where)
    assert "bad_tool" in str(raised.value)


def test_names_equal_but_for_case_fail_registration() -> None:
    """ "Schema Extension": case-insensitively unique within the inputSchema."""
    with pytest.raises(ConfigError) as raised:
        declared_headers("bad_tool", schema(a=annotated("string", "Region"), b=annotated("integer", "REGION")))
    assert "bad_tool" in str(raised.value)
    assert "REGION" in str(raised.value)


# --- check_param_headers: header against argument ("Server Behavior for Custom Headers") --------------


@pytest.mark.parametrize(
    ("sent", "value"),
    [
        ("us-west1", "us-west1"),
        ("  us-west1\t", "us-west1"),
        ("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
        ("=?base64?IHBhZGRlZCA=?=", " padded "),
        ("=?base64?bGluZTEKbGluZTI=?=", "line1\nline2"),
        ("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?="),
        ("SGVsbG8=", "SGVsbG8="),
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),
        ("SGVsbG8=?=", "SGVsbG8=?="),
        ("=?base64??=", ""),
        ("", ""),
    ],
)
def test_a_string_header_agreeing_with_its_argument_passes(sent: str, value: str) -> None:
    """ "Value Encoding": as-is, or Base64 in the sentinel; without both markers a value is literal."""
    check_param_headers(raw(region=sent), (REGION,), {"region": value})


@pytest.mark.parametrize(
    ("sent", "value"),
    [("42", 42), ("-7", -7), ("0", 0), ("42.0", 42), ("4.2e1", 42), ("9007199254740991", 2**53 - 1), ("2.5", 2.5)],
)
def test_an_integer_header_is_compared_as_a_number(sent: str, value: int | float) -> None:
    """ "Server Validation" note: `42.0` and `42` are equal."""
    check_param_headers(raw(priority=sent), (PRIORITY,), {"priority": value})


@pytest.mark.parametrize(("sent", "value"), [("true", True), ("false", False), ("=?base64?dHJ1ZQ==?=", True)])
def test_a_boolean_header_is_lowercase_true_or_false(sent: str, value: bool) -> None:
    check_param_headers(raw(verbose=sent), (VERBOSE,), {"verbose": value})


def test_absent_and_null_arguments_want_no_header() -> None:
    """ "Server Behavior for Custom Headers": the server MUST NOT expect the header then."""
    check_param_headers([], (REGION, PRIORITY), {"region": None})
    check_param_headers([], (REGION,), None)
    check_param_headers([], (ParamHeader("Zone", ("target", "zone")),), {"target": "not an object"})


def test_headers_the_tool_does_not_declare_are_ignored() -> None:
    check_param_headers(raw(other="x", region="eu"), (REGION,), {"region": "eu"})
    check_param_headers(raw(region="anything"), (), {"region": "eu"})


@pytest.mark.parametrize(
    ("headers", "arguments"),
    [
        (raw(), {"region": "eu"}),
        (raw(region="us"), {"region": "eu"}),
        (raw(region="EU"), {"region": "eu"}),
        (raw(region="=?base64?SGVsbG8?="), {"region": "Hello"}),
        (raw(region="=?base64?SGVs!!!bG8=?="), {"region": "Hello"}),
        (raw(region="=?base64?SGVs bG8=?="), {"region": "Hello"}),
        (raw(region="=?base64?_-8=?="), {"region": "\ufffd"}),
        (raw(region="=?base64?/w==?="), {"region": "\ufffd"}),
        (raw(region="=?base64?SGVsbG8=?="), {"region": "=?base64?SGVsbG8=?="}),
        (raw(region=" padded "), {"region": " padded "}),
        (raw(region="caf\xe9"), {"region": "caf\xe9"}),
        (raw(region="a\x7fb"), {"region": "a\x7fb"}),
        (raw(region="us"), {}),
        (raw(region="us"), {"region": None}),
        (raw(region="eu") + raw(region="eu"), {"region": "eu"}),
        (raw(region="43"), {"region": 42}),
        (raw(region="[]"), {"region": []}),
        (raw(region="{}"), {"region": {}}),
    ],
)
def test_a_string_header_missing_malformed_or_not_matching_is_a_mismatch(
    headers: list[tuple[bytes, bytes]], arguments: dict[str, Any]
) -> None:
    """ "Server Behavior for Custom Headers" and "Server Validation": 400 with -32020."""
    assert mismatch_of((REGION,), headers, arguments) == "Mcp-Param-Region"


@pytest.mark.parametrize(
    ("sent", "value"),
    [("42", 43), ("042", 42), ("42abc", 42), ("0x2a", 42), ("", 0), ("true", 1), ("1", True), ("NaN", 0)],
)
def test_a_number_or_boolean_header_not_rendering_its_argument_is_a_mismatch(sent: str, value: Any) -> None:
    assert mismatch_of((PRIORITY,), raw(priority=sent), {"priority": value}) == "Mcp-Param-Priority"


@pytest.mark.parametrize(("sent", "value"), [("True", True), ("1", True), ("0", False), ("", False)])
def test_a_boolean_header_in_another_spelling_is_a_mismatch(sent: str, value: bool) -> None:
    assert mismatch_of((VERBOSE,), raw(verbose=sent), {"verbose": value}) == "Mcp-Param-Verbose"


def test_the_first_disagreeing_declared_header_is_named() -> None:
    headers = raw(region="eu", priority="1")
    assert mismatch_of((REGION, PRIORITY, VERBOSE), headers, {"region": "eu", "priority": 2}) == "Mcp-Param-Priority"


# --- decode_header_value ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "value"),
    [
        ("plain", "plain"),
        ("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
        ("=?base64?=", "=?base64?="),
        ("=?base64??=", ""),
        ("=?BASE64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?="),
        ("=?base64?SGVsbG8?=", None),
        ("=?base64?not base64!?=", None),
        ("=?base64?/w==?=", None),
    ],
)
def test_values_are_decoded_from_the_lowercase_sentinel_only(sent: str, value: str | None) -> None:
    """ "Value Encoding": the markers are case-sensitive; bad padding, alphabet or UTF-8 is None."""
    assert decode_header_value(sent) == value


# --- requested_param_headers (CORS preflight) --------------------------------------------------------


def test_a_preflight_gets_back_the_param_header_names_it_asked_for_lowercased_once() -> None:
    asked = "Content-Type, Mcp-Param-Region,mcp-param-region , MCP-PARAM-Priority, mcp-param-, x-mcp-param-a"
    assert requested_param_headers(asked) == ["mcp-param-region", "mcp-param-priority"]
    assert requested_param_headers(None) == []
