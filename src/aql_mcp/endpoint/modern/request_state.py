"""The `requestState` of an `input_required` answer: signed, bound to caller and request, expiring,
used once.

A modern request that needs the client's input is answered `input_required`; the client retries
the same request with its answers and echoes `requestState` (2026-07-28 basic/patterns/mrtr). The
retry may land on any replica, so the state carries everything the retry needs: the questions just
asked, the answers given in earlier rounds (each with the digest of the question it answers), and
what the handler chose to remember (a batch's finished items). The spec makes the state
attacker-controlled input, so it is sealed with HMAC-SHA256 under a key every replica shares
(`mcp.request_state_key`) and binds, inside the seal:

- the caller (`Principal.digest`): another caller's state is refused;
- the request (method and a digest of its parameters, without `_meta` and the MRTR fields): a
  state presented on a different call is refused;
- an expiry (`mcp.request_state_ttl_seconds`): a late state is refused;
- a nonce, recorded in the store when the state is issued and consumed when it is presented, so a
  state works once, on any replica: a replayed retry cannot run a confirmed operation again.

Nothing in it is secret from its caller (answers it gave, results it will see), so it is signed,
not encrypted. A rotated-out key (`mcp.request_state_previous_key`) still verifies until its
states expire. Refusals are -32602 with `data.reason` saying which check failed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from aql_mcp.exceptions import InternalError, InvalidParams
from aql_mcp.settings import Settings
from aql_mcp.store.base import Store
from aql_mcp.store.confirmations import ConfirmationStore, Grant

VERSION = 2
FIELD = "requestState"
# Parameters that are not part of "the same request": how it is carried, and the MRTR fields.
UNBOUND_PARAMS = frozenset({"_meta", "inputResponses", "requestState"})
# The grant a state's nonce is recorded as (the confirmations table holds single-use grants).
GRANT = "mrtr"


@dataclass(frozen=True, slots=True)
class Binding:
    """What a state is good for: this caller making this call."""

    principal: str
    method: str
    subject: str

    @classmethod
    def of(cls, principal: str, method: str, params: Mapping[str, Any]) -> Binding:
        bound = {k: v for k, v in params.items() if k not in UNBOUND_PARAMS}
        return cls(principal, method, digest(bound))


@dataclass(slots=True)
class RoundState:
    """What one round hands to the next.

    `asked`: key -> [question digest, method] of the questions the `input_required` result put;
    `answers`: key -> [question digest, answer] of the questions answered so far; `memo`: the
    handler's own record (`Context.memo`).
    """

    asked: dict[str, list[str]] = field(default_factory=dict)
    answers: dict[str, list[Any]] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict)


def digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


class RequestStateSealer:
    """Seals and opens request states with the shared key (and the previous one, to open only)."""

    def __init__(
        self,
        key: bytes | None,
        *,
        grants: ConfirmationStore,
        previous: bytes | None = None,
        ttl_seconds: int,
        max_bytes: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        # No key is a single replica (or a developer's): a random one still makes states unforgeable.
        self._key = key or secrets.token_bytes(32)
        self._keys = (self._key, previous) if previous else (self._key,)
        self._grants = grants
        self._ttl = ttl_seconds
        self._max_bytes = max_bytes
        self._clock = clock

    @classmethod
    def for_settings(cls, settings: Settings, store: Store) -> RequestStateSealer:
        """The service's sealer: the key every replica shares (docs/eras.md); a state must fit in half
        a request body, leaving room for the answers that travel beside it."""
        mcp = settings.mcp
        key, previous = mcp.request_state_key, mcp.request_state_previous_key
        return cls(
            key.get_secret_value().encode() if key else None,
            grants=store.confirmations,
            previous=previous.get_secret_value().encode() if previous else None,
            ttl_seconds=mcp.request_state_ttl_seconds,
            max_bytes=settings.http.max_body_bytes // 2,
        )

    @property
    def max_answer_bytes(self) -> int:
        """The most the answers a retry carries may hold together, as JSON (endpoint/modern/rounds.py checks it
        before the handler runs): base64 makes them a third larger in the state, so they fill at
        most half of it and leave the rest to the questions and the handler's memo."""
        return self._max_bytes * 3 // 8

    async def seal(self, state: RoundState, binding: Binding) -> str:
        nonce = secrets.token_urlsafe(16)
        expires = int(self._clock()) + self._ttl
        payload = {
            "v": VERSION,
            "p": binding.principal,
            "m": binding.method,
            "s": binding.subject,
            "e": expires,
            "n": nonce,
            "q": state.asked,
            "a": state.answers,
            "r": state.memo,
        }
        body = orjson.dumps(payload)
        token = f"{_b64(body)}.{_b64(_mac(self._key, body))}"
        if len(token) > self._max_bytes:
            # The retry must fit in a request body; the handler's memo or answers outgrew it.
            raise InternalError(
                "Internal error: this request needs more state than a retry can carry",
                data={"limit": "request_state", "maxBytes": self._max_bytes},
            )
        grant = Grant(GRANT, binding.subject, binding.principal, "", float(expires))
        await self._grants.put_grant(_nonce_key(nonce), grant)
        return token

    async def open(self, token: Any, binding: Binding) -> RoundState:
        """The state `token` carries for this call, or -32602 saying why it cannot be used."""
        if not isinstance(token, str):
            raise _refused("type")
        payload = self._payload(token)
        if payload.get("p") != binding.principal:
            raise _refused("caller")
        if payload.get("m") != binding.method or payload.get("s") != binding.subject:
            raise _refused("request")
        expires = payload.get("e")
        if not isinstance(expires, int) or self._clock() > expires:
            raise _refused("expired")
        asked, answers, memo, nonce = payload.get("q"), payload.get("a"), payload.get("r"), payload.get("n")
        if not (isinstance(asked, dict) and isinstance(answers, dict) and isinstance(memo, dict)):
            raise _refused("tampered")
        if not isinstance(nonce, str) or not await self._grants.consume_grant(_nonce_key(nonce), self._clock()):
            raise _refused("used")
        return RoundState(asked, answers, memo)

    def _payload(self, token: str) -> dict[str, Any]:
        encoded, _, mac = token.partition(".")
        try:
            body, given = _unb64(encoded), _unb64(mac)
        except (binascii.Error, ValueError):
            raise _refused("tampered") from None
        if not any(hmac.compare_digest(_mac(key, body), given) for key in self._keys):
            raise _refused("tampered")
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise _refused("tampered") from None
        if not isinstance(payload, dict) or payload.get("v") != VERSION:
            raise _refused("tampered")
        return payload


def _nonce_key(nonce: str) -> str:
    return hashlib.sha256(b"aql-mcp request state nonce\0" + nonce.encode()).hexdigest()


def _mac(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, b"aql-mcp request state\0" + body, hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict: one spelling per byte string (no ignored characters), so a state has one form."""
    if not text or not text.isascii():
        raise ValueError("empty or not ASCII")
    raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    if _b64(raw) != text:
        raise ValueError("not the canonical encoding")
    return raw


def _refused(reason: str) -> InvalidParams:
    return InvalidParams(
        "Invalid params: requestState cannot be used for this request", data={"field": FIELD, "reason": reason}
    )
