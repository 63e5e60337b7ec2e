"""One round of a modern request that may ask the client for input (2026-07-28 basic/patterns/mrtr).

A handler asks with `Context.ask` (or `elicit`, `sample`, `list_roots`). In the legacy era the
question travels as a server-to-client request on the request's stream and the handler waits. In
the modern era there is no such request: the round looks for the answer among those the client sent
with this attempt (`inputResponses`) or gave in an earlier round (carried in the signed
`requestState`); when one is missing it raises `InputRequired`, the edge answers `input_required`,
and the client retries the whole request with the answers. The handler therefore runs again from
the start on each retry: it asks before it acts, and anything it must not do twice it records in
`Context.memo`, which travels in the state (docs/eras.md, "Asking the client").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aql_mcp.exceptions import InputRequired, InvalidParams
from aql_mcp.request_state import RoundState

FIELD = "inputResponses"
# The requests that may be answered `input_required` (2026-07-28 mrtr, "Supported Requests").
ASKING_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})


class InputRound:
    """The answers one attempt can use, and which of them the handler took (for the next state)."""

    __slots__ = ("_earlier", "_given", "taken")

    def __init__(self, earlier: RoundState, given: Mapping[str, Any]) -> None:
        self._earlier = earlier.answers
        self._given = given
        self.taken: dict[str, Any] = {}

    @classmethod
    def parse(cls, params: Mapping[str, Any], earlier: RoundState) -> InputRound:
        """The round of a request, -32602 if `inputResponses` is not a map of result objects."""
        given = params.get(FIELD, {})
        if not isinstance(given, dict):
            raise InvalidParams(data={"field": FIELD, "reason": "type"})
        for key, value in given.items():
            if not isinstance(value, dict):
                raise InvalidParams(data={"field": f"{FIELD}.{key[:64]}", "reason": "type"})
        return cls(earlier, given)

    def take(self, requests: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The answer to every request, or `InputRequired` naming the ones still unanswered.

        Answers found are kept (`taken`) even when others are missing, so the next state carries
        them and the client is asked only for the rest. Keys the handler did not ask are ignored
        (mrtr, "Error Handling": unexpected information is ignored).
        """
        missing: dict[str, dict[str, Any]] = {}
        for key, request in requests.items():
            answer = self._earlier.get(key, self._given.get(key))
            if answer is None:
                missing[key] = request
                continue
            _check_answer(key, request["method"], answer)
            self.taken[key] = answer
        if missing:
            raise InputRequired(missing)
        return {key: self.taken[key] for key in requests}


def _check_answer(key: str, method: str, answer: Any) -> None:
    """-32602 unless `answer` has the shape of the result `method` asks for (mrtr, "Error Handling")."""
    if not isinstance(answer, dict):
        raise InvalidParams(data={"field": f"{FIELD}.{key[:64]}", "reason": "type"})
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
