"""Confirmation tokens: issue, redeem, reuse, expiry, wrong operation, wrong parameters, other principal."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from aql_mcp.operations.gatekeeper import Gatekeeper, behavior, presented
from aql_mcp.operations.models import Operation
from aql_mcp.operations.results import OperationError
from aql_mcp.store.sqlite.store import SqliteStore
from tests.operations.client import Aql, aql_session, records_settings
from tests.support.asgi import asgi_client

pytestmark = pytest.mark.anyio


async def _gated(aql: Aql, collection: str = "old") -> dict[str, object]:
    await aql.call("mcp_aql_create", "create_collection", collection=collection)
    result = await aql.call("mcp_aql_delete", "delete_collection", collection=collection)
    assert result["error"]["code"] == "CONFIRMATION_REQUIRED"
    return dict(result)


async def test_a_dangerous_operation_needs_a_token_that_works_once(tmp_path: Path) -> None:
    """MCP-AQL danger levels §4.1: dangerous x community_reviewed = confirm; tokens are single use."""
    async with aql_session(records_settings(tmp_path)) as aql:
        gated = await _gated(aql)
        token = gated["error"]["details"]["confirmation_token"]
        assert gated["confirmation"]["token"] == token
        assert len(token) >= 5 + 22  # prefix + 128 bits in base64url
        done = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
        await aql.call("mcp_aql_create", "create_collection", collection="old")
        reused = await aql.call("mcp_aql_delete", "delete_collection", collection="old", confirmation_token=token)
    assert done["data"]["deleted"] is True
    assert reused["error"]["code"] == "TOKEN_ALREADY_USED"


async def test_a_token_is_bound_to_operation_parameters_and_caller(tmp_path: Path) -> None:
    async with aql_session(records_settings(tmp_path)) as aql:
        token = (await _gated(aql))["error"]["details"]["confirmation_token"]
        await aql.call("mcp_aql_create", "create_collection", collection="other")
        other_params = await aql.call("mcp_aql_delete", "delete_collection", collection="other", _confirmation=token)
        bob = await aql.as_user("bob")
        await bob.call("mcp_aql_create", "create_collection", collection="old")
        other_principal = await bob.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
        invalid = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation="conf_nope")
    assert other_params["error"]["code"] == "TOKEN_SCOPE_MISMATCH"
    assert other_principal["error"]["code"] == "TOKEN_SCOPE_MISMATCH"
    assert invalid["error"]["code"] == "TOKEN_INVALID"


def _operation(name: str, danger: str = "dangerous") -> Operation:
    async def noop(params: object, call: object) -> None:
        return None

    return Operation(name, "DELETE", "x", noop, danger=danger)  # type: ignore[arg-type]


async def test_a_token_for_another_operation_is_a_scope_mismatch_and_an_old_one_expired(tmp_path: Path) -> None:
    now = [1000.0]
    store = SqliteStore(tmp_path / "s.sqlite3")
    await store.open()
    gate = Gatekeeper(store.confirmations, ttl_seconds=60, clock=lambda: now[0])
    drop = _operation("drop_things")
    token = (await gate.require(drop, {"a": 1}, "p", "s")).details["confirmation_token"]  # type: ignore[index]
    with pytest.raises(OperationError) as wrong:
        await gate.redeem(token, _operation("purge_things"), {"a": 1}, "p", "s")
    now[0] += 61
    with pytest.raises(OperationError) as expired:
        await gate.redeem(token, drop, {"a": 1}, "p", "s")
    await store.close()
    assert wrong.value.code == "TOKEN_SCOPE_MISMATCH"
    assert expired.value.code == "TOKEN_EXPIRED"


async def test_racing_retries_with_one_token_succeed_once_and_the_store_never_holds_the_token(tmp_path: Path) -> None:
    """MCP-AQL confirmation tokens: single use, even when two retries arrive together."""
    store = SqliteStore(tmp_path / "s.sqlite3")
    await store.open()
    gate = Gatekeeper(store.confirmations, ttl_seconds=60)
    drop = _operation("drop_things")
    token = (await gate.require(drop, {"a": 1}, "p", "s")).details["confirmation_token"]  # type: ignore[index]
    outcomes: list[str] = []

    async def redeem() -> None:
        try:
            await gate.redeem(token, drop, {"a": 1}, "p", "s")
            outcomes.append("ok")
        except OperationError as exc:
            outcomes.append(exc.code)

    async with anyio.create_task_group() as group:
        for _ in range(5):
            group.start_soon(redeem)
    await store.close()
    dump = "\n".join(sqlite3.connect(tmp_path / "s.sqlite3").iterdump())
    assert sorted(outcomes) == ["TOKEN_ALREADY_USED"] * 4 + ["ok"]
    assert token not in dump


async def test_a_token_survives_a_restart_of_the_service(tmp_path: Path) -> None:
    """Grants live in the store (DESIGN: confirmation tokens outlive a request and a restart)."""
    settings = records_settings(tmp_path)
    async with aql_session(settings) as aql:
        token = (await _gated(aql))["error"]["details"]["confirmation_token"]
        session = aql.headers
    async with asgi_client(settings) as http:
        again = Aql(http, settings)
        again.headers = session  # sessions outlive a restart too; the token is bound to this one
        done = await again.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
    assert done["success"] is True


@pytest.mark.parametrize(
    ("danger", "trust", "verdict"),
    [
        ("destructive", "community_reviewed", "allow"),
        ("dangerous", "community_reviewed", "confirm"),
        ("destructive", "validated", "confirm"),
        ("forbidden", "community_reviewed", "deny"),
        ("safe", "untested", "deny"),
    ],
)
def test_gating_follows_the_trust_danger_matrix(danger: str, trust: str, verdict: str) -> None:
    assert behavior(_operation("x_y", danger), trust) == verdict  # type: ignore[arg-type]


async def test_no_token_error_echoes_the_token_it_was_sent(tmp_path: Path) -> None:
    """The corporate standard keeps secrets out of responses: TOKEN_* errors name the presented token
    by its last four characters only (docs/aql.md), whichever way redeeming it failed."""
    async with aql_session(records_settings(tmp_path)) as aql:
        token = str((await _gated(aql))["error"]["details"]["confirmation_token"])
        await aql.call("mcp_aql_create", "create_collection", collection="other")
        mismatch = await aql.call("mcp_aql_delete", "delete_collection", collection="other", _confirmation=token)
        await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
        await aql.call("mcp_aql_create", "create_collection", collection="old")
        used = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
        stranger = "conf_" + "s3cr3t" * 8
        invalid = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=stranger)
        short = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation="pw")
    for refusal, sent in ((mismatch, token), (used, token), (invalid, stranger)):
        assert sent not in str(refusal)
        assert refusal["error"]["details"]["token"] == f"conf_...{sent[-4:]}"
    assert [r["error"]["code"] for r in (mismatch, used, invalid)] == [
        "TOKEN_SCOPE_MISMATCH",
        "TOKEN_ALREADY_USED",
        "TOKEN_INVALID",
    ]
    assert short["error"]["details"]["token"] == "..."


def test_a_presented_token_is_named_by_its_last_four_characters_only() -> None:
    assert presented("conf_" + "a" * 39 + "WXYZ") == "conf_...WXYZ"
    assert presented("conf_1234") == "..."
