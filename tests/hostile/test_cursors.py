"""Crafted cursors (issue 12: they answered INTERNAL_ERROR, and a NUL in one a 503 on PostgreSQL).

A records listing answers any cursor it did not issue for the same query with the MCP-AQL
validation error `VALIDATION_INVALID_TYPE` naming the parameter (`after` or `before`); the MCP list
methods answer -32602 naming `cursor` (MCP 2025-11-25 server/utilities/pagination, "Error
Handling": invalid cursors SHOULD be -32602). On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from tests.support.asgi import MCP_HEADERS
from tests.support.server import start_server

LEAKS = ("Traceback", "SELECT", "sqlite", "asyncpg", "postgres", ".py", "/src/")


class Caller:
    """One initialized session on a real server, calling `tools/call` and the list methods."""

    def __init__(self, http: httpx.Client, url: str) -> None:
        self.http, self.url, self.ids = http, url, 1

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        response = self.http.post(self.url, json={"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        assert response.status_code == 200, response.text
        assert not any(leak in response.text for leak in LEAKS), response.text
        body: dict[str, Any] = response.json()
        return body

    def aql(self, tool: str, operation: str, **params: Any) -> dict[str, Any]:
        body = self.rpc("tools/call", {"name": tool, "arguments": {"operation": operation, "params": params}})
        envelope: dict[str, Any] = body["result"]["structuredContent"]
        return envelope


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def caller(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Caller]:
    # Many calls in a row from one caller: the rate limit is not what these tests are about.
    env = {"AQL_MCP_LIMITS__RATE_PER_SECOND": "10000", "AQL_MCP_LIMITS__RATE_BURST": "10000"}
    if request.param == "postgres":
        env["AQL_MCP_STORE__URL"] = request.getfixturevalue("database")
    with start_server(tmp_path_factory.mktemp("cursors"), env=env, plugins=()) as server:
        headers = {**MCP_HEADERS, "authorization": f"Bearer {server.token()}"}
        with httpx.Client(headers=headers, timeout=30.0) as http:
            init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            response = http.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
            http.headers["mcp-session-id"] = response.headers["mcp-session-id"]
            http.headers["mcp-protocol-version"] = "2025-11-25"
            caller = Caller(http, server.url)
            for collection in ("notes", "other"):
                assert caller.aql("mcp_aql_create", "create_collection", collection=collection)["success"]
                for n in range(5):
                    data = {"n": n, "s": "x" * n}
                    assert caller.aql("mcp_aql_create", "create_record", collection=collection, data=data)["success"]
            yield caller


def encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def issued(caller: Caller, **query: Any) -> str:
    page = caller.aql("mcp_aql_read", "list_records", collection="notes", first=2, **query)
    assert page["success"], page
    cursor: str = page["data"]["pageInfo"]["endCursor"]
    return cursor


def tampered(cursor: str, key: Any) -> str:
    """An issued cursor with its key replaced: what a caller who decoded one can forge."""
    raw = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    return encode(orjson.dumps({**raw, "k": key}))


def assert_refused(envelope: dict[str, Any], param: str) -> None:
    assert envelope["success"] is False, envelope
    assert envelope["error"]["code"] == "VALIDATION_INVALID_TYPE"
    assert envelope["error"]["details"]["param_name"] == param


GARBAGE = {
    "empty": "",
    "not_base64": "!!!",
    "one_char": "a",
    "padding_only": "====",
    "non_ascii": "curseur-é",
    "not_json": encode(b"hello"),
    "invalid_utf8": encode(b"\xff\xfe{"),
    "json_array": encode(b"[1,2,3,4]"),
    "json_string": encode(b'"k"'),
    "json_number": encode(b"1e400"),
    "nan_literal": encode(b'{"k":[2,NaN,"",1],"q":"x"}'),
    "infinity_literal": encode(b'{"k":[2,Infinity,"",1],"q":"x"}'),
    "empty_object": encode(b"{}"),
    "no_query": encode(b'{"k":[0,0,"",1]}'),
    "old_format": encode(b'{"k":[0,0,"",1],"s":":asc"}'),
    "deep": encode(b'{"k":' + b"[" * 2000 + b"]" * 2000 + b"}"),
    "long": "A" * 100_000,
}
FORGED_KEYS = {
    "short_key": [0, 0, ""],
    "long_key": [0, 0, "", 1, 1],
    "key_object": {"rank": 0},
    "rank_too_high": [5, 0, "", 1],
    "rank_negative": [-1, 0, "", 1],
    "rank_huge": [2**64 - 1, 0, "", 1],
    "rank_float": [0.5, 0, "", 1],
    "number_string": [2, "1", "", 1],
    "number_bool": [2, True, "", 1],
    "text_not_string": [3, 0, 7, 1],
    "text_with_nul": [3, 0, "a\x00b", 1],
    "position_negative": [0, 0, "", -1],
    "position_huge": [0, 0, "", 2**64 - 1],
    "position_float": [0, 0, "", 1.5],
}


@pytest.mark.parametrize("cursor", GARBAGE.values(), ids=GARBAGE.keys())
@pytest.mark.parametrize("param", ["after", "before"])
def test_a_garbage_cursor_is_a_validation_error_naming_the_parameter(caller: Caller, cursor: str, param: str) -> None:
    span = {"first": 2, "after": cursor} if param == "after" else {"last": 2, "before": cursor}
    assert_refused(caller.aql("mcp_aql_read", "list_records", collection="notes", **span), param)


@pytest.mark.parametrize("key", FORGED_KEYS.values(), ids=FORGED_KEYS.keys())
@pytest.mark.parametrize("sort", [None, {"field": "s", "order": "desc"}])
def test_a_cursor_with_a_forged_key_is_a_validation_error(caller: Caller, key: Any, sort: Any) -> None:
    query = {"sort": sort} if sort else {}
    cursor = tampered(issued(caller, **query), key)
    assert_refused(
        caller.aql("mcp_aql_read", "list_records", collection="notes", first=2, after=cursor, **query), "after"
    )


@pytest.mark.parametrize(
    "other",
    [
        {"collection": "other"},
        {"sort": {"field": "n", "order": "asc"}},
        {"sort": {"field": "s", "order": "desc"}},
        {"filter": {"n": {"gte": 0}}},
    ],
    ids=["collection", "sort", "order", "filter"],
)
def test_a_cursor_from_another_query_is_a_validation_error(caller: Caller, other: dict[str, Any]) -> None:
    cursor = issued(caller, sort={"field": "s", "order": "asc"})
    params = {"collection": "notes", "sort": {"field": "s", "order": "asc"}, **other}
    assert_refused(caller.aql("mcp_aql_read", "list_records", first=2, after=cursor, **params), "after")


def test_a_cursor_from_a_listing_is_refused_by_a_search(caller: Caller) -> None:
    cursor = issued(caller)
    assert_refused(
        caller.aql("mcp_aql_read", "search_records", collection="notes", query="x", first=2, after=cursor), "after"
    )


@pytest.mark.parametrize("value", [0, 1.5, True, [], {}, {"k": [0, 0, "", 1]}])
def test_a_cursor_that_is_not_a_string_is_a_validation_error_naming_the_parameter(caller: Caller, value: Any) -> None:
    assert_refused(caller.aql("mcp_aql_read", "list_records", collection="notes", first=2, after=value), "after")


@pytest.mark.parametrize(
    "cursor", [*GARBAGE.values(), 0, True, [], {"n": "notes"}], ids=[*GARBAGE.keys(), "zero", "true", "list", "object"]
)
def test_a_crafted_collection_cursor_is_a_validation_error_naming_the_parameter(caller: Caller, cursor: Any) -> None:
    """list_collections decodes its cursors with the same codec and the same refusal as list_records."""
    assert_refused(caller.aql("mcp_aql_read", "list_collections", first=1, after=cursor), "after")
    assert_refused(caller.aql("mcp_aql_read", "list_collections", last=1, before=cursor), "before")


def test_a_records_cursor_is_refused_by_list_collections(caller: Caller) -> None:
    assert_refused(caller.aql("mcp_aql_read", "list_collections", first=1, after=issued(caller)), "after")


def test_an_issued_cursor_still_pages_forward_and_back(caller: Caller) -> None:
    """The refusals above are not refusing everything: the same query's cursors page as before."""
    sort = {"field": "n", "order": "desc"}
    first = caller.aql("mcp_aql_read", "list_records", collection="notes", first=2, sort=sort)
    end = first["data"]["pageInfo"]["endCursor"]
    second = caller.aql("mcp_aql_read", "list_records", collection="notes", first=2, after=end, sort=sort)
    assert [item["n"] for item in second["data"]["items"]] == [2, 1]
    start = second["data"]["pageInfo"]["startCursor"]
    back = caller.aql("mcp_aql_read", "list_records", collection="notes", last=2, before=start, sort=sort)
    assert [item["n"] for item in back["data"]["items"]] == [4, 3]


