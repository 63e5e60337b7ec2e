"""The requests of the attack benchmark (`bench/attacks.py`, issue 27) and the client that sends them.

Each builder returns the JSON-RPC body (or MCP-AQL params) an attacker or a probing tenant sends;
`tests/bench/test_attack_calls.py` sends each one to a real `aql-mcp serve` and checks that the
service understands it, so the benchmark measures the attack it names and not a refused request.
The client keeps every answer, refused ones included: a 429 or a VALIDATION_* error is what a fixed
service may answer an attacker, and the table counts it rather than stopping the run.
"""

from __future__ import annotations

import errno
import re
import resource
import secrets
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

VERSION = "2025-11-25"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
# Every request of the benchmark gives up after this long: a frozen replica ends the row, not the run.
GUARD_SECONDS = 15.0
# The MCP-AQL tool of each operation the benchmark sends (its CRUDE family).
TOOLS = {
    "execute_agent": "mcp_aql_execute",
    "record_execution_step": "mcp_aql_create",
    "complete_execution": "mcp_aql_execute",
    "create_collection": "mcp_aql_create",
    "create_record": "mcp_aql_create",
    "get_record": "mcp_aql_read",
    "list_records": "mcp_aql_read",
    "search_records": "mcp_aql_read",
    "execute_export": "mcp_aql_execute",
    "get_execution": "mcp_aql_read",
    "introspect": "mcp_aql_read",
}
# N1: a 4,000-character hint of one-letter words, the longest `nextActionHint` v0.2.0 accepts.
HINT = ("a " * 2000)[:4000]
# N1: the adversarial glob, `'*a' * 50 + 'b<i>'`: 103-105 characters, never matching the hint.
PATTERN_STARS = 50
PATTERNS_PER_LIST = 100
FIT_TRIES = 16
# N3: each flood connection is held this long (older than the 1 s eviction floor), then closed.
FLOOD_HOLD_SECONDS = 1.5
FLOOD_TICK_SECONDS = 0.01
# Below the 20,000 descriptors this machine allows a process.
FLOOD_MAX_OPEN = 15_000


def aql_call(operation: str, params: dict[str, Any], message_id: int | None = None) -> dict[str, Any]:
    """A `tools/call` of the operation's MCP-AQL tool."""
    arguments = {"operation": operation, "params": params}
    call_id = message_id if message_id is not None else secrets.randbelow(10**9)
    return {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tools/call",
        "params": {"name": TOOLS[operation], "arguments": arguments},
    }


def adversarial_pattern(index: int, length: int | None = None) -> str:
    """`'*a' * 50 + 'b<index>'`, or the same shape cut to `length` characters (still ending in `b<index>`)."""
    tail = f"b{index}"
    if length is None:
        return "*a" * PATTERN_STARS + tail
    return (("*a" * length)[: max(0, length - len(tail))] + tail)[-length:]


def execute_agent(name: str, count: int = 0, length: int | None = None) -> dict[str, Any]:
    """`execute_agent` params: with `count` > 0, that many adversarial `deny` and `requiresApproval` patterns."""
    params: dict[str, Any] = {"element_name": name}
    if count:
        params["deny"] = [adversarial_pattern(i, length) for i in range(count)]
        params["requiresApproval"] = [adversarial_pattern(count + i, length) for i in range(count)]
    return params


def record_step(name: str, execution_id: str) -> dict[str, Any]:
    return {"element_name": name, "execution_id": execution_id, "nextActionHint": HINT}


def heavy_listing(worker: int, records: int) -> tuple[str, dict[str, Any]]:
    """N2: a sorted listing that no index serves (a title substring) or a sorted free-text search."""
    sort = {"field": "n", "order": "desc"}
    if worker % 2:
        return "search_records", {
            "collection": "notes",
            "query": f'"note {secrets.randbelow(records)}"',
            "sort": sort,
            "first": 20,
        }
    title = {"contains": f"te {secrets.randbelow(records)}"}
    return "list_records", {"collection": "notes", "filter": {"title": title}, "sort": sort, "first": 20}


