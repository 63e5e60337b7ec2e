"""A seeded random run of JSON-RPC, MCP and MCP-AQL messages against one real `aql-mcp serve` (issue 12:
"No input may produce a 500").

Over 5,000 messages, each example of the run sending a handful on one keep-alive connection: well-formed
requests with random params for every method the server knows, notifications and client responses,
malformed JSON-RPC (wrong member types, huge/negative/float ids, arrays, scalars, invalid JSON and
UTF-8, deep nesting, long strings, odd Unicode), random values of the MCP headers, GET and DELETE with
random session ids and Last-Event-ID, and `tools/call` of each MCP-AQL endpoint tool with the real
operation names (read from introspection) and random params and batches. Every answer must be a
status other than 500 (a 5xx only 503/504 with their JSON-RPC codes), an error must be a JSON-RPC error
object, nothing may be an internal error (-32603, MCP-AQL INTERNAL_ERROR) or leak a stack trace, path or
SQL; afterwards the same process is alive, /health answers and a well-formed call still succeeds.

The server runs with default settings except the rate limit and the sessions per caller, raised so that
the run exercises the handlers and not only the 429 in front of them, once on SQLite and once on
PostgreSQL (a NUL in a resource URI was a 503 there only). Deterministic: a fixed seed, no example
database. The messages per second go to the test's output, never into an assertion.
"""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tests.support.asgi import MCP_HEADERS
from tests.support.redaction import WIRE_LEAKS
from tests.support.server import ServerProcess, start_server

MESSAGES = 5_500
PER_EXAMPLE = 10
SEED = 20261124
LEAKS = WIRE_LEAKS
# A 5xx is allowed only as the documented refusal it is: store or session table busy, call timeout.
ALLOWED_5XX = {503: -32006, 504: -32004}
VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2026-07-28", "2024-11-05", ""]
REQUEST_METHODS = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "tasks/list",
    "server/discover",
    "sampling/createMessage",
]
NOTIFICATIONS = [
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    "notifications/message",
    "notifications/unknown",
]
# Lone surrogates: sent escaped (`"\ud800"`), valid JSON text that no UTF-8 string can hold.
LONE_SURROGATES = ["\ud800", "\udfff\ud800", "a\udc00b"]
ODD_TEXT = [
    "",
    "\x00",
    "a\x00",
    "\x01\x1f\x7f",
    "\ufffe\uffff",
    "\u202eevil",
    "e\u0301\u0301\u0301",
    "\U0001f600" * 3,
    "%s%n%x",
    "'; DROP TABLE records; --",
    "../../etc/passwd",
    "\r\n\t",
    "null",
    "9" * 400,
]


# Values -------------------------------------------------------------------------------------------

