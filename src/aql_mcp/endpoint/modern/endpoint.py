"""The modern edge of `/mcp`: MCP 2026-07-28 requests, each served on its own (docs/eras.md).

No handshake, no session: every request names its protocol version, client info and capabilities
in `_meta` (2026-07-28 basic, "Per-request protocol fields"). Checks run in the order the spec
gives, so a request with several faults gets the first: -32602 (malformed `_meta`), -32020 (a
mirrored header missing or not matching the body: endpoint/modern/mirrored.py), -32022 (unsupported version), 404 -32601
(a method this era does not serve). The request then goes to the same dispatcher, handlers,
plugins and MCP-AQL router as the legacy era. Its answer is one JSON body, or an SSE stream of
that request's own progress and log notifications ending with the result (endpoint/modern/reply.py). A handler that
needs the client's input ends the attempt with `input_required` and a signed `requestState`; the
client retries with its answers, on any replica (endpoint/modern/rounds.py,
endpoint/modern/request_state.py). A client that goes away cancels its request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from starlette.types import Receive, Scope, Send

from aql_mcp import __version__
from aql_mcp.auth.principal import principal_key
from aql_mcp.endpoint.media import check_accept, check_content_type, read_body
from aql_mcp.endpoint.modern.disconnect import DisconnectWatch
from aql_mcp.endpoint.modern.listen import LISTEN, ListenEndpoint
from aql_mcp.endpoint.modern.mirrored import check_mirrored
from aql_mcp.endpoint.modern.reply import Reply
from aql_mcp.endpoint.modern.request_state import FIELD as STATE_FIELD
from aql_mcp.endpoint.modern.request_state import Binding, RequestStateSealer, RoundState
from aql_mcp.endpoint.modern.rounds import ASKING_METHODS, InputRound
from aql_mcp.endpoint.modern.tasks_extension import EXTENSION as TASKS_EXTENSION
from aql_mcp.endpoint.statuses import dispatched_status, wire_code
from aql_mcp.exceptions import (
    AuthError,
    InputRequired,
    InvalidParams,
    MethodNotFound,
    MissingToken,
    UnsupportedModernVersion,
    WireError,
)
from aql_mcp.jsonrpc.dispatcher import Dispatcher
from aql_mcp.jsonrpc.messages import Request, encode_error, encode_result, parse_message, peek_id
from aql_mcp.observability.logging import bind_log_context
from aql_mcp.observability.mcp_request import RequestFacts
from aql_mcp.observability.telemetry import Telemetry
from aql_mcp.protocol import lifecycle
from aql_mcp.protocol.context import LOG_LEVELS, Context, ResourceHub
from aql_mcp.protocol.param_headers import CallerHeaders, check_call_headers
from aql_mcp.protocol.versions import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    META_VERSION,
    MODERN_VERSIONS,
    Era,
    supported_versions,
)
from aql_mcp.responses import error_object, header_fields, send_body, send_empty
from aql_mcp.scope import MESSAGE_ID_KEY, connection_of, principal_of, request_id_of

ALLOW = [(b"allow", b"POST")]
# The methods the modern edge serves in this slice; anything else is 404 -32601. `ping`,
# `logging/setLevel` and `resources/subscribe` no longer exist in 2026-07-28 (changelog, SEP-2575):
# `subscriptions/listen` replaces the subscriptions (endpoint/modern/listen.py).
SERVED = frozenset(
    {
        "server/discover",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        LISTEN,
        # The Tasks extension (endpoint/modern/tasks_extension.py); `tasks/result` and `tasks/list`
        # were removed by SEP-2663.
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
        # The Skills extension (protocol/skills.py).
        "skills/list",
        "skills/get",
    }
)
# Results a client may cache, and for how long (2026-07-28 server/utilities/caching). Lists and
# reads depend on the caller's scopes, hence "private"; discovery is the same for everyone.
CACHED = frozenset(
    {
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
        "resources/read",
        # SEP-2640: both results are `CacheableResult`s.
        "skills/list",
        "skills/get",
    }
)
CACHE_TTL_MS = 60_000

log = structlog.get_logger("aql_mcp.modern")


class RequestPeer:
    """What the legacy era keeps in a session, taken from one request's `_meta` instead."""

    __slots__ = ("client_capabilities", "client_info", "id", "log_level", "protocol_version")

    def __init__(self, *, version: str, info: dict[str, Any], caps: Mapping[str, Any], log_level: str | None) -> None:
        self.id = ""
        self.protocol_version = version
        self.client_info = info
        self.client_capabilities = caps
        self.log_level = log_level

    async def set_log_level(self, level: str) -> None:
        raise MethodNotFound()

    async def subscribe(self, uri: str) -> None:
        raise MethodNotFound()

    async def unsubscribe(self, uri: str) -> None:
        raise MethodNotFound()