MCP_CURSORS = {
    "not_base64": "!!!",
    "empty": "",
    "negative": base64.urlsafe_b64encode(b"o:-1").decode(),
    "leading_zero": base64.urlsafe_b64encode(b"o:01").decode(),
    "huge_offset": base64.urlsafe_b64encode(b"o:" + b"9" * 19).decode(),
    "five_thousand_digits": base64.urlsafe_b64encode(b"o:" + b"1" * 5000).decode(),
    "unicode_digit": base64.urlsafe_b64encode("o:٣".encode()).decode(),
    "wrong_prefix": base64.urlsafe_b64encode(b"x:1").decode(),
    "invalid_utf8": base64.urlsafe_b64encode(b"o:\xff").decode(),
    "records_cursor": encode(b'{"k":[0,0,"",1],"q":"x"}'),
    "number": 5,
    "object": {"o": 1},
    "null_char": base64.urlsafe_b64encode(b"o:1\x00").decode(),
}


@pytest.mark.parametrize("cursor", MCP_CURSORS.values(), ids=MCP_CURSORS.keys())
@pytest.mark.parametrize("method", ["tools/list", "prompts/list", "resources/list", "resources/templates/list"])
def test_a_crafted_mcp_list_cursor_is_invalid_params_naming_cursor(caller: Caller, method: str, cursor: Any) -> None:
    body = caller.rpc(method, {"cursor": cursor})
    assert body["error"]["code"] == -32602
    assert body["error"]["data"]["field"] == "cursor"