odd_text = st.sampled_from(ODD_TEXT)
# Mostly any text; one in four from the odd list.
short_text = st.integers(0, 3).flatmap(lambda roll: odd_text if roll == 0 else st.text(max_size=24))
numbers = st.one_of(
    st.integers(min_value=-1000, max_value=1000),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64]),
    st.floats(allow_nan=False, allow_infinity=False),
)
scalars = st.none() | st.booleans() | numbers | short_text
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(short_text, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(short_text, json_values, max_size=5)
# Mostly ids a client sends; one in ten at the edges (beyond 64 bits is not an integer id to orjson).
ids = st.integers(0, 9).flatmap(
    lambda roll: (
        st.sampled_from([-1, 0, -(2**63), 2**63, 2**64 - 1, 2**64, 2**66, -(2**66)])
        if roll == 0
        else (st.integers(min_value=0, max_value=10**6) if roll % 2 else st.text(max_size=12))
    )
)
bad_ids = st.none() | st.booleans() | st.floats() | st.lists(scalars, max_size=2) | json_objects


def cursor_like(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


cursors = short_text | json_values.map(cursor_like) | st.sampled_from(["", "!!!", "o", cursor_like({"k": [0] * 4})])


@dataclass
class Surface:
    """What the server offers, read once from it: tool, prompt, resource and MCP-AQL operation names."""

    tools: list[str]
    prompts: list[str]
    uris: list[str]
    operations: dict[str, str]  # operation -> its endpoint tool
    parameters: dict[str, list[tuple[str, bool]]]  # operation -> its parameters, whether each is required

    @property
    def parameters_all(self) -> set[str]:
        return {name for listed in self.parameters.values() for name, _ in listed}


def aql_values(surface: Surface) -> dict[str, st.SearchStrategy[Any]]:
    """Values for each MCP-AQL parameter name: mostly plausible, often wrong in type or range."""
    collections = st.sampled_from(["fuzz", "fuzz", "notes", "Bad Name", "a" * 70, ""]) | short_text
    filters = st.dictionaries(
        st.sampled_from(["n", "title", "id", "a.b.c", "", "x" * 300, "a..b"]) | short_text,
        json_values
        | st.dictionaries(
            st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "in", "contains", "exists", "regex"]),
            json_values,
            max_size=3,
        ),
        max_size=4,
    )
    sort_fields = st.sampled_from(["n", "title", "created_at", "id", "a.b"]) | short_text
    sorts = st.fixed_dictionaries({"field": sort_fields}, optional={"order": st.sampled_from(["asc", "desc", "up"])})
    known: dict[str, st.SearchStrategy[Any]] = {
        "collection": collections,
        "id": short_text | st.sampled_from(["r_1", "00000000-0000-0000-0000-000000000000"]),
        "data": st.dictionaries(st.sampled_from(["n", "title", "tags"]) | short_text, json_values, max_size=4),
        "input": json_objects,
        "filter": filters,
        "sort": sorts | json_values,
        "first": st.integers(-2, 200) | numbers,
        "last": st.integers(-2, 200) | numbers,
        "after": cursors,
        "before": cursors,
        "fields": st.lists(short_text, max_size=4) | st.sampled_from(["minimal", "standard", "full", "none"]),
        "query": short_text,
        "if_match": short_text,
        "idempotency_key": short_text,
        "name": st.sampled_from([*surface.operations, "nope"]),
        "confirmation_token": short_text,
    }
    return {name: known.get(name, json_values) | json_values for name in {*known, *surface.parameters_all}}


# Shots: one HTTP exchange each --------------------------------------------------------------------


@dataclass
class Shot:
    body: bytes = b""
    method: str = "POST"
    headers: dict[str, str | bytes | None] = field(default_factory=dict)
    sessionless: bool = False
    kind: str = ""


def dumps(value: Any) -> bytes:
    # The standard library writes integers of any size and lone surrogates (escaped), as a hostile client may.
    return json.dumps(value).encode()


def request(method: str, params: Any, message_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message_id, "method": method, "params": params}


@st.composite
def well_formed(draw: st.DrawFn, surface: Surface) -> Shot:
    method = draw(st.sampled_from(REQUEST_METHODS)) if draw(st.integers(0, 5)) else draw(st.text(min_size=1))
    params: dict[str, Any] = draw(json_objects)
    # A real URI, or one with something odd appended: reaches the lookups and the subscriptions table.
    suffixes = st.sampled_from(["\x00", "a\x00b", "\n", "%00", " ", "/../x"]) | odd_text
    uris = st.sampled_from(surface.uris).flatmap(lambda uri: st.just(uri) | suffixes.map(lambda odd: uri + odd))
    hints = {
        "tools/call": {"name": st.sampled_from(surface.tools) | short_text, "arguments": json_values},
        "resources/read": {"uri": st.integers(0, 3).flatmap(lambda roll: short_text if roll == 0 else uris)},
        "resources/subscribe": {"uri": st.integers(0, 3).flatmap(lambda roll: short_text if roll == 0 else uris)},
        "resources/unsubscribe": {"uri": st.integers(0, 3).flatmap(lambda roll: short_text if roll == 0 else uris)},
        "prompts/get": {"name": st.sampled_from(surface.prompts) | short_text, "arguments": json_values},
        "completion/complete": {
            "ref": st.fixed_dictionaries(
                {"type": st.sampled_from(["ref/prompt", "ref/resource", "ref/x"]) | short_text},
                optional={"name": st.sampled_from(surface.prompts) | short_text, "uri": short_text},
            )
            | json_values,
            "argument": st.fixed_dictionaries({"name": short_text, "value": short_text}) | json_values,
        },
        "logging/setLevel": {"level": st.sampled_from(["debug", "info", "emergency", "LOUD"]) | json_values},
        "initialize": {
            "protocolVersion": st.sampled_from(VERSIONS) | json_values,
            "capabilities": json_values,
            "clientInfo": json_values,
        },
    }
    for name, values in hints.get(method, {}).items():
        if draw(st.booleans()) or name in ("name", "uri"):
            params[name] = draw(values)
    for name in ("cursor", "_meta"):
        if draw(st.integers(0, 4)) == 0:
            params[name] = draw(cursors if name == "cursor" else json_values)
    shot = Shot(dumps(request(method, params, draw(ids))), sessionless=method in ("initialize", "ping"))
    shot.kind = "request"
    return shot


