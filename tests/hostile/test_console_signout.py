"""Console sign-out that only dropped the cookie (issue 27, N6): the old cookie still opened
`/console`, and a live `/console/events` stream kept delivering codes after the sign-out, although
docs/console.md says a signed-out operator stops seeing them.

What must hold against a real `aql-mcp serve --dev`: after `POST /console/logout` the signed-out
token is refused on every console route (401 `invalid_token`) wherever it comes from, and the
stream it opened ends without another overview.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import httpx
import pytest

from tests.support.console import csrf_on, login_code
from tests.support.redaction import remember_secret
from tests.support.server import ServerProcess, start_server
from tests.support.sse import iter_events

JSON = {"accept": "application/json"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {"AQL_MCP_CONSOLE__REFRESH_SECONDS": "0.2"}
    with start_server(tmp_path_factory.mktemp("signout"), env=env) as process:
        yield process


async def sign_in(http: httpx.AsyncClient, server: ServerProcess, name: str) -> str:
    """The development login, as a browser does it: the session cookie's token."""
    form = await http.get("/console/login")
    signed_in = await http.post(
        "/console/login", data={"operator": name, "csrf": csrf_on(form.text), "code": login_code(server)}
    )
    assert signed_in.status_code == 303
    return remember_secret(http.cookies["aql_console"])


@pytest.mark.anyio
async def test_a_signed_out_cookie_opens_nothing_and_its_live_stream_ends(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.base, timeout=20) as browser:
        token = await sign_in(browser, server, "olga")
        kept = {"cookie": f"aql_console={token}"}
        async with httpx.AsyncClient(base_url=server.base, timeout=20) as thief:
            async with thief.stream("GET", "/console/events", headers=kept) as stream:
                assert stream.status_code == 200
                events = iter_events(stream)
                assert (await anext(events)).data
                page = await browser.get("/console")
                signed_out = await browser.post("/console/logout", data={"csrf": csrf_on(page.text)})
                assert signed_out.status_code == 303
                with anyio.fail_after(10):
                    after = [event async for event in events if event.data]
            assert after == []
            for path in ("/console", "/console/events"):
                refused = await thief.get(path, headers={**kept, **JSON})
                assert refused.status_code == 401
                assert 'error="invalid_token"' in refused.headers["www-authenticate"]


@pytest.mark.anyio
async def test_signing_out_one_browser_leaves_another_sign_in_open(server: ServerProcess) -> None:
    async with (
        httpx.AsyncClient(base_url=server.base, timeout=20) as first,
        httpx.AsyncClient(base_url=server.base, timeout=20) as second,
    ):
        await sign_in(first, server, "olga")
        await sign_in(second, server, "olga")
        page = await first.get("/console")
        assert (await first.post("/console/logout", data={"csrf": csrf_on(page.text)})).status_code == 303
        assert (await second.get("/console")).status_code == 200
