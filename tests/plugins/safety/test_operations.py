"""The `safety` plugin in process (MCP-AQL §8.6-8.8): directives, pauses, approvals, challenges and
the gatekeeper's confirmations during a run. End to end on a real server: tests/test_safety_e2e.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aql_mcp.auth.principal import Principal
from aql_mcp.operations.gatekeeper import token_digest
from aql_mcp.plugins.safety.desk import SafetyDesk
from aql_mcp.plugins.safety.operations import identity_of
from aql_mcp.store.factory import open_store
from aql_mcp.store.principals import Identity
from tests.operations.client import RECORDS, Aql, aql_session, records_settings
from tests.support.plugin_store import with_built_ins

pytestmark = pytest.mark.anyio
SAFETY = "aql_mcp.plugins.safety:plugin"
OPERATOR = ("mcp", "aql:operator")


def _settings(state: Path, **safety: Any) -> Any:
    settings = records_settings(state, safety=safety)
    return settings.model_copy(update={"server": settings.server.model_copy(update={"plugins": (RECORDS, SAFETY)})})


async def _step(aql: Aql, hint: str, **extra: Any) -> dict[str, Any]:
    result = await aql.call(
        "mcp_aql_create", "record_execution_step", element_name="builder", nextActionHint=hint, **extra
    )
    assert result["success"], result
    return dict(result["data"])


async def _code(state: Path, challenge_id: str) -> str:
    store = with_built_ins(open_store(_settings(state)))
    await store.open()
    try:
        challenge = await store.safety.get_challenge(challenge_id)
        assert challenge is not None
        return challenge.code
    finally:
        await store.close()


async def test_introspection_declares_the_mode_and_the_six_reserved_operations_8_6_1(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path, mode="monitoring")) as aql:
        listing = await aql.call("mcp_aql_read", "introspect", query="operations")
    assert listing["data"]["_protocol"]["capabilities"]["execution_safety_loop"] == "monitoring"
    names = {op["name"] for op in listing["data"]["operations"]}
    assert {"execute_agent", "record_execution_step", "complete_execution", "abort_execution"} <= names
    assert {"confirm_operation", "verify_challenge"} <= names


async def test_every_directive_has_continue_and_factors_and_the_step_limit_pauses_8_7_1(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path, max_autonomous_steps=2)) as aql:
        started = await aql.call("mcp_aql_execute", "execute_agent", element_name="builder", maxAutonomousSteps=5)
        assert started["data"]["maxAutonomousSteps"] == 2  # an agent cannot loosen its limit
        first = await _step(aql, "read_file a")
        second = await _step(aql, "list_dir b")
        third = await _step(aql, "read_file c")
    assert (first["continue"], first["stepsRemaining"], first["notifications"]) == (True, 1, [])
    assert second["continue"] is True
    assert third["continue"] is False
    assert third["reason"] == "Step limit exceeded"
    assert [n["type"] for n in third["notifications"]] == ["autonomy_pause"]
    for directive in (first, second, third):
        assert isinstance(directive["factors"], list)
        assert directive["factors"]


async def test_a_confirm_pause_is_lifted_by_another_principal_with_the_operator_scope_8_7_3(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path)) as aql:
        await aql.call("mcp_aql_execute", "execute_agent", element_name="builder")
        paused = await _step(aql, "delete_user 7")
        approval = paused["approvalId"]
        held = await _step(aql, "read_file x")
        own = await aql.call("mcp_aql_execute", "confirm_operation", approval_id=approval)
        plain = await (await aql.as_user("bob")).call("mcp_aql_execute", "confirm_operation", approval_id=approval)
        operator = await aql.as_user("olivia", OPERATOR)
        done = await operator.call("mcp_aql_execute", "confirm_operation", approval_id=approval)
        again = await operator.call("mcp_aql_execute", "confirm_operation", approval_id=approval)
        resumed = await _step(aql, "delete_user 7")
        fresh = await _step(aql, "delete_user 8")
    assert (paused["continue"], paused["nextStepRisk"]) == (False, "confirm")
    assert held["continue"] is False
    assert own["error"]["code"] == "PERMISSION_DENIED"
    assert own["error"]["details"]["reason"] == "self_approval"
    assert plain["error"]["details"]["reason"] == "operator_scope_required"
    assert done["success"]
    assert again["error"]["code"] == "TOKEN_ALREADY_USED"
    assert resumed["continue"] is True
    assert fresh["continue"] is False


async def test_a_verify_tier_pause_waits_for_the_code_then_resumes_8_8_3(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path)) as aql:
        await aql.call("mcp_aql_execute", "execute_agent", element_name="builder")
        paused = await _step(aql, "rotate the database password")
        challenge = paused["verificationId"]
        waiting = await _step(aql, "read_file x")
        operator = await aql.as_user("olivia", OPERATOR)
        code = await _code(tmp_path, challenge)
        verified = await operator.call("mcp_aql_create", "verify_challenge", challenge_id=challenge, code=code)
        resumed = await _step(aql, "read_file x")
    assert (paused["continue"], paused.get("stopped"), paused["nextStepRisk"]) == (False, None, "verify")
    assert [n["type"] for n in paused["notifications"]] == ["autonomy_pause"]
    assert paused["notifications"][0]["metadata"]["verificationId"] == challenge
    assert challenge in waiting["reason"]
    assert verified["success"]
    assert resumed["continue"] is True
    assert resumed["notifications"] == []


async def test_a_gatekeeper_confirmation_during_a_run_needs_an_operator_8_7_3(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="old")
        await aql.call("mcp_aql_execute", "execute_agent", element_name="builder")
        gated = await aql.call("mcp_aql_delete", "delete_collection", collection="old")
        token = gated["error"]["details"]["confirmation_token"]
        pending = await _step(aql, "read_file x")
        early = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
        own = await aql.call("mcp_aql_execute", "confirm_operation", confirmation_token=token)
        operator = await aql.as_user("olivia", OPERATOR)
        invalid = await operator.call("mcp_aql_execute", "confirm_operation", confirmation_token="conf_nope")
        still = await _step(aql, "read_file x")
        confirmed = await operator.call("mcp_aql_execute", "confirm_operation", confirmation_token=token)
        cleared = await _step(aql, "read_file x")
        done = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
    assert gated["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert pending["continue"] is False
    assert [n["type"] for n in pending["notifications"]] == ["permission_pending"]
    assert early["error"]["details"]["reason"] == "awaiting_operator"
    assert own["error"]["details"]["reason"] == "self_approval"
    assert invalid["error"]["code"] == "TOKEN_INVALID"
    assert [n["type"] for n in still["notifications"]] == ["permission_pending"]
    assert confirmed["data"]["kind"] == "permission_pending"
    assert (cleared["continue"], cleared["notifications"]) == (True, [])
    assert done["data"]["deleted"] is True
    assert len(token_digest(token)) == 64


async def test_monitoring_mode_evaluates_but_never_holds_the_agent_8_6_4(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path, mode="monitoring")) as aql:
        await aql.call("mcp_aql_execute", "execute_agent", element_name="builder")
        denied = await _step(aql, "drop_table users")
        after = await _step(aql, "read_file x")
    assert denied["continue"] is True
    assert "stopped" not in denied
    assert denied["nextStepRisk"] == "danger_zone"
    assert after["continue"] is True


async def test_logging_mode_records_steps_without_evaluating_them_8_6_1(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path, mode="logging")) as aql:
        await aql.call("mcp_aql_execute", "execute_agent", element_name="builder")
        denied = await _step(aql, "drop_table users")
        listing = await aql.call("mcp_aql_read", "introspect", query="operations")
    assert (denied["continue"], denied["notifications"]) == (True, [])
    assert "nextStepRisk" not in denied
    assert listing["data"]["_protocol"]["capabilities"]["execution_safety_loop"] == "logging"


async def test_a_step_of_an_unknown_or_ended_execution_is_not_found(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path)) as aql:
        none = await aql.call("mcp_aql_create", "record_execution_step", element_name="ghost", nextActionHint="x")
        started = await aql.call("mcp_aql_execute", "execute_agent", element_name="builder")
        execution = started["data"]["execution_id"]
        other = await (await aql.as_user("bob")).call(
            "mcp_aql_create",
            "record_execution_step",
            element_name="builder",
            execution_id=execution,
            nextActionHint="x",
        )
        completed = await aql.call("mcp_aql_execute", "complete_execution", element_name="builder")
        after = await aql.call("mcp_aql_create", "record_execution_step", element_name="builder", nextActionHint="x")
    assert none["error"]["code"] == "NOT_FOUND_RESOURCE"
    assert other["error"]["code"] == "NOT_FOUND_RESOURCE"
    assert completed["data"]["status"] == "completed"
    assert after["error"]["code"] == "NOT_FOUND_RESOURCE"


async def test_an_action_denied_on_the_console_is_not_taken_and_the_run_goes_on_8_7_3(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    async with aql_session(settings) as aql:
        await aql.call("mcp_aql_execute", "execute_agent", element_name="builder")
        paused = await _step(aql, "deploy_service api")
        store = with_built_ins(open_store(settings))
        await store.open()
        try:
            await SafetyDesk(store.safety, settings).deny(paused["approvalId"], "console-operator")
            denied = await _step(aql, "deploy_service api")
            moved_on = await _step(aql, "read_file notes.md")
            run = await store.safety.get_run(paused["execution_id"])
        finally:
            await store.close()
    assert denied["continue"] is False
    assert "status" in [n["type"] for n in denied["notifications"]]
    assert moved_on["continue"] is True, moved_on
    assert run is not None
    assert run.status == "running"


async def test_a_token_obtained_before_the_run_is_held_when_redeemed_during_it_8_7_3(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="old")
        gated = await aql.call("mcp_aql_delete", "delete_collection", collection="old")
        token = gated["error"]["details"]["confirmation_token"]
        await aql.call("mcp_aql_execute", "execute_agent", element_name="builder")
        early = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
        pending = await _step(aql, "read_file x")
        operator = await aql.as_user("olivia", OPERATOR)
        confirmed = await operator.call("mcp_aql_execute", "confirm_operation", confirmation_token=token)
        done = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
    assert early["error"]["code"] == "PERMISSION_DENIED"
    assert early["error"]["details"]["reason"] == "awaiting_operator"
    assert "confirmation_token" not in str(early["error"]["details"])
    assert [n["type"] for n in pending["notifications"]] == ["permission_pending"]
    assert confirmed["data"]["kind"] == "permission_pending"
    assert done["data"]["deleted"] is True


async def test_aborting_the_run_does_not_free_a_held_confirmation_8_7_3(tmp_path: Path) -> None:
    """Ending the run leaves the operator's pending decision behind: a fresh token asked for after
    `abort_execution` is held too, so the agent cannot confirm its own call outside the run."""
    async with aql_session(_settings(tmp_path)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="old")
        await aql.call("mcp_aql_execute", "execute_agent", element_name="builder")
        gated = await aql.call("mcp_aql_delete", "delete_collection", collection="old")
        held = gated["error"]["details"]["confirmation_token"]
        aborted = await aql.call("mcp_aql_execute", "abort_execution", element_name="builder")
        again = await aql.call("mcp_aql_delete", "delete_collection", collection="old")
        fresh = again["error"]["details"]["confirmation_token"]
        refused = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=fresh)
        listed = await aql.call("mcp_aql_read", "list_collections")
        operator = await aql.as_user("olivia", OPERATOR)
        confirmed = await operator.call("mcp_aql_execute", "confirm_operation", confirmation_token=held)
        done = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=held)
    assert aborted["success"] is True, aborted
    assert again["error"]["code"] == "CONFIRMATION_REQUIRED"
    assert refused["error"]["code"] == "PERMISSION_DENIED"
    assert refused["error"]["details"]["reason"] == "awaiting_operator"
    assert "old" in str(listed["data"])
    assert confirmed["data"]["kind"] == "permission_pending"
    assert done["data"]["deleted"] is True


async def test_aborting_a_run_paused_at_its_step_limit_does_not_free_gated_calls_8_6_4(tmp_path: Path) -> None:
    async with aql_session(_settings(tmp_path, max_autonomous_steps=1)) as aql:
        await aql.call("mcp_aql_create", "create_collection", collection="old")
        await aql.call("mcp_aql_execute", "execute_agent", element_name="builder")
        await _step(aql, "read_file a")
        paused = await _step(aql, "read_file b")
        aborted = await aql.call("mcp_aql_execute", "abort_execution", element_name="builder")
        gated = await aql.call("mcp_aql_delete", "delete_collection", collection="old")
        token = gated["error"]["details"]["confirmation_token"]
        refused = await aql.call("mcp_aql_delete", "delete_collection", collection="old", _confirmation=token)
        listed = await aql.call("mcp_aql_read", "list_collections")
    assert paused["continue"] is False
    assert aborted["success"] is True, aborted
    assert refused["error"]["code"] == "PERMISSION_DENIED"
    assert refused["error"]["details"]["reason"] == "awaiting_operator"
    assert "old" in str(listed["data"])


def test_an_operator_sees_the_subject_and_a_tenant_claim_other_than_the_subject() -> None:
    """issue 27, N8: who an agent's principal is (never its token)."""
    principal = Principal(subject="alice", claims={"org": "acme", "sub": "alice"})
    assert identity_of(principal, "sub") == Identity(principal.digest, "alice", None)
    assert identity_of(principal, "org") == Identity(principal.digest, "alice", "acme")
    assert identity_of(principal, "team") == Identity(principal.digest, "alice", None)


def test_an_operator_sees_a_listed_issuers_caller_qualified_by_its_issuer() -> None:
    """docs/identity.md: two issuers' `alice` are two principals, and the operator can tell which is which."""
    principal = Principal(subject="alice", claims={"sub": "alice"}, tenant="acme", issuer="https://idp.test")
    assert identity_of(principal, "sub") == Identity(principal.digest, "https://idp.test#alice", None)
    assert identity_of(principal, "org") == Identity(
        principal.digest, "https://idp.test#alice", "https://idp.test#acme"
    )