@st.composite
def notifications(draw: st.DrawFn) -> Shot:
    params = draw(json_objects)
    if draw(st.booleans()):
        params["requestId"] = draw(ids | bad_ids)
    message = {"jsonrpc": "2.0", "method": draw(st.sampled_from(NOTIFICATIONS) | short_text), "params": params}
    return Shot(dumps(message), kind="notification")


@st.composite
def client_responses(draw: st.DrawFn) -> Shot:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(ids | bad_ids)}
    member = draw(st.sampled_from(["result", "error", "both", "neither"]))
    if member in ("result", "both"):
        message["result"] = draw(json_values)
    if member in ("error", "both"):
        message["error"] = draw(json_values)
    return Shot(dumps(message), kind="response")


@st.composite
def malformed(draw: st.DrawFn) -> Shot:
    kind = draw(st.integers(0, 8))
    if kind == 0:
        return Shot(dumps(draw(json_values)))
    if kind == 1:
        message = {
            "jsonrpc": draw(st.sampled_from(["2.0", "1.0", "2", 2.0, None]) | json_values),
            "id": draw(ids | bad_ids),
            "method": draw(st.sampled_from(REQUEST_METHODS) | json_values),
            "params": draw(json_values),
        }
        for member in draw(st.sets(st.sampled_from(list(message)))):
            del message[member]
        return Shot(dumps(message))
    if kind == 2:
        return Shot(draw(st.binary(max_size=200)))
    if kind == 3:
        body = dumps(request("ping", {"x": draw(short_text)}))
        cut = draw(st.integers(0, len(body)))
        junk = draw(st.sampled_from([b"", b"\xff", b"\xc3", b"\xed\xa0\x80", b"}", b"\x00"]))
        return Shot(body[:cut] + junk + body[cut:])
    if kind == 4:
        # Deep enough to pass orjson's reading (1024) but not its writing (254), or past both.
        depth = draw(st.sampled_from([200, 255, 256, 500, 1023, 1025, 3000]) | st.integers(100, 3000))
        opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
        deep = opener * depth + "1" * (opener == "[") + "{}" * (opener != "[") + closer * depth
        method = draw(st.sampled_from(["initialize", "ping", "tools/call", "prompts/get", "notifications/initialized"]))
        member = draw(st.sampled_from(["capabilities", "clientInfo", "_meta", "arguments", "name", "v"]))
        params = f'{{"protocolVersion":"2025-11-25","name":"mcp_aql_read","{member}":{deep}}}'
        body = f'{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{params}}}'.encode()
        return Shot(body, sessionless=method == "initialize")
    if kind == 5:
        size = draw(st.sampled_from([10_000, 200_000, 1_100_000]))
        return Shot(dumps(request(draw(st.sampled_from(["ping", "tools/call"])), {"s": "x" * size})))
    if kind == 6:
        text = st.sampled_from(LONE_SURROGATES) | odd_text
        method = draw(st.sampled_from(["ping", "tools/call", "initialize"]))
        return Shot(dumps(request(method, {"s": draw(text), draw(text): 1}, draw(text))))
    if kind == 7:
        return Shot(dumps([request("ping", {}) for _ in range(draw(st.integers(0, 3)))]))
    # Non-standard JSON a lenient parser might take.
    return Shot(draw(st.sampled_from([b"NaN", b'{"id": NaN}', b"{'a': 1}", b"[1,]", b"\xef\xbb\xbf{}", b" ", b""])))


