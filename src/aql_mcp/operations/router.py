"""The operation router: one request item in, one OperationResult envelope out (MCP-AQL §3.2).

Order of checks: payload shape (encoding, limits), operation name, endpoint family, parameters,
field selection, gatekeeper, handler, result shaping (field selection, pagination, size). Any
failure is an envelope with a registry code; an unexpected exception is logged with the request
id and answered `INTERNAL_ERROR` without its text.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import structlog

from aql_mcp.auth.principal import principal_key, withheld_reason
from aql_mcp.exceptions import (
    CapabilityNotDeclared,
    InputRequired,
    MissingClientCapability,
    UpstreamUnavailable,
    WireError,
)
from aql_mcp.observability.telemetry import Telemetry
from aql_mcp.operations.audit import AuditLog
from aql_mcp.operations.endpoints import Surface, family_of
from aql_mcp.operations.fields import Selection, resolve_selection, select
from aql_mcp.operations.gatekeeper import Gatekeeper, behavior, params_hash
from aql_mcp.operations.models import Call, Operation, Outcome, Page, Params
from aql_mcp.operations.parameters import invalid_type, rename_aliases, resolve, validate
from aql_mcp.operations.payload import Limits, check_payload, too_large
from aql_mcp.operations.registry import OperationRegistry
from aql_mcp.operations.results import (
    CONFIRMATION_REQUIRED,
    INTERNAL_ERROR,
    NOT_FOUND_OPERATION,
    PERMISSION_DENIED,
    VALIDATION_ENDPOINT_MISMATCH,
    VALIDATION_MISSING_PARAM,
    VALIDATION_TRUNCATED_WARNING,
    Envelope,
    OperationError,
    failure,
    success,
    warning,
    wire_size,
)
from aql_mcp.protocol.policy import ScopeRules

log = structlog.get_logger("aql_mcp.operations")
IDENTIFIERS = ("id", "name", "collection", "_etag", "updated_at")
# How much of a gated call's parameters its confirmation question shows.
CONFIRM_PARAMS_SHOWN = 300
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Run this operation?"}},
    "required": ["confirm"],
}


@dataclass(frozen=True, slots=True)
class RouterOptions:
    limits: Limits
    max_response_bytes: int
    confirm_with_elicitation: bool
    scopes: ScopeRules = field(default_factory=ScopeRules)


class Router:
    """Routes request items of one MCP-AQL surface to the registered operations."""

    def __init__(
        self,
        registry: OperationRegistry,
        surface: Surface,
        gatekeeper: Gatekeeper,
        audit: AuditLog,
        options: RouterOptions,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.registry = registry
        self.surface = surface
        self.gatekeeper = gatekeeper
        self.audit = audit
        self.options = options
        self.telemetry = telemetry

    def check_payload(self, arguments: dict[str, Any]) -> Envelope | None:
        try:
            check_payload(arguments, self.options.limits)
        except OperationError as exc:
            return exc.envelope()
        return None

    async def run(self, family: str | None, item: Any, call: Call) -> Envelope:
        """One operation; `family` is the receiving family, None for the single tool."""
        try:
            if not isinstance(item, dict):
                raise invalid_type("operations[]", "object", item)
            operation = self._find(family, item.get("operation"))
        except OperationError as exc:
            return exc.envelope()
        if self.telemetry is None:
            return _trimmed(operation, await self._guarded(operation, item, call))
        with self.telemetry.operation(operation.name, call.ctx, batch=call.batch) as record:
            envelope = await self._guarded(operation, item, call)
            if envelope.get("success") is False:
                record.failed(str(envelope["error"]["code"]))
            return _trimmed(operation, envelope)

    async def _guarded(self, operation: Operation, item: dict[str, Any], call: Call) -> Envelope:
        """The operation's envelope, whatever happens: internals are logged, never answered."""
        try:
            return await self._audited(operation, item, call)
        except OperationError as exc:
            return exc.envelope()
        except InputRequired:
            # The modern edge answers for the whole request: `input_required` (docs/eras.md).
            raise
        except MissingClientCapability:
            if not call.batch:
                raise  # the whole request is 400 -32021 (2026-07-28 basic)
            # Items before it have run: this one fails alone, as in the legacy era.
            return failure(PERMISSION_DENIED, "Permission denied: the client cannot be asked for what this needs")
        except UpstreamUnavailable as exc:
            if not call.batch:
                # The call as a whole: 503 with Retry-After, so the client retries later (docs/store.md).
                raise
            # Only this item failed: its own safe message and data (retryAfter, limit) say why and
            # when to retry; a shutdown or a spent introspection budget is not a store outage
            # (docs/errors.md, "In an MCP-AQL batch").
            log.warning("operation_unavailable", error=type(exc).__name__, request_id=call.ctx.request_id)
            return failure(
                INTERNAL_ERROR,
                f"Internal error: {exc.detail}; this item did not run",
                {**exc.data, "request_id": call.ctx.request_id, "retryable": True},
            )
        except WireError as exc:
            log.warning("operation_unavailable", error=type(exc).__name__, request_id=call.ctx.request_id)
            return failure(INTERNAL_ERROR, f"Internal error: {exc.detail}", {"request_id": call.ctx.request_id})
        except CapabilityNotDeclared:
            return failure(PERMISSION_DENIED, "Permission denied: the client cannot be asked to confirm")
        except Exception:
            log.exception("operation_failed", request_id=call.ctx.request_id, operation=operation.name)
            return failure(
                INTERNAL_ERROR, "Internal error: the operation failed unexpectedly", {"request_id": call.ctx.request_id}
            )

    async def _audited(self, operation: Operation, item: dict[str, Any], call: Call) -> Envelope:
        principal = principal_key(call.principal)
        # The item's parameters ride with the call so that every record of it carries their digest.
        call = replace(call, params=item.get("params"))
        try:
            return await self._execute(operation, item, call, principal)
        except OperationError as exc:
            # Every refused mutation and every refusal by policy is audited; a confirmation
            # request is audited by the gate as a token event.
            if exc.code != CONFIRMATION_REQUIRED and (operation.category != "READ" or exc.code == PERMISSION_DENIED):
                await self._audit("refusal", operation, call, "refused", code=exc.code)
            raise

    async def _execute(self, operation: Operation, item: dict[str, Any], call: Call, principal: str) -> Envelope:
        self._authorize(operation, call)
        verdict = behavior(operation, self.registry.trust(operation.name))
        # Only an operation the gatekeeper can ask to confirm takes a confirmation token (parameters.py).
        values, token = resolve(item, confirmable=verdict == "confirm")
        values, notices = rename_aliases(operation, values)
        params = validate(operation, values, confirmable=verdict == "confirm")
        selection = self._selection(operation, params)
        await self._gate(operation, verdict, params, token, call, principal)
        envelope = self._shape(operation, await operation.handler(params, call), selection, notices)
        if operation.category != "READ":
            # Awaited: the reply is not sent before its record is durable (docs/audit.md).
            await self._audit("mutation", operation, call, "success", resource_id=_id(envelope))
        elif self.audit.reads:
            self.audit.read(operation=operation.name, principal=principal, caller=call.principal, params=call.params)
        return envelope

    async def _audit(self, kind: str, operation: Operation, call: Call, outcome: str, **details: Any) -> None:
        """An audit event of this call, durable when this returns; a delegated call's carries its
        actor chain as digests."""
        principal = principal_key(call.principal)
        await self.audit.record(
            kind,
            operation=operation.name,
            principal=principal,
            outcome=outcome,
            caller=call.principal,
            params=call.params,
            **details,
        )

    def _authorize(self, operation: Operation, call: Call) -> None:
        """The one place an operation's scopes are checked, whatever tool carried it (`mcp_aql`, a family
        tool, a batch item): those of the operation, of its family and of the family's tool
        (`auth.policy.operations`, `.families`, `.tools`); a missing scope is PERMISSION_DENIED naming it."""
        family = family_of(operation, self.surface.profile)
        missing = self.options.scopes.missing_for_operation(
            operation.name,
            family,
            call.principal,
            family_tool=self.surface.tool_name(family),
            family_tool_exists=self.surface.has_families,
        )
        if missing:
            details = {
                "reason": "insufficient_scope",
                "required_scope": " ".join(missing),
                "http_status": 403,
                "operation": operation.name,
            }
            delegation = withheld_reason(call.principal, missing)
            if delegation is not None:
                details["delegation"] = delegation  # carried, but withheld by auth.delegation (docs/errors.md)
            raise OperationError(PERMISSION_DENIED, f"Permission denied: requires '{' '.join(missing)}' scope", details)

    def _find(self, family: str | None, name: Any) -> Operation:
        if name is None:
            raise OperationError(
                VALIDATION_MISSING_PARAM, "Missing required parameter 'operation'", {"param_name": "operation"}
            )
        if not isinstance(name, str):
            raise invalid_type("operation", "string", name)
        operation = self.registry.get(name)
        if operation is None:
            available = [op.name for op in self.registry.operations() if self._serves(family, op)]
            raise OperationError(
                NOT_FOUND_OPERATION,
                f"Unknown operation: '{name[:100]}'. Use introspect to discover supported operations.",
                {"operation": name[:100], "available": available},
            )
        expected = family_of(operation, self.surface.profile)
        if family is not None and expected != family:
            tool = self.surface.tool_name(expected)
            raise OperationError(
                VALIDATION_ENDPOINT_MISMATCH,
                f"Operation '{name}' must be called via {tool}, not {self.surface.tool_name(family)}",
                {"operation": name, "endpoint": family, "expected_endpoint": expected, "expected_tool": tool},
            )
        return operation

    def _serves(self, family: str | None, operation: Operation) -> bool:
        return family is None or family_of(operation, self.surface.profile) == family

    @staticmethod
    def _selection(operation: Operation, params: Any) -> Selection:
        if operation.field_presets is None:
            return None
        return resolve_selection(getattr(params, "fields", None), operation.field_presets, operation.default_preset)

    async def _gate(
        self, operation: Operation, verdict: str, params: Params, token: str | None, call: Call, principal: str
    ) -> None:
        if verdict == "allow":
            return
        if verdict == "deny":
            await self._audit("gate", operation, call, "denied")
            raise self.gatekeeper.deny(operation, self.registry.trust(operation.name))
        # Only a gated call binds a token to its parameters: the dump is not paid on every call.
        values, session = params.model_dump(mode="json"), call.session_id or ""
        if token is not None:
            try:
                await self.gatekeeper.redeem(token, operation, values, principal, session)
            except OperationError as exc:
                await self._audit("token", operation, call, "rejected", code=exc.code)
                raise
            await self._audit("token", operation, call, "redeemed")
            return
        if (
            self.options.confirm_with_elicitation
            and call.ctx.has_client_capability("elicitation")
            and await self.gatekeeper.may_elicit(principal)
        ):
            await self._elicit(operation, values, call, principal, session)
            return
        await self._audit("token", operation, call, "issued")
        raise await self.gatekeeper.require(operation, values, principal, session)

    async def _elicit(
        self, operation: Operation, values: dict[str, Any], call: Call, principal: str, session: str
    ) -> None:
        # The question names the call's parameters, so two confirmations in one batch differ for
        # the person answering; its key is bound to them, so in the modern era an answer counts
        # only for the call it was given for (docs/eras.md, "Asking the client").
        shown = orjson.dumps({k: v for k, v in values.items() if k != "fields"}).decode()
        if len(shown) > CONFIRM_PARAMS_SHOWN:
            shown = shown[:CONFIRM_PARAMS_SHOWN] + "..."
        message = (
            f"The agent asks to run '{operation.name}' ({operation.danger_level}) with {shown}: {operation.description}"
        )
        key = f"confirm-{params_hash(operation, values)[:16]}"
        answer = await call.ctx.elicit(message, CONFIRM_SCHEMA, key=key)
        content = answer.get("content") or {}
        if answer.get("action") == "accept" and content.get("confirm") is True:
            if not await self.gatekeeper.may_elicit(principal):
                # The principal became held while the question was open (it started an execution
                # from another session, say): the answer may be the agent's own, so the call gets
                # a token a watcher holds for an operator instead (docs/safety.md).
                await self._audit("token", operation, call, "issued")
                raise await self.gatekeeper.require(operation, values, principal, session)
            await self._audit("confirmation", operation, call, "approved")
            return
        await self._audit("confirmation", operation, call, "declined")
        raise OperationError(
            PERMISSION_DENIED,
            "Permission denied: 'the user did not confirm the operation'",
            {"reason": "confirmation declined", "operation": operation.name},
        )

    def _shape(
        self, operation: Operation, result: Any, selection: Selection, notices: list[dict[str, Any]]
    ) -> Envelope:
        warnings = list(notices)
        if isinstance(result, Outcome):
            result, warnings = result.data, [*warnings, *result.warnings]
        if isinstance(result, Page):
            return self._fit_page(result, selection, warnings)
        if selection is not None and isinstance(result, dict):
            result = select(result, selection)
        envelope = success(result, warnings)
        size = wire_size(envelope)
        if size <= self.options.max_response_bytes:
            return envelope
        if operation.category != "READ" and isinstance(result, dict):
            # The change is made: an error would hide it, so the caller gets the identifiers only.
            kept = {k: result[k] for k in IDENTIFIERS if k in result}
            notice = warning(
                VALIDATION_TRUNCATED_WARNING,
                "Response truncated to the resource's identifiers",
                {"field": "data", "limit_type": "response_size", "limit_value": self.options.max_response_bytes},
            )
            return success(kept, [*warnings, notice])
        raise too_large("response_size", self.options.max_response_bytes, size, "bytes", None)

    def _fit_page(self, page: Page, selection: Selection, warnings: list[dict[str, Any]]) -> Envelope:
        """The page, or its longest prefix that fits the result limit, with pageInfo for the rest."""
        items = [select(item, selection) for item in page.items]
        limit = self.options.max_response_bytes
        envelope = _page_envelope(page, items, len(items), warnings)
        size = wire_size(envelope)
        if size <= limit:
            return envelope
        low, high = 0, len(items) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if wire_size(_page_envelope(page, items, middle, warnings)) <= limit:
                low = middle
            else:
                high = middle - 1
        if low == 0:
            raise too_large("response_size", limit, size, "bytes", None)
        notice = warning(
            VALIDATION_TRUNCATED_WARNING,
            f"Response truncated to {low} items",
            {
                "field": "items",
                "original_count": len(items),
                "truncated_count": low,
                "limit": low,
                "limit_type": "response_size",
                "limit_value": limit,
            },
            severity="medium" if low * 2 < len(items) else "low",
        )
        return _page_envelope(page, items, low, [*warnings, notice])


def _page_envelope(page: Page, items: list[dict[str, Any]], count: int, warnings: list[dict[str, Any]]) -> Envelope:
    kept = items[:count]
    info: dict[str, Any] = {"hasNextPage": page.has_next or count < len(items), "hasPreviousPage": page.has_previous}
    if kept:
        info["startCursor"] = page.cursors[0]
        info["endCursor"] = page.cursors[count - 1]
    if page.total_count is not None:
        info["totalCount"] = page.total_count
    return success({"items": kept, "pageInfo": info, **page.extra}, warnings)


def _trimmed(operation: Operation, envelope: Envelope) -> Envelope:
    """A failure of an operation whose schema allows only `code` and `message` (its message says it all)."""
    if operation.bare_errors and envelope.get("success") is False and "details" in envelope["error"]:
        error = envelope["error"]
        return {"success": False, "error": {"code": error["code"], "message": error["message"]}}
    return envelope


def _id(envelope: Envelope) -> str | None:
    data = envelope.get("data")
    if isinstance(data, dict):
        for key in ("id", "name"):
            if isinstance(data.get(key), str):
                return str(data[key])
    return None
