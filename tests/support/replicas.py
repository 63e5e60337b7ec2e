"""Several `aql-mcp serve` replicas sharing one PostgreSQL database, and ways to spread traffic
over them: a round-robin transport for the official client and a round-robin HTTP proxy.

The replicas run in development mode with one issuer, one audience and one signing key, as a
deployment's replicas share one IdP: a token is valid on every replica. Asked to, they also share
one `mcp.request_state_key`, as a deployment's replicas share one Secret: a modern request's
`requestState` signed by one replica then opens on every other (docs/eras.md, "Asking the client").
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import secrets
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import httpx2
import uvicorn
from starlette.types import Receive, Scope, Send

from aql_mcp.auth.dev_issuer import KEY_FILE, DevIssuer
from tests.support.asgi import CONFORMANCE
from tests.support.redaction import remember_secret
from tests.support.server import ServerProcess, free_port, start_server
from tests.support.wait import until

ISSUER = "http://aql-mcp.replicas.test"
AUDIENCE = f"{ISSUER}/mcp"
SLOW = "tests.support.slow:plugin"


@dataclass
class Replicas:
    servers: list[ServerProcess]
    key_dir: Path
    # Kept out of repr: a failing test prints its fixtures' values.
    request_state_key: str | None = field(default=None, repr=False)

    @property
    def ports(self) -> list[int]:
        return [server.port for server in self.servers]

    def token(self, subject: str = "tester") -> str:
        issuer = DevIssuer(state_dir=self.key_dir, issuer=ISSUER, audience=AUDIENCE)
        return remember_secret(issuer.mint(subject=subject, scopes=["mcp"], ttl=600))

    def served(self, request_id: str) -> int:
        """The index of the replica whose access log has the request sent with this X-Request-Id, once
        it is written (after the response): fails if no replica or more than one logged it."""
        found: list[int] = []

        def logged() -> bool:
            found[:] = [index for index, server in enumerate(self.servers) if request_id in _access_ids(server)]
            return bool(found)

        until(logged, f"no replica logged the request {request_id}")
        assert len(found) == 1, f"the request {request_id} was logged by replicas {found}"
        return found[0]


@dataclass(frozen=True)
class Replica:
    """One replica of a group, with tokens every replica accepts (the shared development key): the
    `Endpoint` tests/support/tasks.py calls."""

    server: ServerProcess
    replicas: Replicas

    @property
    def url(self) -> str:
        return self.server.url

    def token(self, subject: str) -> str:
        return self.replicas.token(subject)


def _access_ids(server: ServerProcess) -> set[str]:
    """The request ids of the access log lines (`http_request`) in a replica's JSON log."""
    ids = set()
    for line in server.log_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == "http_request" and "request_id" in entry:
            ids.add(str(entry["request_id"]))
    return ids


@contextmanager
def start_replicas(
    root: Path,
    database_url: str,
    count: int = 3,
    env: dict[str, str] | None = None,
    *,
    share_request_state_key: bool = False,
) -> Iterator[Replicas]:
    """`count` replicas on free ports, all on `database_url`, sharing the development signing key
    and, if `share_request_state_key`, one fresh `mcp.request_state_key`."""
    key_dir = root / "key"
    key_dir.mkdir(parents=True)
    DevIssuer(state_dir=key_dir, issuer=ISSUER, audience=AUDIENCE)  # creates the key file
    state_key = remember_secret(secrets.token_urlsafe(48)) if share_request_state_key else None
    shared = {
        "AQL_MCP_STORE__URL": database_url,
        "AQL_MCP_AUTH__ISSUER": ISSUER,
        "AQL_MCP_AUTH__AUDIENCE": AUDIENCE,
        **({"AQL_MCP_MCP__REQUEST_STATE_KEY": state_key} if state_key else {}),
        **(env or {}),
    }
    with ExitStack() as stack:
        servers = []
        for index in range(count):
            state = root / f"replica-{index}"
            state.mkdir()
            shutil.copy(key_dir / KEY_FILE, state / KEY_FILE)
            servers.append(stack.enter_context(start_server(state, env=shared, plugins=(CONFORMANCE, SLOW))))
        yield Replicas(servers, key_dir, state_key)


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each request to the next replica, as a gateway without session affinity does; `ports`
    records where each request went."""

    def __init__(self, ports: Sequence[int]) -> None:
        self._next = itertools.cycle(ports)
        self._inner = httpx2.AsyncHTTPTransport()
        self.sent: list[tuple[str, int, str | None]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self._next)
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"127.0.0.1:{port}"
        self.sent.append((request.method, port, request.headers.get("last-event-id")))
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class RoundRobinProxy:
    """An HTTP proxy on 127.0.0.1 that streams each request to the next replica (for clients that
    take one URL, like the conformance suite). Like a gateway it passes every header on, Host
    included, so the replicas must allow the proxy's host (`proxy_settings`)."""

    def __init__(self, ports: Sequence[int]) -> None:
        self._next = itertools.cycle(ports)
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(None))
        port = next(self._next)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        query = scope["query_string"].decode()
        url = f"http://127.0.0.1:{port}{scope['path']}" + (f"?{query}" if query else "")
        request = self._client.build_request(scope["method"], url, headers=headers, content=body)
        response = await self._client.send(request, stream=True)
        try:
            passed = [
                (k, v) for k, v in response.headers.raw if k.lower() not in (b"content-length", b"transfer-encoding")
            ]
            await send({"type": "http.response.start", "status": response.status_code, "headers": passed})
            pump = asyncio.ensure_future(self._pump(response, send))
            gone = asyncio.ensure_future(_disconnected(receive))
            await asyncio.wait({pump, gone}, return_when=asyncio.FIRST_COMPLETED)
            for task in (pump, gone):
                task.cancel()
        finally:
            await response.aclose()

    async def _pump(self, response: httpx.Response, send: Send) -> None:
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def proxy_settings(port: int) -> dict[str, str]:
    """What the replicas need to be reached through the proxy on `port`: its host and origin allowed."""
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}"]
    return {
        "AQL_MCP_HTTP__ALLOWED_HOSTS": json.dumps(hosts),
        "AQL_MCP_HTTP__ALLOWED_ORIGINS": json.dumps([f"http://{host}" for host in hosts]),
    }


@contextmanager
def run_proxy(ports: Sequence[int], port: int | None = None) -> Iterator[str]:
    """The proxy on a free port (or `port`), in a thread of its own; its base URL."""
    port = port or free_port()
    config = uvicorn.Config(RoundRobinProxy(ports), host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the proxy did not start")
            threading.Event().wait(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def wait_for_replica_count(replicas: Replicas, count: int) -> None:
    """Each replica counts the others from the store's heartbeat table (every 5 s)."""

    def all_see() -> bool:
        pattern = re.compile(rf"^aql_mcp_replicas {count}\.0$", re.MULTILINE)
        return all(pattern.search(httpx.get(f"{s.base}/metrics").text) for s in replicas.servers)

    until(all_see, f"the replicas did not all count {count} replicas", seconds=20)
