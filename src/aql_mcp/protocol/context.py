"""What a handler receives: who asks, in which session, and how to talk back while it works.

The transport provides the `Outbound` side (which stream a message travels on, SSE or not);
handlers only call the methods here, so they never know about HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from aql_mcp.auth.principal import Principal
from aql_mcp.jsonrpc.messages import RequestId
from aql_mcp.protocol.versions import has_elicitation_mode

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LOG_RANK = {name: rank for rank, name in enumerate(LOG_LEVELS)}
# The client capability each kind of question needs.
CAPABILITY_OF = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
# At most one progress notification per this many seconds, except the last (corporate §8.6).
PROGRESS_INTERVAL = 0.02


class Peer(Protocol):
    """The session as a handler sees it."""

    @property
    def id(self) -> str: ...
    @property
    def protocol_version(self) -> str: ...
    @property
    def client_capabilities(self) -> Mapping[str, Any]: ...
    @property
    def log_level(self) -> str | None:
        """None: no log messages at all (a modern request that names no `logLevel`, 2026-07-28 logging)."""
        ...

    async def set_log_level(self, level: str) -> None: ...
    async def subscribe(self, uri: str) -> None: ...
    async def unsubscribe(self, uri: str) -> None: ...


class Outbound(Protocol):
    """Messages from the server during one request, on that request's stream.

    `ask` puts questions to the client, keyed as the handler names them: the legacy era sends each
    as a server-to-client request and waits; the modern era answers from the request's own
    `inputResponses` or raises `InputRequired` (endpoint/modern/rounds.py). `missing_capability` is what each era
    raises when the client did not declare what a question needs.
    """

    async def notify(self, method: str, params: dict[str, Any]) -> None: ...
    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]: ...
    async def close_connection(self) -> None: ...
    def missing_capability(self, capability: str) -> Exception: ...


class ResourceHub(Protocol):
    async def resource_updated(self, uri: str) -> None: ...


class Context:
    """Per-request handle given to every tool, prompt, resource and completion handler."""

    __slots__ = (
        "_asked",
        "_hub",
        "_last_progress",
        "_outbound",
        "cancelled_by_client",
        "memo",
        "message_id",
        "peer",
        "principal",
        "progress_token",
        "request_id",
    )

    def __init__(
        self,
        *,
        request_id: str,
        message_id: RequestId | None,
        peer: Peer | None,
        principal: Principal | None,
        outbound: Outbound,
        hub: ResourceHub,
        progress_token: str | int | None = None,
        memo: dict[str, Any] | None = None,
    ) -> None:
        self.request_id = request_id
        self.message_id = message_id
        self.peer = peer
        self.principal = principal
        self.progress_token = progress_token
        self._outbound = outbound
        self._hub = hub
        self._last_progress: tuple[float, float] | None = None
        self._asked = 0
        # What a handler must not redo when a modern request is retried after `input_required`:
        # it survives the round trip in the signed request state (endpoint/modern/rounds.py); JSON values only.
        self.memo: dict[str, Any] = memo if memo is not None else {}
        # Whether the request was cancelled by the client's notifications/cancelled (the transport
        # sets it): a handler tells that apart from a shutdown cancelling every request in flight.
        self.cancelled_by_client: Callable[[], bool] = _never

    @property
    def session_id(self) -> str | None:
        return self.peer.id if self.peer else None

    @property
    def protocol_version(self) -> str | None:
        """The session's negotiated version (legacy era), or the one this request names (modern)."""
        return self.peer.protocol_version if self.peer else None

    def has_client_capability(self, name: str) -> bool:
        return self.peer is not None and name in self.peer.client_capabilities

    def require(self, *capabilities: str) -> None:
        """Raise what this era answers for a client capability the request did not declare: 400
        -32021 in the modern era, a tool error in the legacy one. A handler that needs one calls
        this before its first notification, so a modern refusal is still a 400 (2026-07-28 basic,
        "Per-request protocol fields"); a tool declares `client_capabilities` to have it done for it."""
        for capability in capabilities:
            if not self.has_client_capability(capability):
                raise self._outbound.missing_capability(capability)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress if the caller asked for it; values must increase (MCP progress)."""
        if self.progress_token is None:
            return
        now = time.monotonic()
        if self._last_progress is not None:
            last_value, last_time = self._last_progress
            if progress <= last_value:
                return
            if now - last_time < PROGRESS_INTERVAL and (total is None or progress < total):
                return
        self._last_progress = (progress, now)
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._outbound.notify("notifications/progress", params)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send `notifications/message` if the session's (or the request's) level lets it through."""
        threshold = self.peer.log_level if self.peer else "info"
        if threshold is None or LOG_RANK.get(level, 0) < LOG_RANK.get(threshold, 1):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        await self._outbound.notify("notifications/message", params)

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Put several questions to the client at once, each `{"method", "params"}` under a key of
        the handler's choosing; returns the answers under the same keys.

        In the modern era a question without an answer yet ends this attempt (`InputRequired`): the
        client answers and retries, and the handler runs again from the start, so it asks before it
        acts (docs/eras.md, "Asking the client"). Every question needs its client capability.
        """
        for request in requests.values():
            capability = CAPABILITY_OF.get(request["method"])
            if capability is None:
                raise self._outbound.missing_capability(request["method"])
            self.require(capability)
        return await self._outbound.ask(requests)

    async def sample(self, params: dict[str, Any], *, key: str | None = None) -> dict[str, Any]:
        """Ask the client's model (`sampling/createMessage`); only if the client declared sampling."""
        return await self._ask_one(key, "sampling/createMessage", params)

    async def elicit(self, message: str, requested_schema: dict[str, Any], *, key: str | None = None) -> dict[str, Any]:
        """Ask the human through the client (`elicitation/create`, form mode)."""
        params = {"mode": "form", "message": message, "requestedSchema": requested_schema}
        if self.peer is not None and not has_elicitation_mode(self.peer.protocol_version):
            del params["mode"]
        return await self._ask_one(key, "elicitation/create", params)

    async def list_roots(self, *, key: str | None = None) -> dict[str, Any]:
        """The client's roots (`roots/list`); only if the client declared roots."""
        return await self._ask_one(key, "roots/list", {})

    async def _ask_one(self, key: str | None, method: str, params: dict[str, Any]) -> dict[str, Any]:
        # A default key counts the questions in call order, which a replayed handler repeats.
        self._asked += 1
        name = key or f"{CAPABILITY_OF[method]}-{self._asked}"
        answers = await self.ask({name: {"method": method, "params": params}})
        return answers[name]

    async def resource_updated(self, uri: str) -> None:
        """Tell every session subscribed to `uri` that it changed."""
        await self._hub.resource_updated(uri)

    async def close_connection(self) -> None:
        """End this request's HTTP connection but not its SSE stream; the client resumes with GET.

        The 2025-11-25 transport lets a server close the connection after an event with an id
        ("polling"); the rest of the stream is replayed from the event log on resumption.
        """
        await self._outbound.close_connection()


def _never() -> bool:
    return False