@st.composite
def aql_params(draw: st.DrawFn, surface: Surface, operation: str) -> dict[str, Any]:
    """Params for `operation`: its required ones mostly present, some optional ones, now and then a stray."""
    values = aql_values(surface)
    params: dict[str, Any] = {}
    for name, required in surface.parameters.get(operation, []):
        if draw(st.integers(0, 9)) < (9 if required else 3):
            params[name] = draw(values[name])
    if draw(st.integers(0, 5)) == 0:
        params[draw(st.sampled_from(sorted(values)) | short_text)] = draw(json_values)
    return params


@st.composite
def aql_calls(draw: st.DrawFn, surface: Surface) -> Shot:
    operations = sorted(surface.operations)

    def one() -> dict[str, Any]:
        operation = draw(st.sampled_from(operations)) if draw(st.integers(0, 5)) else draw(short_text)
        call: dict[str, Any] = {"operation": operation, "params": draw(aql_params(surface, operation))}
        if draw(st.integers(0, 9)) == 0:
            call[draw(short_text)] = draw(json_values)
        return call

    kind = draw(st.integers(0, 9))
    if kind == 0:
        arguments: Any = {"operations": [one() for _ in range(draw(st.integers(0, 5)))]}
    elif kind == 1:
        arguments = draw(json_values)
    else:
        arguments = one()
    operation = arguments.get("operation") if isinstance(arguments, dict) else None
    home = surface.operations.get(operation) if isinstance(operation, str) else None
    tool = home if home is not None and draw(st.integers(0, 5)) else None
    if tool is None:
        tool = draw(st.sampled_from(surface.tools)) if draw(st.integers(0, 5)) else draw(short_text)
    return Shot(dumps(request("tools/call", {"name": tool, "arguments": arguments}, draw(ids))), kind="aql")


header_values = st.sampled_from(["", "*/*", "application/json", "text/event-stream", "none"]) | st.binary(
    max_size=40
).map(lambda raw: bytes(b for b in raw if 0x20 <= b < 0x7F or b >= 0x80).strip())


@st.composite
def with_headers(draw: st.DrawFn, shots: st.SearchStrategy[Shot]) -> Shot:
    shot = draw(shots)
    if draw(st.integers(0, 7)) == 0:
        name = draw(st.sampled_from(["mcp-protocol-version", "mcp-session-id", "accept", "content-type"]))
        choices = st.sampled_from(VERSIONS) if name == "mcp-protocol-version" else header_values
        shot.headers[name] = draw(choices | st.none())
    if draw(st.integers(0, 19)) == 0:
        shot.sessionless = True
    return shot


@st.composite
def streams(draw: st.DrawFn) -> Shot:
    """GET (resume with a random Last-Event-ID) or DELETE, with a random session id."""
    method = draw(st.sampled_from(["GET", "GET", "DELETE", "DELETE", "PUT"]))
    headers: dict[str, str | bytes | None] = {"mcp-session-id": draw(header_values | st.none())}
    if method == "GET":
        last = st.sampled_from(["0", "-1", "abc", "x:1", "p1:18446744073709551616", "s:1", "p:٣"]) | header_values
        headers["last-event-id"] = draw(last | st.none())
    return Shot(method=method, headers=headers, sessionless=True, kind="stream")


