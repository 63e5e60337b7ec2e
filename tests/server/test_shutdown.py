"""Graceful shutdown against a real process (deployment issue; corporate §16): SIGTERM drains first.

`/ready` turns 503 at once, a call in flight when SIGTERM arrives completes, and the process
exits 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Registry, Tool
from tests.support.asgi import open_session, rpc
from tests.support.server import free_port, start_server

pytestmark = pytest.mark.anyio

CALL_SECONDS = 1.5


class SlowPlugin:
    """One tool that takes a while and leaves a mark when it starts."""

    name = "slow-fixture"

    def register(self, registry: Registry) -> None:
        registry.add_tool(Tool("slow_call", "Takes a while; read-only, risk: low", self.slow))

    async def slow(self, arguments: dict[str, Any], ctx: Context) -> str:
        (Path(os.environ["AQL_MCP_STORE__PATH"]) / "started").touch()
        await anyio.sleep(CALL_SECONDS)
        return "completed"


plugin = SlowPlugin()


async def test_sigterm_drains_then_lets_the_call_in_flight_finish_and_exits_0(tmp_path: Path) -> None:
    probes_port = free_port()
    env = {
        "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0.5",
        "AQL_MCP_SHUTDOWN__GRACE_SECONDS": "10",
        "AQL_MCP_PROBES__PORT": str(probes_port),
    }
    with start_server(tmp_path, env=env, plugins=("tests.server.test_shutdown:plugin",)) as server:
        async with httpx.AsyncClient(base_url=server.base, timeout=10) as http:
            session = await open_session(http, server.token())
            answer: list[httpx.Response] = []

            async def call() -> None:
                request = rpc("tools/call", {"name": "slow_call", "arguments": {}}, message_id=7)
                answer.append(await http.post("/mcp", json=request, headers=session))

            with anyio.fail_after(10):
                async with anyio.create_task_group() as group:
                    group.start_soon(call)
                    # Another process leaves the mark: polled, with the deadline above.
                    while not (tmp_path / "started").exists():  # noqa: ASYNC110
                        await anyio.sleep(0.02)
                    server.process.send_signal(signal.SIGTERM)
                    async with httpx.AsyncClient(timeout=2) as probe:
                        ready = await probe.get(f"{server.base}/ready")
                        own_port = await probe.get(f"http://127.0.0.1:{probes_port}/ready")
            code = await anyio.to_thread.run_sync(lambda: server.process.wait(timeout=15))

    assert ready.status_code == own_port.status_code == 503  # on the probes port too
    assert answer[0].status_code == 200
    assert answer[0].json()["result"]["content"][0]["text"] == "completed"
    assert code == 0


async def test_sigterm_ends_open_get_streams_with_a_retry_hint(tmp_path: Path) -> None:
    env = {"AQL_MCP_SHUTDOWN__DRAIN_SECONDS": "0.2", "AQL_MCP_SHUTDOWN__GRACE_SECONDS": "5"}
    with start_server(tmp_path, env=env) as server:
        async with httpx.AsyncClient(base_url=server.base, timeout=10) as http:
            session = await open_session(http, server.token())
            with anyio.fail_after(10):
                async with http.stream("GET", "/mcp", headers={**session, "accept": "text/event-stream"}) as stream:
                    assert stream.status_code == 200
                    server.process.send_signal(signal.SIGTERM)
                    body = b"".join([chunk async for chunk in stream.aiter_bytes()])
            code = await anyio.to_thread.run_sync(lambda: server.process.wait(timeout=15))
    assert b"retry: " in body.split(b"shutting down")[-1]
    assert code == 0


def test_the_process_is_started_by_the_console_script() -> None:
    done = subprocess.run([str(Path(".venv/bin/aql-mcp")), "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert done.stdout.startswith("aql-mcp ")