class ModernEndpoint:
    """ASGI app for modern `/mcp` requests; the era router sends them here."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher[Context],
        hub: ResourceHub,
        server_name: str,
        instructions: str,
        telemetry: Telemetry,
        sealer: RequestStateSealer,
        keepalive_seconds: float,
        anonymous_methods: frozenset[str] = frozenset(),
        handshake_limits: lifecycle.HandshakeLimits = lifecycle.DEFAULT_HANDSHAKE,
        param_headers: CallerHeaders = lambda _name, _principal: (),
        listen: ListenEndpoint | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._listen = listen
        self._hub = hub
        self._server_info = {"name": server_name, "title": server_name, "version": __version__}
        self._instructions = instructions
        self._telemetry = telemetry
        self._sealer = sealer
        self._keepalive = keepalive_seconds
        self._anonymous_methods = anonymous_methods
        self._limits = handshake_limits
        self._param_headers = param_headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            # No GET stream nor DELETE in this era (2026-07-28 Streamable HTTP, "Backward Compatibility").
            await send_empty(send, 405, ALLOW)
            return
        try:
            check_content_type(scope)
            check_accept(scope, post=True)
            body = await read_body(receive)
        except WireError as exc:
            await _send_wire(send, exc, scope, None)
            return
        try:
            message = parse_message(body)
        except WireError as exc:
            await _send_wire(send, exc, scope, peek_id(body))
            return
        if not isinstance(message, Request):
            # A notification or response has nothing to answer in this era (no session to route to).
            await send_empty(send, 202)
            return
        scope[MESSAGE_ID_KEY] = message.id  # for the auth middleware's answer to an AuthError
        try:
            if principal_of(scope) is None and message.method not in self._anonymous_methods:
                raise MissingToken()
            peer = self._validate(scope, message)
        except AuthError:
            raise  # answered by the auth middleware, with its challenge
        except WireError as exc:
            self._telemetry.refused(message.method, refused_facts(scope, message), message.params, exc)
            await _send_wire(send, exc, scope, message.id)
            return
        if self._listen is not None and message.method == LISTEN:
            await _serve_listen(self._listen, scope, receive, send, message, peer)
            return
        await self._run(scope, receive, send, message, peer)

    def _validate(self, scope: Scope, request: Request) -> RequestPeer:
        """The checks of the spec's order, each raising its error; the request's peer if all pass."""
        peer = self._peer(request.params)
        check_mirrored(scope, request, peer.protocol_version)
        # Only the headers of a tool the caller may call: one without its scopes gets the tool's
        # refusal whatever it sent, and never learns the header names from a -32020.
        principal = principal_of(scope)
        check_call_headers(scope, request, lambda name: self._param_headers(name, principal))
        if peer.protocol_version not in MODERN_VERSIONS:
            raise UnsupportedModernVersion(
                data={"supported": supported_versions(modern_enabled=True), "requested": peer.protocol_version}
            )
        if request.method not in SERVED:
            raise MethodNotFound(data={"method": request.method[:128]})
        return peer

    def _peer(self, params: dict[str, Any]) -> RequestPeer:
        """-32602 unless `_meta` carries the required per-request fields, well formed."""
        meta = params.get("_meta")
        if not isinstance(meta, dict):
            raise InvalidParams("Invalid params: _meta is required", data={"field": "_meta", "reason": "required"})
        version = meta.get(META_VERSION)
        if not isinstance(version, str) or not version:
            raise InvalidParams(data={"field": f"_meta.{META_VERSION}", "reason": "required"})
        if META_CLIENT_CAPABILITIES not in meta:
            raise InvalidParams(data={"field": f"_meta.{META_CLIENT_CAPABILITIES}", "reason": "required"})
        caps = meta[META_CLIENT_CAPABILITIES]
        info = meta.get(META_CLIENT_INFO, {})
        lifecycle.check_bounds(META_CLIENT_CAPABILITIES, caps, self._limits)
        lifecycle.check_bounds(META_CLIENT_INFO, info, self._limits)
        # Without a level the request gets no log messages at all (2026-07-28 logging).
        level = meta.get(META_LOG_LEVEL)
        if level is not None and level not in LOG_LEVELS:
            raise InvalidParams(data={"field": f"_meta.{META_LOG_LEVEL}", "reason": "enum"})
        return RequestPeer(
            version=version[:64],
            info=lifecycle.kept_info(info),
            caps=lifecycle.kept_capabilities(caps),
            log_level=level,
        )

    async def _run(self, scope: Scope, receive: Receive, send: Send, request: Request, peer: RequestPeer) -> None:
        meta = request.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        principal = principal_of(scope)
        binding = Binding.of(principal_key(principal), request.method, request.params)
        bind_log_context(mcp_method=request.method, mcp_era=Era.MODERN.value, client=peer.client_info.get("name"))
        try:
            earlier, inputs = await self._round(request, binding)
        except WireError as exc:
            await _send_wire(send, exc, scope, request.id, dispatched=True)
            return
        reply = Reply(send, method=request.method, inputs=inputs, keepalive_seconds=self._keepalive)
        ctx = Context(
            request_id=request_id_of(scope),
            message_id=request.id,
            peer=peer,
            principal=principal,
            outbound=reply,
            hub=self._hub,
            progress_token=token if isinstance(token, str | int) and not isinstance(token, bool) else None,
            memo=earlier.memo,
        )
        outcome: dict[str, Any] | BaseException | None = None
        watch = DisconnectWatch(receive, connection_of(scope))
        # Closing the request is this era's cancellation (2026-07-28 basic/patterns/cancellation): a
        # handler that ends work of its own on a client's cancellation (a followed import) sees it.
        ctx.cancelled_by_client = lambda: watch.disconnected
        try:
            with watch:
                outcome = await self._answer(request, ctx, meta, inputs, binding)
        finally:
            reply.stop_keepalive()
        if outcome is None:
            log.info("request_cancelled", reason="client disconnected")
            return
        if isinstance(outcome, BaseException):
            await _send_wire(send, outcome, scope, request.id, dispatched=True, reply=reply)
            return
        if outcome.get("resultType") != "input_required":
            outcome = self._complete(request, outcome)
        await reply.finish(encode_result(request.id, outcome), 200)

    async def _answer(
        self, request: Request, ctx: Context, meta: Any, inputs: InputRound, binding: Binding
    ) -> dict[str, Any] | BaseException:
        """The request's result, its `input_required` answer, or the exception to answer with."""
        try:
            with self._telemetry.request(request.method, ctx, request.params) as mcp:
                if request.method == "server/discover":
                    return self._discover()
                result = await self._dispatcher.call(request, ctx)
                mcp.answered(result)
                return result
        except InputRequired as asked:
            try:
                state = await self._sealer.seal(inputs.next_state(asked.requests, ctx.memo), binding)
            except Exception as exc:
                return exc
            return self._input_required(asked, state)
        except Exception as exc:
            return exc

    async def _round(self, request: Request, binding: Binding) -> tuple[RoundState, InputRound]:
        """What earlier rounds of this request left (checked) and the answers this attempt brings."""
        if request.method not in ASKING_METHODS:
            return RoundState(), InputRound(RoundState(), {})
        earlier = RoundState()
        if STATE_FIELD in request.params:
            earlier = await self._sealer.open(request.params[STATE_FIELD], binding)
        return earlier, InputRound.parse(request.params, earlier, max_bytes=self._sealer.max_answer_bytes)

    def _input_required(self, asked: InputRequired, state: str) -> dict[str, Any]:
        """An `InputRequiredResult` (2026-07-28 mrtr): the questions, and the state to echo back."""
        return {
            "resultType": "input_required",
            "inputRequests": asked.requests,
            "requestState": state,
            "_meta": {META_SERVER_INFO: self._server_info},
        }

    def _discover(self) -> dict[str, Any]:
        """`server/discover` (2026-07-28 server/discover): versions, capabilities, identity."""
        caps = lifecycle.capabilities()
        # Per-session log levels do not exist in this era; change notifications are delivered
        # only on `subscriptions/listen`, so they are advertised only where it is served.
        if self._listen is None:
            caps["resources"] = {}
            caps["tools"] = {}
            caps["prompts"] = {}
        caps.pop("logging", None)
        caps["extensions"] = {**caps.get("extensions", {}), TASKS_EXTENSION: {}}
        return {
            "supportedVersions": supported_versions(modern_enabled=True),
            "capabilities": caps,
            "instructions": self._instructions,
            "ttlMs": CACHE_TTL_MS,
            "cacheScope": "public",
        }

    def _complete(self, request: Request, result: Any) -> dict[str, Any]:
        """Every modern result says it is complete and who answered (2026-07-28 basic, "Per-response
        protocol fields"); lists and reads say how long they may be cached."""
        out: dict[str, Any] = dict(result) if isinstance(result, dict) else {}
        # A `CreateTaskResult` keeps its own (endpoint/modern/tasks_extension.py); every other result is complete.
        if out.get("resultType") != "task":
            out["resultType"] = "complete"
        meta = out.get("_meta")
        out["_meta"] = {**(meta if isinstance(meta, dict) else {}), META_SERVER_INFO: self._server_info}
        if request.method in CACHED:
            out.setdefault("ttlMs", CACHE_TTL_MS)
            out.setdefault("cacheScope", "private")
        return out


