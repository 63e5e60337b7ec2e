"""The signed `requestState` (request_state.py): MCP 2026-07-28 basic/patterns/mrtr, "Server
Requirements": state is attacker-controlled input; its integrity MUST be protected and state that
fails verification MUST be rejected; it SHOULD bind the principal, a short expiry and the request."""

from __future__ import annotations

import base64

import orjson
import pytest

from aql_mcp.exceptions import InvalidParams
from aql_mcp.request_state import Binding, RequestStateSealer, RoundState

KEY = b"k" * 32
PARAMS = {"name": "delete_thing", "arguments": {"id": 7}, "_meta": {"x": 1}}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def binding(principal: str = "alice", params: dict[str, object] = PARAMS) -> Binding:
    return Binding.of(principal, "tools/call", params)


def refusal(sealer: RequestStateSealer, token: object, bound: Binding) -> str:
    with pytest.raises(InvalidParams) as caught:
        sealer.open(token, bound)
    assert caught.value.data["field"] == "requestState"
    return str(caught.value.data["reason"])


def test_a_sealed_state_opens_for_the_same_caller_and_request() -> None:
    sealer = RequestStateSealer(KEY, ttl_seconds=60)
    state = RoundState(answers={"confirm": {"action": "accept"}}, memo={"batch.0": {"success": True}})
    opened = sealer.open(sealer.seal(state, binding()), binding())
    assert opened.answers == state.answers
    assert opened.memo == state.memo


def test_meta_and_the_mrtr_fields_are_not_part_of_the_request() -> None:
    sealer = RequestStateSealer(KEY, ttl_seconds=60)
    token = sealer.seal(RoundState(), binding())
    retry = {**PARAMS, "_meta": {"other": True}, "inputResponses": {"a": {}}, "requestState": token}
    sealer.open(token, binding(params=retry))


def test_a_tampered_state_is_refused() -> None:
    sealer = RequestStateSealer(KEY, ttl_seconds=60)
    token = sealer.seal(RoundState(answers={"ok": {"action": "decline"}}), binding())
    body, mac = token.split(".")
    payload = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["a"] = {"ok": {"action": "accept"}}
    forged = base64.urlsafe_b64encode(orjson.dumps(payload)).rstrip(b"=").decode() + "." + mac
    assert refusal(sealer, forged, binding()) == "tampered"
    assert refusal(sealer, token + "-TAMPERED", binding()) == "tampered"
    assert refusal(sealer, "not a state", binding()) == "tampered"
    assert refusal(sealer, 12, binding()) == "type"


def test_a_state_signed_with_another_key_is_refused() -> None:
    token = RequestStateSealer(b"o" * 32, ttl_seconds=60).seal(RoundState(), binding())
    assert refusal(RequestStateSealer(KEY, ttl_seconds=60), token, binding()) == "tampered"


def test_another_callers_state_is_refused() -> None:
    sealer = RequestStateSealer(KEY, ttl_seconds=60)
    assert refusal(sealer, sealer.seal(RoundState(), binding("alice")), binding("mallory")) == "caller"


def test_a_state_presented_on_a_different_call_is_refused() -> None:
    sealer = RequestStateSealer(KEY, ttl_seconds=60)
    token = sealer.seal(RoundState(), binding())
    other = {**PARAMS, "arguments": {"id": 8}}
    assert refusal(sealer, token, binding(params=other)) == "request"
    assert refusal(sealer, token, Binding.of("alice", "prompts/get", PARAMS)) == "request"


def test_a_late_state_is_refused() -> None:
    clock = Clock()
    sealer = RequestStateSealer(KEY, ttl_seconds=60, clock=clock)
    token = sealer.seal(RoundState(), binding())
    clock.now += 61
    assert refusal(sealer, token, binding()) == "expired"


def test_the_previous_key_still_opens_states_it_signed_but_never_signs() -> None:
    old = RequestStateSealer(b"o" * 32, ttl_seconds=60)
    rotated = RequestStateSealer(KEY, previous=b"o" * 32, ttl_seconds=60)
    rotated.open(old.seal(RoundState(), binding()), binding())
    assert refusal(old, rotated.seal(RoundState(), binding()), binding()) == "tampered"


def test_without_a_key_each_sealer_uses_its_own_random_one() -> None:
    first, second = RequestStateSealer(None, ttl_seconds=60), RequestStateSealer(None, ttl_seconds=60)
    token = first.seal(RoundState(), binding())
    first.open(token, binding())
    assert refusal(second, token, binding()) == "tampered"
