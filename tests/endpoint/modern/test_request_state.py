"""The signed `requestState` (endpoint/modern/request_state.py): MCP 2026-07-28 basic/patterns/mrtr, "Server
Requirements": state is attacker-controlled input; its integrity MUST be protected and state that
fails verification MUST be rejected; it SHOULD bind the principal, a short expiry and the request;
a state that must be consumed at most once MUST be enforced server-side."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from aql_mcp.endpoint.modern.request_state import Binding, RequestStateSealer, RoundState
from aql_mcp.exceptions import InternalError, InvalidParams
from aql_mcp.store.sqlite.store import SqliteStore
from tests.support.clock import Clock

pytestmark = pytest.mark.anyio

KEY = b"k" * 32
PARAMS = {"name": "delete_thing", "arguments": {"id": 7}, "_meta": {"x": 1}}
STATE = RoundState(
    asked={"confirm": ["d1", "elicitation/create"]},
    answers={"name": ["d0", {"action": "accept", "content": {"name": "Ada"}}]},
    memo={"batch.0": {"success": True}},
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "state.sqlite3")
    await opened.open()
    yield opened
    await opened.close()


def sealer(
    store: SqliteStore, key: bytes = KEY, *, previous: bytes | None = None, clock: Clock | None = None
) -> RequestStateSealer:
    return RequestStateSealer(
        key, grants=store.confirmations, previous=previous, ttl_seconds=60, max_bytes=65536, clock=clock or Clock()
    )


def binding(principal: str = "alice", params: dict[str, object] = PARAMS) -> Binding:
    return Binding.of(principal, "tools/call", params)


async def refusal(opener: RequestStateSealer, token: object, bound: Binding) -> str:
    with pytest.raises(InvalidParams) as caught:
        await opener.open(token, bound)
    assert caught.value.data["field"] == "requestState"
    return str(caught.value.data["reason"])


async def test_a_sealed_state_opens_once_for_the_same_caller_and_request(store: SqliteStore) -> None:
    seals = sealer(store)
    token = await seals.seal(STATE, binding())
    opened = await seals.open(token, binding())
    assert (opened.asked, opened.answers, opened.memo) == (STATE.asked, STATE.answers, STATE.memo)
    assert await refusal(seals, token, binding()) == "used"


async def test_another_replica_with_the_same_key_and_store_opens_it_and_only_once(store: SqliteStore) -> None:
    token = await sealer(store).seal(STATE, binding())
    other = sealer(store)
    await other.open(token, binding())
    assert await refusal(sealer(store), token, binding()) == "used"


async def test_meta_and_the_mrtr_fields_are_not_part_of_the_request(store: SqliteStore) -> None:
    seals = sealer(store)
    token = await seals.seal(RoundState(), binding())
    retry = {**PARAMS, "_meta": {"other": True}, "inputResponses": {"a": {}}, "requestState": token}
    await seals.open(token, binding(params=retry))


async def test_a_tampered_state_is_refused(store: SqliteStore) -> None:
    seals = sealer(store)
    token = await seals.seal(STATE, binding())
    body, mac = token.split(".")
    payload = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["a"] = {"name": ["d0", {"action": "decline"}]}
    forged = base64.urlsafe_b64encode(orjson.dumps(payload)).rstrip(b"=").decode() + "." + mac
    assert await refusal(seals, forged, binding()) == "tampered"
    assert await refusal(seals, token + "-TAMPERED", binding()) == "tampered"
    assert await refusal(seals, token + "!!", binding()) == "tampered"
    assert await refusal(seals, "not a state", binding()) == "tampered"
    assert await refusal(seals, 12, binding()) == "type"
    await seals.open(token, binding())  # the refused attempts did not use it up


async def test_a_state_signed_with_another_key_is_refused(store: SqliteStore) -> None:
    token = await sealer(store, b"o" * 32).seal(RoundState(), binding())
    assert await refusal(sealer(store), token, binding()) == "tampered"


async def test_another_callers_state_is_refused(store: SqliteStore) -> None:
    seals = sealer(store)
    assert await refusal(seals, await seals.seal(RoundState(), binding("alice")), binding("mallory")) == "caller"


async def test_a_state_presented_on_a_different_call_is_refused(store: SqliteStore) -> None:
    seals = sealer(store)
    token = await seals.seal(RoundState(), binding())
    other = {**PARAMS, "arguments": {"id": 8}}
    assert await refusal(seals, token, binding(params=other)) == "request"
    assert await refusal(seals, token, Binding.of("alice", "prompts/get", PARAMS)) == "request"


async def test_a_late_state_is_refused(store: SqliteStore) -> None:
    clock = Clock()
    seals = sealer(store, clock=clock)
    token = await seals.seal(RoundState(), binding())
    clock.now += 61
    assert await refusal(seals, token, binding()) == "expired"


async def test_the_previous_key_still_opens_states_it_signed_but_never_signs(store: SqliteStore) -> None:
    old = sealer(store, b"o" * 32)
    rotated = sealer(store, previous=b"o" * 32)
    await rotated.open(await old.seal(RoundState(), binding()), binding())
    assert await refusal(old, await rotated.seal(RoundState(), binding()), binding()) == "tampered"


async def test_without_a_key_each_sealer_uses_its_own_random_one(store: SqliteStore) -> None:
    first = RequestStateSealer(None, grants=store.confirmations, ttl_seconds=60, max_bytes=65536)
    second = RequestStateSealer(None, grants=store.confirmations, ttl_seconds=60, max_bytes=65536)
    token = await first.seal(RoundState(), binding())
    assert await refusal(second, token, binding()) == "tampered"
    await first.open(token, binding())


async def test_a_state_too_big_to_travel_back_is_an_internal_error_not_a_state(store: SqliteStore) -> None:
    small = RequestStateSealer(KEY, grants=store.confirmations, ttl_seconds=60, max_bytes=512)
    with pytest.raises(InternalError) as caught:
        await small.seal(RoundState(memo={"big": "x" * 1000}), binding())
    assert caught.value.data == {"limit": "request_state", "maxBytes": 512}


async def test_answers_within_the_answer_bound_always_fit_in_a_state(store: SqliteStore) -> None:
    """issue 27, N7: the bound endpoint/modern/rounds.py enforces before the handler runs leaves half the state
    to the questions and the memo, so sealing the next state cannot fail on the answers."""
    sized = RequestStateSealer(KEY, grants=store.confirmations, ttl_seconds=60, max_bytes=8192)
    filler = "x" * (sized.max_answer_bytes - len(orjson.dumps({"a": ["d" * 64, {"n": ""}]})))
    answers = {"a": ["d" * 64, {"n": filler}]}
    assert len(orjson.dumps(answers)) == sized.max_answer_bytes
    state = RoundState(asked={"q": ["d" * 64, "elicitation/create"]}, answers=answers, memo={"batch.0": {"ok": 1}})
    assert len(await sized.seal(state, binding())) <= 8192