def shots(surface: Surface) -> st.SearchStrategy[Shot]:
    """A mix weighted towards what reaches the handlers: MCP-AQL calls and well-formed requests."""
    kinds = [
        *[well_formed(surface)] * 3,
        *[aql_calls(surface)] * 4,
        notifications(),
        client_responses(),
        *[malformed()] * 2,
    ]
    return st.integers(0, len(kinds)).flatmap(
        lambda roll: streams() if roll == len(kinds) else with_headers(kinds[roll])
    )


# The run ------------------------------------------------------------------------------------------


class Fuzzer:
    """One keep-alive client and one session; sends shots and checks every answer."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.http = httpx.Client(base_url=server.base, timeout=60.0)
        self.token = server.token()
        self.base = {**MCP_HEADERS, "authorization": f"Bearer {self.token}"}
        init = request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}})
        response = self.http.post("/mcp", json=init, headers=self.base)
        self.session = {
            **self.base,
            "mcp-session-id": response.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
        self.sent = 0
        self.statuses: Counter[int] = Counter()
        self.outcomes: Counter[str] = Counter()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post("/mcp", json=request(method, params), headers=self.session)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def aql(self, operation: str, **params: Any) -> dict[str, Any]:
        """An operation through the read tool (introspect) or its own endpoint tool; its `data`."""
        tool = "mcp_aql_read" if operation == "introspect" else "mcp_aql_create"
        arguments = {"operation": operation, "params": params}
        envelope = self.call("tools/call", {"name": tool, "arguments": arguments})["result"]["structuredContent"]
        assert envelope["success"] is True, envelope
        data: dict[str, Any] = envelope["data"]
        return data

    def surface(self) -> Surface:
        tools = [tool["name"] for tool in self.call("tools/list", {})["result"]["tools"]]
        prompts = [prompt["name"] for prompt in self.call("prompts/list", {})["result"]["prompts"]]
        uris = [resource["uri"] for resource in self.call("resources/list", {})["result"]["resources"]]
        operations, parameters = {}, {}
        for operation in self.aql("introspect", query="operations")["operations"]:
            name = operation["name"]
            detail = self.aql("introspect", query="operations", name=name)["operation"]
            operations[name] = detail["mcpTool"]
            parameters[name] = [(p["name"], bool(p.get("required"))) for p in detail.get("parameters", [])]
        assert "list_records" in operations
        # Something to list, read, update and delete.
        for collection in ("fuzz", "notes"):
            self.aql("create_collection", collection=collection)
            for n in range(5):
                self.aql("create_record", collection=collection, data={"n": n, "title": f"t{n}", "tags": ["a"]})
        return Surface(tools, prompts, uris, operations, parameters)

    def send(self, shot: Shot) -> None:
        headers: dict[str, Any] = dict(self.base if shot.sessionless else self.session)
        for name, value in shot.headers.items():
            if value is None:
                headers.pop(name, None)
            else:
                # As raw bytes: a non-ASCII value travels as obs-text (RFC 9110 §5.5), as a hostile client sends it.
                headers[name] = value.encode() if isinstance(value, str) else value
        if shot.method == "DELETE" and headers.get("mcp-session-id") == self.session["mcp-session-id"]:
            return  # the run needs its session; DELETE of it is tested elsewhere
        try:
            request_ = self.http.build_request(shot.method, "/mcp", content=shot.body or None, headers=headers)
            response = self.http.send(request_, stream=True)
        except httpx.LocalProtocolError:
            return  # a header value the HTTP client itself refuses to send: nothing reached the server
        try:
            event_stream = response.headers.get("content-type", "").startswith("text/event-stream")
            body = b"" if event_stream and shot.method == "GET" else response.read()
        finally:
            response.close()
        self.sent += 1
        self.statuses[response.status_code] += 1
        self.outcomes.update(f"{shot.kind or 'malformed'}: {outcome}" for outcome in check(shot, response, body))


def check(shot: Shot, response: httpx.Response, body: bytes) -> list[str]:
    """Every assertion on one answer; returns what it was (JSON-RPC code, MCP-AQL code or success)."""
    status = response.status_code
    where = f"{shot.method} {shot.headers!r} {shot.body[:300]!r} -> {status} {body[:500]!r}"
    assert status != 500, where
    assert status < 500 or status in ALLOWED_5XX, where
    text = body.decode("utf-8", errors="replace")
    assert not any(leak in text for leak in LEAKS), where
    assert '"INTERNAL_ERROR"' not in text, where
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
    elif body:
        messages = [json.loads(body)]
    else:
        assert status < 400 or status == 405, where
        return [f"http {status}"]
    outcomes = [check_message(message, where) for message in messages]
    if status >= 400:
        assert len(messages) == 1, where
        assert "error" in messages[0], where
        if status in ALLOWED_5XX:
            assert messages[0]["error"]["code"] == ALLOWED_5XX[status], where
    return outcomes


def check_message(message: Any, where: str) -> str:
    assert isinstance(message, dict), where
    assert message.get("jsonrpc") == "2.0", where
    if "method" in message:
        return "server message"
    if "error" in message:
        error = message["error"]
        assert set(message) == {"jsonrpc", "id", "error"}, where
        assert isinstance(error, dict), where
        assert isinstance(error.get("code"), int), where
        assert isinstance(error.get("message"), str), where
        assert error["code"] != -32603, where
        reason = error.get("data", {}).get("reason") if isinstance(error.get("data"), dict) else None
        return f"{error['code']} {reason}" if reason else str(error["code"])
    result = message["result"]
    envelope = result.get("structuredContent") if isinstance(result, dict) else None
    if isinstance(envelope, dict) and envelope.get("success") is False:
        error = envelope.get("error")
        return f"aql {error.get('code') if isinstance(error, dict) else error}"
    return "aql success" if isinstance(envelope, dict) else "result"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The service on each engine in turn: what a caller sends reaches the store's text and JSON columns."""
    env = {
        "AQL_MCP_LIMITS__RATE_PER_SECOND": "1000000",
        "AQL_MCP_LIMITS__RATE_BURST": "1000000",
        "AQL_MCP_LIMITS__MAX_SESSIONS_PER_PRINCIPAL": "1000000",
    }
    if request.param == "postgres":
        env["AQL_MCP_STORE__URL"] = request.getfixturevalue("database")
    with start_server(tmp_path_factory.mktemp("fuzz"), env=env, plugins=()) as process:
        yield process