def refused_facts(scope: Scope, request: Request) -> RequestFacts:
    """What telemetry knows of a request refused by the era's checks (its span, docs/monitoring.md)."""
    meta = request.params.get("_meta")
    version = meta.get(META_VERSION) if isinstance(meta, dict) else None
    return RequestFacts(message_id=request.id, principal=principal_of(scope), protocol_version=version)


async def _serve_listen(
    listen: ListenEndpoint, scope: Scope, receive: Receive, send: Send, request: Request, peer: RequestPeer
) -> None:
    """A long-lived stream (endpoint/modern/listen.py); it raises only before the stream starts."""
    try:
        await listen.serve(scope, receive, send, request, peer)
    except AuthError:
        raise  # answered by the auth middleware, with its challenge
    except WireError as exc:
        await _send_wire(send, exc, scope, request.id, dispatched=True)


async def _send_wire(
    send: Send,
    exc: BaseException,
    scope: Scope,
    message_id: Any,
    *,
    dispatched: bool = False,
    reply: Reply | None = None,
) -> None:
    """One modern error answer: the code as this era spells it, the status from `endpoint/statuses.py`."""
    wire, error = error_object(exc, request_id_of(scope))
    error["code"] = wire_code(Era.MODERN, error["code"])
    status = dispatched_status(Era.MODERN, wire, error["code"]) if dispatched else wire.status
    headers = header_fields(wire.headers)
    body = encode_error(message_id, error)
    if reply is not None:
        await reply.finish(body, status, headers)
        return
    await send_body(send, status, body, headers)
