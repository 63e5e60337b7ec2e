"""JSON-RPC 2.0 messages: one parse of the body, one serialisation of the answer (orjson).

Nothing here knows about MCP. A message is classified once into a request, a notification or
a response; anything else is `InvalidRequest`, and bytes that are not UTF-8 JSON `ParseError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from aql_mcp.exceptions import BatchNotSupported, InvalidRequest, NestingTooDeep, ParseError
from aql_mcp.jsonrpc.nesting import exceeds_depth, may_exceed_depth

RequestId = str | int
# Deepest message accepted, the envelope counting as level 1. Everything read from a message may be
# written back inside a few more levels (an answer, a stored session, a log line) and orjson writes
# at most 254: 128 leaves that room, and is far beyond any real MCP message (MCP-AQL arguments have
# their own, stricter `aql.max_nesting_depth`).
MAX_DEPTH = 128


@dataclass(frozen=True, slots=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Notification:
    method: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Response:
    """A client's answer to a request the server sent (sampling, elicitation)."""

    id: RequestId
    result: dict[str, Any] | None
    error: dict[str, Any] | None


Message = Request | Notification | Response


def parse_message(body: bytes) -> Message:
    """Parse one JSON-RPC message; batches are refused (corporate standard §6)."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):
            # orjson's own limit (1024 levels): the same refusal as ours below, not a parse error.
            raise NestingTooDeep(data={"reason": "nesting_depth", "limit": MAX_DEPTH}) from None
        # orjson refuses invalid UTF-8 (and lone surrogates) here too, so both are -32700.
        raise ParseError() from None
    if may_exceed_depth(body, MAX_DEPTH) and exceeds_depth(data, MAX_DEPTH):
        raise NestingTooDeep(data={"reason": "nesting_depth", "limit": MAX_DEPTH})
    if isinstance(data, list):
        raise BatchNotSupported()
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        raise InvalidRequest("Invalid request: not a JSON-RPC 2.0 object", data={"reason": "jsonrpc"})
    return _classify(data)


def _classify(data: dict[str, Any]) -> Message:
    method = data.get("method")
    has_id = "id" in data
    if method is not None:
        if not isinstance(method, str) or not method:
            raise InvalidRequest(data={"field": "method", "reason": "type"})
        params = data.get("params", {})
        if not isinstance(params, dict):
            raise InvalidRequest(data={"field": "params", "reason": "type"})
        if not has_id:
            return Notification(method, params)
        return Request(_request_id(data["id"]), method, params)
    if has_id and ("result" in data) != ("error" in data):
        result, error = data.get("result"), data.get("error")
        if (result is not None and not isinstance(result, dict)) or (error is not None and not isinstance(error, dict)):
            raise InvalidRequest(data={"field": "result", "reason": "type"})
        return Response(_request_id(data["id"]), result, error)
    raise InvalidRequest(data={"reason": "neither request, notification nor response"})


def _request_id(value: Any) -> RequestId:
    # MCP: ids are strings or integers, never null; bool is an int subclass in Python.
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidRequest(data={"field": "id", "reason": "type"})
    return value


def peek_id(body: bytes) -> RequestId | None:
    """The id of a message that failed validation, if one can be read, so the error can carry it."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    value = data.get("id") if isinstance(data, dict) else None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def encode_result(message_id: RequestId, result: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": message_id, "result": result})


def encode_error(message_id: RequestId | None, error: dict[str, Any]) -> bytes:
    # An id that could not be read is null (JSON-RPC 2.0 §5). The 2025-11-25 transports page
    # allows an error with no id at all, but the official Python client only reads a non-2xx
    # error body that has an id member, null included, and reports a generic error otherwise.
    return orjson.dumps({"jsonrpc": "2.0", "id": message_id, "error": error})


def encode_request(message_id: RequestId, method: str, params: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params})


def encode_notification(method: str, params: dict[str, Any]) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": method, "params": params})
