"""Redaction by construction (corporate §15.2; observability issue): no secret reaches a log line.

A real server gets secrets in every place a client can put them; then every line of its log is
searched. The whole test run is also checked at its end (tests/conftest.py) for every token it
minted.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.asgi import MCP_HEADERS, open_session, rpc
from tests.support.redaction import remember_secret
from tests.support.server import ServerProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.anyio

COOKIE = remember_secret("session=c00k1e-s3cr3t-9f8e7d6c5b4a")
PASSWORD = remember_secret("hunter2-p4ssw0rd-0123456789abcdef")


async def test_no_secret_a_client_sends_appears_in_any_log_line(server: ServerProcess, tmp_path: Path) -> None:
    token = server.token(subject="redaction")
    garbage = remember_secret("not-a-real-token-but-secret-0123456789")
    expired = remember_secret(server.token(subject="late", ttl=60)[:-4] + "AAAA")
    async with httpx.AsyncClient(base_url=server.base, timeout=10) as http:
        session = await open_session(http, token)
        await http.post("/mcp", json=rpc("ping"), headers={**session, "cookie": COOKIE})
        for bad in (garbage, expired):
            await http.post("/mcp", json=rpc("ping"), headers={**MCP_HEADERS, "authorization": f"Bearer {bad}"})
        await http.post(f"/mcp?access_token={token}&password={PASSWORD}", json=rpc("ping"), headers=MCP_HEADERS)
        call = {"name": "test_sampling", "arguments": {"prompt": PASSWORD}}
        await http.post("/mcp", json=rpc("tools/call", call), headers=session)
        await http.post("/mcp", json=rpc("tools/call", {"name": PASSWORD, "arguments": {}}), headers=session)
        await http.post("/mcp", content=PASSWORD.encode(), headers=session)
        marker = "redaction-last-request"
        # Not a probe: a successful probe is logged at debug only.
        await http.get("/", headers={"x-request-id": marker})

    await eventually(lambda: marker in server.log_text(), "the last request was never logged")
    log = server.log_text()
    for secret in (token, garbage, expired, COOKIE, PASSWORD, token.split(".")[2]):
        assert secret not in log
    assert "auth_failed" in log
