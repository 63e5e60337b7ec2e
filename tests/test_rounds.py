"""One round of a modern request (rounds.py): answers from this attempt or an earlier one,
re-asking what is missing, and refusing answers of the wrong shape (2026-07-28 mrtr, "Error Handling")."""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.exceptions import InputRequired, InvalidParams
from aql_mcp.request_state import RoundState
from aql_mcp.rounds import InputRound

NAME = {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {"type": "object"}}}
ROOTS = {"method": "roots/list", "params": {}}
ACCEPTED = {"action": "accept", "content": {"name": "Alice"}}


def round_of(given: Any, earlier: RoundState | None = None) -> InputRound:
    return InputRound.parse({"inputResponses": given}, earlier or RoundState())


def test_an_unanswered_question_ends_the_attempt_with_the_question() -> None:
    with pytest.raises(InputRequired) as asked:
        InputRound.parse({}, RoundState()).take({"user_name": NAME})
    assert asked.value.requests == {"user_name": NAME}


def test_answers_come_from_this_attempt_or_an_earlier_round() -> None:
    earlier = RoundState(answers={"step1": ACCEPTED})
    inputs = round_of({"step2": {"action": "accept", "content": {"color": "blue"}}}, earlier)
    answers = inputs.take({"step1": NAME, "step2": NAME})
    assert answers["step1"] == ACCEPTED
    assert answers["step2"]["content"] == {"color": "blue"}
    assert set(inputs.taken) == {"step1", "step2"}


def test_only_the_missing_questions_are_asked_again_and_the_given_ones_are_kept() -> None:
    inputs = round_of({"user_name": ACCEPTED})
    with pytest.raises(InputRequired) as asked:
        inputs.take({"user_name": NAME, "client_roots": ROOTS})
    assert set(asked.value.requests) == {"client_roots"}
    assert inputs.taken == {"user_name": ACCEPTED}


def test_answers_nobody_asked_for_are_ignored() -> None:
    inputs = round_of({"user_name": ACCEPTED, "unknown": {"action": "accept", "content": {"x": 1}}})
    assert inputs.take({"user_name": NAME}) == {"user_name": ACCEPTED}
    assert set(inputs.taken) == {"user_name"}


@pytest.mark.parametrize("given", [None, [], "x", {"user_name": 12345}, {"user_name": None}])
def test_input_responses_that_are_not_a_map_of_objects_are_invalid_params(given: Any) -> None:
    with pytest.raises(InvalidParams) as refused:
        round_of(given)
    assert refused.value.data["field"].startswith("inputResponses")


@pytest.mark.parametrize(
    ("request_", "answer"),
    [
        (NAME, {"action": "maybe"}),
        (NAME, {"action": "accept", "content": "Alice"}),
        ({"method": "sampling/createMessage", "params": {}}, {"text": "hi"}),
        (ROOTS, {"roots": "file:///"}),
    ],
)
def test_an_answer_of_the_wrong_shape_is_invalid_params(request_: dict[str, Any], answer: dict[str, Any]) -> None:
    with pytest.raises(InvalidParams) as refused:
        round_of({"q": answer}).take({"q": request_})
    assert refused.value.data == {"field": "inputResponses.q", "reason": "shape"}
