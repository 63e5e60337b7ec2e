"""JSON-RPC 2.0 message classification (JSON-RPC 2.0 §4-§6; MCP 2025-11-25 basic, Messages)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from aql_mcp.exceptions import BatchNotSupported, InvalidRequest, NestingTooDeep, ParseError
from aql_mcp.jsonrpc.messages import (
    MAX_DEPTH,
    Notification,
    Request,
    Response,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
    parse_message,
    peek_id,
)


def parse(data: Any) -> Any:
    return parse_message(json.dumps(data).encode())


def test_request_with_integer_id_is_a_request() -> None:
    message = parse({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "c"}})
    assert message == Request(1, "tools/list", {"cursor": "c"})


def test_request_with_string_id_and_no_params_has_empty_params() -> None:
    assert parse({"jsonrpc": "2.0", "id": "a-1", "method": "ping"}) == Request("a-1", "ping", {})


def test_message_without_id_is_a_notification() -> None:
    message = parse({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert message == Notification("notifications/initialized", {})


def test_result_message_is_a_response() -> None:
    assert parse({"jsonrpc": "2.0", "id": "srv-1", "result": {"x": 1}}) == Response("srv-1", {"x": 1}, None)


def test_error_message_is_a_response() -> None:
    error = {"code": -32601, "message": "Method not found"}
    assert parse({"jsonrpc": "2.0", "id": 3, "error": error}) == Response(3, None, error)


def test_unknown_members_are_ignored() -> None:
    message = parse({"jsonrpc": "2.0", "id": 1, "method": "ping", "extra": True})
    assert isinstance(message, Request)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b"not json",
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping",}',
        b'{"jsonrpc": "2.0", "method": "\xff"}',
        b'{"jsonrpc": "2.0", "method": "x", "params": {"a": "\\ud800"}}',
    ],
    ids=["empty", "truncated", "text", "trailing_comma", "invalid_utf8", "lone_surrogate"],
)
def test_bytes_that_are_not_utf8_json_are_a_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError) as raised:
        parse_message(body)
    assert raised.value.code == -32700


@pytest.mark.parametrize("batch", [[], [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]], ids=["empty", "one"])
def test_batches_are_refused(batch: list[Any]) -> None:
    """Corporate §6: one message per POST."""
    with pytest.raises(BatchNotSupported) as raised:
        parse(batch)
    assert raised.value.code == -32600


INVALID: dict[str, Any] = {
    "number": 1,
    "string": "ping",
    "null": None,
    "bool": True,
    "missing_jsonrpc": {"id": 1, "method": "ping"},
    "jsonrpc_1": {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    "jsonrpc_number": {"jsonrpc": 2.0, "id": 1, "method": "ping"},
    "method_number": {"jsonrpc": "2.0", "id": 1, "method": 7},
    "method_empty": {"jsonrpc": "2.0", "id": 1, "method": ""},
    "params_array": {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]},
    "params_string": {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"},
    "notification_params_null": {"jsonrpc": "2.0", "method": "x", "params": None},
    "id_null": {"jsonrpc": "2.0", "id": None, "method": "ping"},
    "id_true": {"jsonrpc": "2.0", "id": True, "method": "ping"},
    "id_float": {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
    "id_whole_float": {"jsonrpc": "2.0", "id": 1.0, "method": "ping"},
    "id_object": {"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping"},
    "id_array": {"jsonrpc": "2.0", "id": [1], "method": "ping"},
    "empty_object": {"jsonrpc": "2.0"},
    "id_only": {"jsonrpc": "2.0", "id": 1},
    "result_and_error": {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
    "result_without_id": {"jsonrpc": "2.0", "result": {}},
    "error_without_id": {"jsonrpc": "2.0", "error": {"code": 1, "message": "x"}},
    "result_not_object": {"jsonrpc": "2.0", "id": 1, "result": 5},
    "error_not_object": {"jsonrpc": "2.0", "id": 1, "error": "boom"},
    "response_id_null": {"jsonrpc": "2.0", "id": None, "result": {}},
    "response_id_bool": {"jsonrpc": "2.0", "id": False, "result": {}},
}


@pytest.mark.parametrize("data", INVALID.values(), ids=INVALID.keys())
def test_invalid_shapes_are_an_invalid_request(data: Any) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse(data)
    assert raised.value.code == -32600
    assert raised.value.status == 400


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"jsonrpc": "1.0", "id": 4, "method": "x"}', 4),
        (b'{"id": "abc"}', "abc"),
        (b'{"id": true}', None),
        (b'{"id": 1.5}', None),
        (b'{"id": null}', None),
        (b"[1, 2]", None),
        (b"{", None),
        (b"\xff", None),
    ],
)
def test_peek_id_reads_a_usable_id_or_none(body: bytes, expected: Any) -> None:
    assert peek_id(body) == expected


def test_encoded_messages_parse_back() -> None:
    assert parse_message(encode_request("srv-1", "sampling/createMessage", {"a": 1})) == Request(
        "srv-1", "sampling/createMessage", {"a": 1}
    )
    assert parse_message(encode_notification("notifications/progress", {"p": 1})) == Notification(
        "notifications/progress", {"p": 1}
    )
    assert parse_message(encode_result(2, {"ok": True})) == Response(2, {"ok": True}, None)


def test_error_without_a_readable_id_is_encoded_with_a_null_id() -> None:
    """JSON-RPC 2.0 §5: the id is null when it could not be determined."""
    error = {"code": -32700, "message": "Parse error"}
    assert orjson.loads(encode_error(None, error)) == {"jsonrpc": "2.0", "id": None, "error": error}


def test_error_with_a_readable_id_carries_it() -> None:
    """JSON-RPC 2.0 §5: the id is the request's when it could be read."""
    error = {"code": -32600, "message": "Invalid request"}
    assert orjson.loads(encode_error(0, error)) == {"jsonrpc": "2.0", "id": 0, "error": error}


def deep_message(levels: int) -> bytes:
    """A request whose params nest so that the whole message is `levels` deep."""
    inner = '{"a":' * (levels - 2) + "{}" + "}" * (levels - 2)
    return ('{"jsonrpc":"2.0","id":7,"method":"ping","params":' + inner + "}").encode()


def test_a_message_at_the_depth_limit_parses() -> None:
    assert isinstance(parse_message(deep_message(MAX_DEPTH)), Request)


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 255, 1024, 1025, 100_000])
def test_a_message_nested_past_the_depth_limit_is_invalid_request_not_a_parse_error(levels: int) -> None:
    # orjson parses 1024 levels but writes 254: what could not be written back is refused on the way in.
    with pytest.raises(NestingTooDeep) as caught:
        parse_message(deep_message(levels))
    assert caught.value.code == -32600
    assert caught.value.data == {"reason": "nesting_depth", "limit": MAX_DEPTH}


def test_every_message_that_parses_can_be_written_back() -> None:
    message = parse_message(deep_message(MAX_DEPTH))
    assert isinstance(message, Request)
    assert orjson.loads(encode_result(message.id, {"echo": message.params}))["result"]["echo"] == message.params
