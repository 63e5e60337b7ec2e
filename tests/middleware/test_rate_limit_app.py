"""Per-principal limits through the real app, in process (corporate §14; Appendix B: -32003 / HTTP 429).

The request rate (token bucket) and the open sessions per principal: the caller over a limit gets
429 with `Retry-After` and `error.data.retryAfter`, while every other caller keeps being served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.settings import Settings
from tests.support.asgi import MCP_HEADERS, asgi_client, dev_settings, initialize_params, open_session, rpc

pytestmark = pytest.mark.anyio

SESSION_RETRY_AFTER = 7


def mint(settings: Settings, subject: str) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    return issuer.mint(subject=subject, scopes=["mcp"], ttl=600)


def assert_rate_limited(response: httpx.Response) -> dict[str, Any]:
    """Appendix B.2/B.3 and C.2: 429, `Retry-After` (MUST), code -32003 and `data.retryAfter` in seconds."""
    assert response.status_code == 429
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == -32003
    retry_after = error["data"]["retryAfter"]
    assert isinstance(retry_after, int)
    assert retry_after >= 1
    assert response.headers["retry-after"] == str(retry_after)
    return error


async def initialize(http: httpx.AsyncClient, token: str) -> httpx.Response:
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    return await http.post("/mcp", json=rpc("initialize", initialize_params()), headers=headers)


# Request rate ----------------------------------------------------------------------------------


@pytest.fixture
def rate_settings(tmp_path: Path) -> Settings:
    # One token per second and a burst of three: a fourth request within the same second is over.
    return dev_settings(tmp_path, limits={"rate_per_second": 1, "rate_burst": 3})


async def test_the_request_past_the_burst_is_429_with_retry_after(rate_settings: Settings) -> None:
    async with asgi_client(rate_settings) as http:
        headers = await open_session(http, mint(rate_settings, "alice"))  # initialize + initialized
        third = await http.post("/mcp", json=rpc("tools/list", {}, 2), headers=headers)
        fourth = await http.post("/mcp", json=rpc("tools/list", {}, 3), headers=headers)

    assert third.status_code == 200
    assert_rate_limited(fourth)
    assert int(fourth.headers["retry-after"]) == 1


async def test_a_rate_limited_principal_does_not_stop_the_service_for_others(rate_settings: Settings) -> None:
    async with asgi_client(rate_settings) as http:
        alice = await open_session(http, mint(rate_settings, "alice"))
        for message_id in (2, 3):
            await http.post("/mcp", json=rpc("tools/list", {}, message_id), headers=alice)
        refused = await http.post("/mcp", json=rpc("ping", {}, 4), headers=alice)
        bob = await open_session(http, mint(rate_settings, "bob"))
        served = await http.post("/mcp", json=rpc("tools/list", {}, 2), headers=bob)

    assert_rate_limited(refused)
    assert served.status_code == 200
    assert served.json()["result"]["tools"]


async def test_the_rate_follows_the_subject_not_the_token(rate_settings: Settings) -> None:
    """A fresh token for the same subject does not buy a fresh budget."""
    async with asgi_client(rate_settings) as http:
        first = await open_session(http, mint(rate_settings, "alice"))
        await http.post("/mcp", json=rpc("ping", {}, 2), headers=first)
        again = {**first, "authorization": f"Bearer {mint(rate_settings, 'alice')}"}
        response = await http.post("/mcp", json=rpc("ping", {}, 3), headers=again)

    assert_rate_limited(response)


async def test_a_refused_request_is_not_dispatched(rate_settings: Settings) -> None:
    """The fourth request is refused before the body is read: even a malformed body gets 429, not 400."""
    async with asgi_client(rate_settings) as http:
        headers = await open_session(http, mint(rate_settings, "alice"))
        await http.post("/mcp", json=rpc("ping", {}, 2), headers=headers)
        response = await http.post("/mcp", content=b"{not json", headers=headers)

    assert_rate_limited(response)


# Sessions per principal ------------------------------------------------------------------------


@pytest.fixture
def session_settings(tmp_path: Path) -> Settings:
    return dev_settings(
        tmp_path,
        limits={"max_sessions_per_principal": 2},
        sessions={"retry_after_seconds": SESSION_RETRY_AFTER},
    )


async def test_an_initialize_past_the_sessions_per_principal_is_429(session_settings: Settings) -> None:
    """Corporate §14: one caller may not hold the whole session table (429, not the table-full 503)."""
    token = mint(session_settings, "alice")

    async with asgi_client(session_settings) as http:
        opened = [await initialize(http, token) for _ in range(2)]
        third = await initialize(http, token)

    assert [r.status_code for r in opened] == [200, 200]
    error = assert_rate_limited(third)
    assert error["data"]["retryAfter"] == SESSION_RETRY_AFTER
    assert third.json()["id"] == 1
    assert "mcp-session-id" not in third.headers


async def test_another_subject_still_gets_a_session_when_one_is_at_its_limit(session_settings: Settings) -> None:
    async with asgi_client(session_settings) as http:
        for _ in range(3):
            await initialize(http, mint(session_settings, "alice"))
        bob = await initialize(http, mint(session_settings, "bob"))

    assert bob.status_code == 200
    assert bob.headers["mcp-session-id"]


async def test_ending_a_session_frees_a_place_for_the_same_subject(session_settings: Settings) -> None:
    token = mint(session_settings, "alice")

    async with asgi_client(session_settings) as http:
        first = await open_session(http, token)
        await open_session(http, token)
        refused = await initialize(http, token)
        deleted = await http.delete("/mcp", headers=first)
        again = await initialize(http, token)

    assert refused.status_code == 429
    assert deleted.status_code == 204
    assert again.status_code == 200
