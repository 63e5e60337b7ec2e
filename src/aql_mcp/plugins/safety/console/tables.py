"""The console's live region: what the safety loop holds, as HTML tables (docs/console.md, "The page").

One function renders the whole region from a `SafetyOverview`; the page embeds it and the event
stream sends it again whenever it changes, so the page and its updates can never disagree. Times
are absolute (UTC), so the same overview always renders to the same HTML and an unchanged store
sends nothing. Every value is escaped; every form carries the CSRF token and labels its controls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any, TypeVar

from aql_mcp.plugin import Identity
from aql_mcp.plugins.safety.console.csrf import FIELD
from aql_mcp.plugins.safety.store import AgentRun, Approval, Block, Challenge, SafetyEvent, SafetyOverview

Row = TypeVar("Row")


def stamp(at: float | None) -> str:
    return "" if at is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def live_region(overview: SafetyOverview, csrf: str) -> str:
    who = _who(overview.identities)
    return "".join(
        [
            _section("challenges", "Pending challenges", overview.challenges, CHALLENGE_COLUMNS, _challenge(csrf, who)),
            _section("approvals", "Pending approvals", overview.approvals, APPROVAL_COLUMNS, _approval(csrf, who)),
            _section("blocks", "Blocked agents", overview.blocks, BLOCK_COLUMNS, _block(csrf, who)),
            _section("runs", "Agents and their executions", overview.runs, RUN_COLUMNS, _run(who)),
            _section("events", "Recent safety events", overview.events, EVENT_COLUMNS, _event),
        ]
    )


def _who(identities: Mapping[str, Identity]) -> Callable[[str], str]:
    """A principal's cell: its subject and tenant where known (the agent's name is its own choice,
    so this is what tells two agents of one name apart; issue 27, N8), and always its key."""

    def cell(principal: str) -> str:
        known = identities.get(principal)
        if known is None:
            return _id(principal)
        tenant = f" <span class=muted>tenant {escape(known.tenant)}</span>" if known.tenant else ""
        return f"<span class=wrap>{escape(known.subject)}</span>{tenant} {_id(principal)}"

    return cell


def _section(
    key: str, title: str, rows: Sequence[Row], columns: Sequence[str], render: Callable[[Row], list[str]]
) -> str:
    heading = f'<h2 id="{key}-heading">{escape(title)} <span class=muted>({len(rows)})</span></h2>'
    if not rows:
        return f'<section id="{key}" aria-labelledby="{key}-heading">{heading}<p class=muted>None.</p></section>'
    head = "".join(f"<th scope=col>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in render(row)) + "</tr>" for row in rows)
    return (
        f'<section id="{key}" aria-labelledby="{key}-heading">{heading}'
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>"
    )


def _form(action: str, csrf: str, fields: dict[str, str], inner: str) -> str:
    hidden = "".join(f'<input type=hidden name="{k}" value="{escape(v)}">' for k, v in {**fields, FIELD: csrf}.items())
    return f'<form method=post action="/console/{action}">{hidden}{inner}</form>'


CHALLENGE_COLUMNS = ("Challenge", "Agent", "Principal", "Tier", "Action", "Reason", "Expires", "Code", "Decision")


def _challenge(csrf: str, who: Callable[[str], str]) -> Callable[[Challenge], list[str]]:
    def render(c: Challenge) -> list[str]:
        field = f"code-{escape(c.id)}"
        verify = _form(
            "verify",
            csrf,
            {"challenge_id": c.id},
            f'<label for="{field}">Code for challenge {escape(c.id[:8])}</label>'
            f'<input type=text id="{field}" name=code autocomplete=off spellcheck=false required>'
            "<button type=submit>Verify and approve</button>",
        )
        reject = _form(
            "reject",
            csrf,
            {"challenge_id": c.id},
            f'<button type=submit class=danger aria-label="Reject challenge {escape(c.id[:8])}">Reject</button>',
        )
        code = f'<code class=code data-challenge="{escape(c.id)}">{escape(c.code)}</code>'
        return [
            _id(c.id),
            escape(c.agent),
            who(c.principal),
            escape(c.tier),
            _text(c.action),
            _text(c.reason),
            escape(stamp(c.expires_at)),
            code,
            verify + reject,
        ]

    return render


APPROVAL_COLUMNS = ("Approval", "Agent", "Principal", "Kind", "Action", "Reason", "Since", "Decision")


def _approval(csrf: str, who: Callable[[str], str]) -> Callable[[Approval], list[str]]:
    def render(a: Approval) -> list[str]:
        short = escape(a.id[:8])
        approve = _form(
            "approve", csrf, {"approval_id": a.id}, f'<button type=submit aria-label="Approve {short}">Approve</button>'
        )
        deny = _form(
            "deny",
            csrf,
            {"approval_id": a.id},
            f'<button type=submit class=danger aria-label="Deny {short}">Deny</button>',
        )
        return [
            _id(a.id),
            escape(a.agent),
            who(a.principal),
            escape(a.kind),
            _text(a.action),
            _text(a.reason),
            escape(stamp(a.created_at)),
            approve + deny,
        ]

    return render


BLOCK_COLUMNS = ("Agent", "Principal", "Reason", "Challenge", "Since", "Override")


def _block(csrf: str, who: Callable[[str], str]) -> Callable[[Block], list[str]]:
    def render(b: Block) -> list[str]:
        lift = _form(
            "lift",
            csrf,
            {"principal": b.principal},
            f'<button type=submit class=secondary aria-label="Lift the block of {escape(b.agent)}">Lift block</button>',
        )
        return [
            escape(b.agent),
            who(b.principal),
            _text(b.reason),
            _id(b.challenge_id),
            escape(stamp(b.created_at)),
            lift,
        ]

    return render


RUN_COLUMNS = ("Execution", "Agent", "Principal", "Status", "Steps", "Last action", "Updated")


def _run(who: Callable[[str], str]) -> Callable[[AgentRun], list[str]]:
    def render(r: AgentRun) -> list[str]:
        return [
            _id(r.id),
            escape(r.agent),
            who(r.principal),
            escape(r.status),
            str(r.steps),
            _text(r.last_action or ""),
            escape(stamp(r.updated_at)),
        ]

    return render


EVENT_COLUMNS = ("Time", "Agent", "Event", "By", "Details")


def _event(e: SafetyEvent) -> list[str]:
    return [escape(stamp(e.at)), escape(e.agent), escape(e.kind), _id(e.actor), _details(e.detail)]


def _id(value: str) -> str:
    return f"<code>{escape(value)}</code>"


def _text(value: str) -> str:
    return f"<span class=wrap>{escape(value)}</span>"


def _details(detail: dict[str, Any]) -> str:
    return ", ".join(f"{escape(str(k))}: {escape(str(v))}" for k, v in sorted(detail.items()))