@dataclass(frozen=True)
class Fit:
    """The adversarial patterns the service accepted (`count` per list, `length` characters each)."""

    count: int
    length: int
    tries: int

    @property
    def label(self) -> str:
        return f"{self.count}+{self.count} patterns x {self.length} chars"


LIMIT = re.compile(r"at most (\d+)")


def limit_from(error: dict[str, Any], length: int) -> tuple[str, int] | None:
    """What a VALIDATION_* refusal of `execute_agent` (patterns of `length` characters) says it allows:
    ("count" | "length" | "total", n), or None when it names no limit that explains the refusal.

    The fixed service names its limit in the error details; v0.2.0 names the list limit in its
    `constraint` text ("at most 100 items"). Words about items or patterns (not their size) bound
    the count; a total or sum bounds both lists together; a size under `length` bounds one pattern;
    bytes at or above `length` can only be a total.
    """
    details = error.get("details") or {}
    found: tuple[str, int] | None = None
    for key, value in details.items():
        if isinstance(value, int) and not isinstance(value, bool) and re.search("max|limit", key):
            found = (key, value)
    if found is None:
        text = " ".join(str(v) for v in (*details.values(), error.get("message", "")))
        match = LIMIT.search(text)
        if match is None:
            return None
        found = (text[match.start() : match.end() + 12], int(match.group(1)))
    words, value = found[0].lower(), found[1]
    if re.search("item|count|pattern", words) and not re.search("char|length|byte|size", words):
        return "count", value
    if re.search("total|sum", words) or (value >= length and "byte" in words):
        return "total", value
    return ("length", value) if value < length else None