@pytest.mark.timeout(600)  # about 20 s alone; a loaded 2-core machine may take several times that
def test_a_seeded_random_run_of_5000_messages_gets_no_500_and_leaves_the_server_serving(server: ServerProcess) -> None:
    fuzzer = Fuzzer(server)
    surface = fuzzer.surface()
    started = time.monotonic()

    @seed(SEED)
    @settings(
        max_examples=MESSAGES // PER_EXAMPLE,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(shots(surface), min_size=PER_EXAMPLE, max_size=PER_EXAMPLE))
    def run(batch: list[Shot]) -> None:
        for shot in batch:
            fuzzer.send(shot)

    run()
    elapsed = time.monotonic() - started
    rate = fuzzer.sent / elapsed
    print(f"\nfuzz: {fuzzer.sent} messages in {elapsed:.1f}s ({rate:.0f}/s); statuses {dict(fuzzer.statuses)}")
    print(f"fuzz outcomes: {dict(fuzzer.outcomes.most_common())}")
    assert fuzzer.sent >= 5_000
    assert server.process.poll() is None
    assert httpx.get(f"{server.base}/health", timeout=10.0).status_code == 200
    assert fuzzer.call("ping", {})["result"] == {}
    assert fuzzer.aql("create_collection", collection="after_fuzz")["name"] == "after_fuzz"
    log = server.log_text()
    # The store is healthy here: an engine error in the log is one an input caused, even if it was a 503.
    for event in ("unhandled_exception", "internal_error", "store_error", "bus_notify_failed", "bus_signal_failed"):
        assert f'"event":"{event}"' not in log, event
