"""One round of a modern request that may ask the client for input (2026-07-28 basic/patterns/mrtr).

A handler asks with `Context.ask` (or `elicit`, `sample`, `list_roots`). In the legacy era the
question travels as a server-to-client request on the request's stream and the handler waits. In
the modern era there is no such request: the round looks for the answer among those the client sent
with this attempt (`inputResponses`) or gave in an earlier round (carried in the signed
`requestState`); when one is missing it raises `InputRequired`, the edge answers `input_required`,
and the client retries the whole request with the answers. The handler therefore runs again from
the start on each retry: it asks before it acts, and anything it must not do twice it records in
`Context.memo`, which travels in the state (docs/eras.md, "Asking the client").

An answer counts only for the question it was given to: a fresh answer only under a key the
verified state says was just asked, with the same question (by digest); an earlier answer only for
the same question again. Answers sent without a state, or under keys nobody asked, are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from aql_mcp.endpoint.modern.request_state import RoundState, digest
from aql_mcp.exceptions import InputRequired, InvalidParams

FIELD = "inputResponses"
# The requests that may be answered `input_required` (2026-07-28 mrtr, "Supported Requests").
ASKING_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})


class InputRound:
    """The answers one attempt can use, and which of them the handler took (for the next state)."""

    __slots__ = ("_earlier", "_fresh", "taken")

    def __init__(self, earlier: RoundState, fresh: dict[str, Any]) -> None:
        self._earlier = earlier
        self._fresh = fresh
        self.taken: dict[str, list[Any]] = {}

    @classmethod
    def parse(cls, params: Mapping[str, Any], earlier: RoundState, *, max_bytes: int | None = None) -> InputRound:
        """The round of a request: -32602 if `inputResponses` is not a map of objects, if an answer
        to a question the state says was asked has the wrong shape, or if the answers the next
        state would carry (earlier rounds' and these) pass `max_bytes` of JSON. Checked here, before
        the handler runs, so the refusal is a 400 even for a handler that streams, and a batch never
        runs its first items only to find that the next question's state cannot carry the answers
        (issue 27, N7). `max_bytes` None: nothing is carried (a task keeps its answers in its row)."""
        given = params.get(FIELD, {})
        if not isinstance(given, dict):
            raise InvalidParams(data={"field": FIELD, "reason": "type"})
        # Sized only where a state will carry them: a task's answers stay in its row.
        carried = _size(earlier.answers) if max_bytes is not None else 0
        fresh: dict[str, Any] = {}
        for key, value in given.items():
            if not isinstance(value, dict):
                raise InvalidParams(data={"field": f"{FIELD}.{key[:64]}", "reason": "type"})
            asked = earlier.asked.get(key)
            if isinstance(asked, list) and len(asked) == 2:
                _check_answer(key, str(asked[1]), value)
                if max_bytes is not None:
                    carried += _size(value)
                    _check_room(key, carried, max_bytes)
                fresh[key] = value
        return cls(earlier, fresh)

    def take(self, requests: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The answer to every request, or `InputRequired` naming the ones still unanswered.

        Answers found are kept (`taken`) even when others are missing, so the next state carries
        them and the client is asked only for the rest.
        """
        missing: dict[str, dict[str, Any]] = {}
        for key, request in requests.items():
            question = digest(request)
            asked, earlier = self._earlier.asked.get(key), self._earlier.answers.get(key)
            if key in self._fresh and isinstance(asked, list) and asked[:1] == [question]:
                answer = self._fresh[key]
            elif isinstance(earlier, list) and len(earlier) == 2 and earlier[0] == question:
                answer = earlier[1]
            else:
                missing[key] = request
                continue
            self.taken[key] = [question, answer]
        if missing:
            raise InputRequired(missing)
        return {key: self.taken[key][1] for key in requests}

    def next_state(self, asked: Mapping[str, dict[str, Any]], memo: dict[str, Any]) -> RoundState:
        """What the `input_required` answer hands to the retry: these questions, the answers so far."""
        questions = {key: [digest(request), str(request["method"])] for key, request in asked.items()}
        return RoundState(asked=questions, answers=dict(self.taken), memo=memo)


def _size(value: Any) -> int:
    return len(orjson.dumps(value))


def _check_room(key: str, carried: int, max_bytes: int) -> None:
    if carried > max_bytes:
        raise InvalidParams(
            "Invalid params: the answers are larger than a retry can carry",
            data={"field": f"{FIELD}.{key[:64]}", "reason": "too_large", "maxBytes": max_bytes},
        )


def _check_answer(key: str, method: str, answer: dict[str, Any]) -> None:
    """-32602 unless `answer` has the shape of the result `method` asks for (mrtr, "Error Handling")."""
    if method == "elicitation/create":
        ok = answer.get("action") in ("accept", "decline", "cancel") and isinstance(answer.get("content", {}), dict)
    elif method == "sampling/createMessage":
        ok = isinstance(answer.get("role"), str) and isinstance(answer.get("content"), dict | list)
    elif method == "roots/list":
        ok = isinstance(answer.get("roots"), list)
    else:
        ok = True
    if not ok:
        raise InvalidParams(data={"field": f"{FIELD}.{key[:64]}", "reason": "shape"})
