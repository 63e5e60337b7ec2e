"""The console's decisions: verify or reject a challenge, approve or deny a pause, lift a block.

Each is a POST form to `/console/<action>` (docs/console.md, "Forms"): the CSRF check first, then
the operator desk, which applies the same rules as the MCP path (self-approval refused, a challenge
used once, failures counted, §8.7.3, §8.8) and writes the decision to the safety events with the
operator's principal digest. Every attempt, allowed or refused, is also an audit log line with the
operator's digest and the request id, never the code or a token. Success answers 303 back to the
page (post/redirect/get), so a reload never repeats a decision.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from aql_mcp.plugin import AuditLog, OperationError, Principal, WireError
from aql_mcp.plugins.safety.console.csrf import FIELD, check_csrf, csrf_token
from aql_mcp.plugins.safety.console.form import read_form, required
from aql_mcp.plugins.safety.console.guard import operator_of
from aql_mcp.plugins.safety.console.refusal import desk_refusal, refusal
from aql_mcp.plugins.safety.desk import OperatorDesk

Decide = Callable[[OperatorDesk, dict[str, str], str], Awaitable[str]]


async def _verify(desk: OperatorDesk, form: dict[str, str], operator: str) -> str:
    challenge = required(form, "challenge_id")
    await desk.verify(challenge, required(form, "code"), operator)
    return challenge


async def _reject(desk: OperatorDesk, form: dict[str, str], operator: str) -> str:
    challenge = required(form, "challenge_id")
    await desk.reject(challenge, operator)
    return challenge


async def _approve(desk: OperatorDesk, form: dict[str, str], operator: str) -> str:
    approval = required(form, "approval_id")
    await desk.approve(approval, operator)
    return approval


async def _deny(desk: OperatorDesk, form: dict[str, str], operator: str) -> str:
    approval = required(form, "approval_id")
    await desk.deny(approval, operator)
    return approval


async def _lift(desk: OperatorDesk, form: dict[str, str], operator: str) -> str:
    principal = required(form, "principal")
    await desk.lift(principal, operator)
    return principal


# action -> (what it does, the page section to return to)
ACTIONS: dict[str, tuple[Decide, str]] = {
    "verify": (_verify, "challenges"),
    "reject": (_reject, "challenges"),
    "approve": (_approve, "approvals"),
    "deny": (_deny, "approvals"),
    "lift": (_lift, "blocks"),
}


@dataclass(frozen=True, slots=True)
class Actions:
    desk: OperatorDesk
    audit: AuditLog

    def endpoint(self, action: str) -> Callable[[Request], Awaitable[Response]]:
        decide, section = ACTIONS[action]

        async def handle(request: Request) -> Response:
            operator = operator_of(request)
            digest = operator.principal.digest
            target: str | None = None
            form: dict[str, str] = {}
            try:
                form = await read_form(request)
                check_csrf(request, form.get(FIELD), csrf_token(operator.credential))
                target = await decide(self.desk, form, digest)
            except WireError as exc:
                await self._record(action, operator.principal, "refused", target, type(exc).__name__)
                return refusal(request, exc)
            except OperationError as exc:
                await self._record(action, operator.principal, "refused", form.get(_TARGET[action]), exc.code)
                return desk_refusal(request, exc)
            await self._record(action, operator.principal, "ok", target, None)
            return RedirectResponse(f"/console?done={action}#{section}", status_code=303)

        return handle

    async def _record(
        self, action: str, operator: Principal, outcome: str, target: str | None, code: str | None
    ) -> None:
        # Awaited: the operator's answer is not sent before its record is durable (docs/audit.md).
        await self.audit.record(
            "console_action",
            operation=action,
            principal=operator.digest,
            outcome=outcome,
            resource_id=target,
            code=code,
            caller=operator,
        )


_TARGET = {"verify": "challenge_id", "reject": "challenge_id", "approve": "approval_id", "deny": "approval_id"} | {
    "lift": "principal"
}