def next_fit(count: int, length: int, error: dict[str, Any]) -> tuple[int, int]:
    """The next smaller pattern set to try after `error` refused `count` x `length`."""
    limit = limit_from(error, length)
    cut = (count, length // 2)
    if limit is not None:
        kind, value = limit
        if kind == "count":
            cut = (min(count, value), length)
        elif kind == "total":
            # The sum over both lists; the separators JSON adds are not counted (a margin of one char).
            cut = (count, min(length - 1, max(1, value // (2 * count) - 1)))
        else:
            cut = (count, value)
    # A limit the set already keeps to says nothing new: halve the length rather than resend it.
    return cut if cut != (count, length) else (count, length // 2)


@dataclass
class Answer:
    status: int
    envelope: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == 200 and bool(self.envelope.get("success"))

    @property
    def data(self) -> dict[str, Any]:
        return dict(self.envelope.get("data") or {})

    @property
    def error(self) -> dict[str, Any]:
        return dict(self.envelope.get("error") or {})

    @property
    def outcome(self) -> str:
        """ok, an MCP-AQL error code, `http <status>`, or the JSON-RPC error code."""
        if self.ok:
            return "ok"
        if self.error:
            return str(self.error.get("code"))
        return f"http {self.status}" if self.status != 200 else str(self.envelope.get("rpc_error", "error"))


class Tenant:
    """One caller (its own token and MCP session) on one service."""

    def __init__(self, base: str, token: str, connections: int = 256) -> None:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.http = httpx.AsyncClient(base_url=base, timeout=GUARD_SECONDS, limits=limits)
        self.headers = {**HEADERS, "authorization": f"Bearer {token}"}

    async def open(self) -> Tenant:
        init = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "bench-attacks", "version": "1"}}
        answer = await self.http.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, headers=self.headers
        )
        answer.raise_for_status()
        self.headers |= {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
        await self.http.post(
            "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
        )
        return self

    async def aql(self, operation: str, params: dict[str, Any]) -> Answer:
        start = time.perf_counter()
        response = await self.http.post("/mcp", json=aql_call(operation, params), headers=self.headers)
        elapsed = time.perf_counter() - start
        if response.status_code != 200:
            return Answer(response.status_code, seconds=elapsed)
        body = response.json()
        if "error" in body:
            return Answer(200, {"success": False, "rpc_error": body["error"].get("code")}, elapsed)
        return Answer(200, dict(body["result"].get("structuredContent") or {}), elapsed)

    async def must(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """The operation's data; anything else stops the benchmark (a setup step, not the attack)."""
        answer = await self.aql(operation, params)
        if not answer.ok:
            raise RuntimeError(f"{operation} failed: {answer.status} {answer.envelope}")
        return answer.data

    async def close(self) -> None:
        await self.http.aclose()


async def declared_limits(tenant: Tenant, count: int, length: int) -> tuple[int, int]:
    """`count` and `length` lowered to what `execute_agent`'s introspection declares for `deny` and
    `requires_approval` (`maxItems`, `items.maxLength`), when it declares them."""
    answer = await tenant.aql("introspect", {"query": "operations", "name": "execute_agent"})
    parameters = (answer.data.get("operation") or {}).get("parameters") or [] if answer.ok else []
    for parameter in parameters:
        if parameter.get("name") in ("deny", "requires_approval", "requiresApproval"):
            count = min(count, int(parameter.get("maxItems", count)))
            length = min(length, int((parameter.get("items") or {}).get("maxLength", length)))
    return count, length


async def fit_patterns(tenant: Tenant, name: str) -> tuple[Fit, str]:
    """The largest adversarial pattern set `execute_agent` accepts, from the issue's 100+100 x ~104
    characters (or less, as its introspection declares) down: cut to what each refusal names
    (`next_fit`), then, between the longest accepted and the shortest refused length, bisected to
    within 5 % (at most FIT_TRIES tries). Returns the fit and the id of the execution it started
    (the runs of shorter accepted sets are completed)."""
    count, length = await declared_limits(
        tenant, PATTERNS_PER_LIST, len(adversarial_pattern(2 * PATTERNS_PER_LIST - 1))
    )
    accepted: tuple[int, str] | None = None  # the longest accepted length at `count`, and its run
    refused: int | None = None  # the shortest refused length at `count`
    for tries in range(1, FIT_TRIES + 1):
        answer = await tenant.aql("execute_agent", execute_agent(name, count, length))
        if answer.ok:
            if accepted is not None:
                await tenant.aql("complete_execution", {"element_name": name, "execution_id": accepted[1]})
            accepted = (length, str(answer.data["execution_id"]))
        elif not str(answer.error.get("code", "")).startswith("VALIDATION_") or length <= 1:
            raise RuntimeError(f"execute_agent refused the patterns: {answer.status} {answer.envelope}")
        else:
            refused = length
            cut_count, cut = next_fit(count, length, answer.error)
            if cut_count != count:
                count, accepted, refused = cut_count, None, None
            length = cut if accepted is None else max(cut, (accepted[0] + length) // 2)
        if accepted is not None:
            best = accepted[0]
            if refused is None or refused - best <= max(1, best // 20):
                return Fit(count, best, tries), accepted[1]
            length = max(length, (best + refused) // 2) if answer.ok else length
            if length <= best:
                return Fit(count, best, tries), accepted[1]
    if accepted is None:
        raise RuntimeError(f"execute_agent accepted no adversarial pattern set in {FIT_TRIES} tries")
    return Fit(count, accepted[0], FIT_TRIES), accepted[1]


def flood(port: int, seconds: float, rate: float) -> dict[str, float]:
    """`rate` bare connects per second (no byte sent) to 127.0.0.1:`port` for `seconds`, each held
    FLOOD_HOLD_SECONDS; returns how many were made and how many the kernel refused at once."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held: list[tuple[float, socket.socket]] = []
    made = refused = 0
    start = time.monotonic()
    while (now := time.monotonic()) - start < seconds:
        for _ in range(max(0, int(rate * (now - start)) - made - refused)):
            sock = socket.socket()
            # Closed with a reset (linger 0): no TIME_WAIT, so the flood does not run out of local ports.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.setblocking(False)
            if sock.connect_ex(("127.0.0.1", port)) in (0, errno.EINPROGRESS):
                held.append((now + FLOOD_HOLD_SECONDS, sock))
                made += 1
            else:
                sock.close()
                refused += 1
        keep = 0
        while keep < len(held) and (held[keep][0] <= now or len(held) - keep > FLOOD_MAX_OPEN):
            held[keep][1].close()
            keep += 1
        del held[:keep]
        time.sleep(FLOOD_TICK_SECONDS)
    for _, sock in held:
        sock.close()
    return {"connects": made, "refused": refused, "seconds": time.monotonic() - start}
