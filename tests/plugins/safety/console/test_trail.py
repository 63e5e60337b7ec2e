"""`GET /console/trail` in-process: operator-only, filtered by time and limit, strict about its query
(plugins/safety/console/trail.py; docs/console.md, "The audit trail")."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from aql_mcp.audit.record import timestamp
from aql_mcp.audit.writer import AuditTrail
from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.settings import Settings
from aql_mcp.store.factory import open_store
from tests.support.asgi import asgi_client, dev_settings
from tests.support.audit import entry

pytestmark = pytest.mark.anyio
AT = 1_700_000_000.0


async def _written(settings: Settings, count: int) -> None:
    store = open_store(settings)
    await store.open()
    try:
        trail = AuditTrail(store.audit)
        for n in range(count):
            await trail.append(entry(n, at=AT + n, kind="execution", resource_id="exec_1"))
    finally:
        await store.close()


def _operator(settings: Settings) -> dict[str, str]:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    return {"authorization": "Bearer " + issuer.mint(subject="olivia", scopes=["aql:operator"], ttl=600)}


async def _get(http: httpx.AsyncClient, headers: dict[str, str], **params: str) -> httpx.Response:
    return await http.get("/console/trail", params=params, headers=headers)


async def test_the_trail_is_filtered_by_time_and_cut_at_the_limit_newest_first(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path)
    await _written(settings, 5)
    operator = _operator(settings)
    async with asgi_client(settings) as http:
        window = await _get(http, operator, resource_id="exec_1", since=timestamp(AT + 1), until=timestamp(AT + 4))
        newest = await _get(http, operator, resource_id="exec_1", limit="2")
        by_date = await _get(http, operator, since="2023-11-14", until="2023-11-15")
    assert window.status_code == 200
    assert [r["resource_id"] for r in window.json()["records"]] == ["exec_1"] * 3
    assert [r["seq"] for r in window.json()["records"]] == [4, 3, 2]
    assert [r["seq"] for r in newest.json()["records"]] == [5, 4]
    assert newest.headers["cache-control"] == "no-store"
    assert len(by_date.json()["records"]) == 5  # 1_700_000_000 is 2023-11-14 22:13 UTC


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "501"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"since": "yesterday"}, "since"),
        ({"agent": "x"}, "agent"),
    ],
)
async def test_a_query_the_trail_cannot_answer_is_400_naming_the_field(
    tmp_path: Path, query: dict[str, str], field: str
) -> None:
    settings = dev_settings(tmp_path)
    async with asgi_client(settings) as http:
        response = await _get(http, _operator(settings), **query)
    assert response.status_code == 400
    assert response.json()["error"]["data"]["field"] == field


async def test_a_repeated_filter_is_refused_rather_than_one_of_them_ignored(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path)
    async with asgi_client(settings) as http:
        response = await http.get("/console/trail?kind=mutation&kind=refusal", headers=_operator(settings))
    assert response.status_code == 400
    assert response.json()["error"]["data"]["field"] == "kind"


async def test_the_trail_is_for_operators_only(tmp_path: Path, token: str) -> None:
    settings = dev_settings(tmp_path)
    async with asgi_client(settings) as http:
        anonymous = await http.get("/console/trail")
        agent = await http.get("/console/trail", headers={"authorization": f"Bearer {token}"})
    assert (anonymous.status_code, agent.status_code) == (401, 403)


async def test_a_browser_gets_the_trail_as_an_escaped_table(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path)
    store = open_store(settings)
    await store.open()
    try:
        await AuditTrail(store.audit).append(entry(0, at=AT, kind="refusal", code="<b>CODE</b>", resource_id="exec_1"))
    finally:
        await store.close()
    async with asgi_client(settings) as http:
        page = await _get(http, {**_operator(settings), "accept": "text/html"}, resource_id="exec_1")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["cache-control"] == "no-store"
    assert "<td>refusal</td>" in page.text
    assert "&lt;b&gt;CODE&lt;/b&gt;" in page.text
    assert "<b>CODE</b>" not in page.text
    assert "1 record(s), newest first, at most 100" in page.text
