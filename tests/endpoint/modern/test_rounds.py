"""One round of a modern request (endpoint/modern/rounds.py): an answer counts only for the question it was given
to; what is missing is asked again; answers of the wrong shape are refused (2026-07-28 mrtr,
"Error Handling")."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from aql_mcp.endpoint.modern.request_state import RoundState, digest
from aql_mcp.endpoint.modern.rounds import InputRound
from aql_mcp.exceptions import InputRequired, InvalidParams

NAME = {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {"type": "object"}}}
COLOR = {"method": "elicitation/create", "params": {"message": "Color?", "requestedSchema": {"type": "object"}}}
ROOTS = {"method": "roots/list", "params": {}}
ALICE = {"action": "accept", "content": {"name": "Alice"}}


def asked(**questions: dict[str, Any]) -> RoundState:
    """The state an `input_required` answer putting these questions would carry."""
    return InputRound(RoundState(), {}).next_state(questions, {})


def round_of(given: Any, earlier: RoundState | None = None) -> InputRound:
    return InputRound.parse({"inputResponses": given}, earlier or RoundState())


def test_an_unanswered_question_ends_the_attempt_with_the_question() -> None:
    with pytest.raises(InputRequired) as raised:
        InputRound.parse({}, RoundState()).take({"user_name": NAME})
    assert raised.value.requests == {"user_name": NAME}


def test_an_answer_to_the_question_just_asked_is_taken() -> None:
    inputs = round_of({"user_name": ALICE}, asked(user_name=NAME))
    assert inputs.take({"user_name": NAME}) == {"user_name": ALICE}
    assert inputs.taken == {"user_name": [digest(NAME), ALICE]}


def test_answers_sent_without_a_state_or_under_keys_nobody_asked_are_ignored() -> None:
    """An answer cannot be supplied in advance: only a verified state says what was asked."""
    with pytest.raises(InputRequired):
        round_of({"user_name": ALICE}).take({"user_name": NAME})
    with pytest.raises(InputRequired):
        round_of({"other": ALICE}, asked(user_name=NAME)).take({"user_name": NAME, "other": NAME})


def test_an_answer_counts_only_for_the_question_it_was_given_to() -> None:
    """The same key asking a different question (another batch item, say) is asked again."""
    earlier = round_of({"q": ALICE}, asked(q=NAME))
    earlier.take({"q": NAME})
    carried = earlier.next_state({}, {})
    with pytest.raises(InputRequired) as raised:
        InputRound.parse({}, carried).take({"q": COLOR})
    assert raised.value.requests == {"q": COLOR}
    assert InputRound.parse({}, carried).take({"q": NAME}) == {"q": ALICE}


def test_a_later_round_keeps_the_earlier_answers_and_takes_the_new_one() -> None:
    first = round_of({"step1": ALICE}, asked(step1=NAME))
    first.take({"step1": NAME})
    second = first.next_state({"step2": COLOR}, {})
    blue = {"action": "accept", "content": {"color": "blue"}}
    answers = round_of({"step2": blue}, second).take({"step1": NAME, "step2": COLOR})
    assert answers == {"step1": ALICE, "step2": blue}


def test_only_the_missing_questions_are_asked_again_and_the_given_ones_are_kept() -> None:
    inputs = round_of({"user_name": ALICE}, asked(user_name=NAME, client_roots=ROOTS))
    with pytest.raises(InputRequired) as raised:
        inputs.take({"user_name": NAME, "client_roots": ROOTS})
    assert set(raised.value.requests) == {"client_roots"}
    assert set(inputs.taken) == {"user_name"}


@pytest.mark.parametrize("given", [None, [], "x", {"user_name": 12345}, {"user_name": None}])
def test_input_responses_that_are_not_a_map_of_objects_are_invalid_params(given: Any) -> None:
    with pytest.raises(InvalidParams) as refused:
        round_of(given)
    assert refused.value.data["field"].startswith("inputResponses")


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        (NAME, {"action": "maybe"}),
        (NAME, {"action": "accept", "content": "Alice"}),
        ({"method": "sampling/createMessage", "params": {}}, {"text": "hi"}),
        (ROOTS, {"roots": "file:///"}),
    ],
)
def test_an_answer_of_the_wrong_shape_is_refused_before_the_handler_runs(
    question: dict[str, Any], answer: dict[str, Any]
) -> None:
    with pytest.raises(InvalidParams) as refused:
        round_of({"q": answer}, asked(q=question))
    assert refused.value.data == {"field": "inputResponses.q", "reason": "shape"}


def test_an_answer_larger_than_a_retry_can_carry_is_refused_naming_its_key() -> None:
    """issue 27, N7: refused before the handler runs, not after a batch ran its first items."""
    big = {"action": "accept", "content": {"note": "x" * 2000}}
    with pytest.raises(InvalidParams) as raised:
        InputRound.parse({"inputResponses": {"user_name": big}}, asked(user_name=NAME), max_bytes=1000)
    assert raised.value.data == {"field": "inputResponses.user_name", "reason": "too_large", "maxBytes": 1000}


def test_the_answers_of_earlier_rounds_count_toward_what_a_retry_carries() -> None:
    earlier = round_of({"user_name": ALICE}, asked(user_name=NAME))
    earlier.take({"user_name": NAME})
    state = earlier.next_state({"color": COLOR}, {})
    red = {"action": "accept", "content": {"color": "red"}}
    assert InputRound.parse({"inputResponses": {"color": red}}, state, max_bytes=1000).take({"color": COLOR})
    with pytest.raises(InvalidParams) as raised:
        InputRound.parse({"inputResponses": {"color": red}}, state, max_bytes=len(orjson.dumps(state.answers)))
    assert raised.value.data["field"] == "inputResponses.color"


def test_a_large_answer_nobody_asked_for_is_ignored_not_refused() -> None:
    big = {"action": "accept", "content": {"note": "x" * 2000}}
    inputs = InputRound.parse({"inputResponses": {"other": big}}, asked(user_name=NAME), max_bytes=1000)
    with pytest.raises(InputRequired):
        inputs.take({"user_name": NAME})
