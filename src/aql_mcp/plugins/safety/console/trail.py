"""The audit trail as the console shows it: `GET /console/trail`, the records of a challenge, an
execution or an agent, newest first, as JSON, or as an HTML table for a browser (`Accept:
text/html`) (docs/console.md, "The audit trail").

The query string filters: `resource_id` (a challenge, an approval, an execution, a record),
`subject` (a principal digest: an agent's or an operator's), `kind`, `outcome`, `since` (included)
and `until` (excluded), and `limit` (default 100, at most 500). Each value exactly once; an unknown
name, a repeated one or a time that is not ISO 8601 is refused, so a typo never shows the whole
trail as if it were filtered. Records hold digests, never a parameter value, token or code.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from aql_mcp.plugin import AuditLog, AuditQuery, InvalidRequest, WireError, moment
from aql_mcp.plugins.safety.console.document import page_response
from aql_mcp.plugins.safety.console.guard import operator_of
from aql_mcp.plugins.safety.console.refusal import refusal

MATCHED = ("resource_id", "subject", "kind", "outcome")
TIMES = ("since", "until")
DEFAULT_LIMIT = 100
MAX_LIMIT = 500
MAX_VALUE_CHARS = 256
# The columns of the HTML table, in order: the fields an operator reads a decision by.
SHOWN = ("recorded_at", "kind", "operation", "outcome", "code", "subject", "resource_id", "request_id")


@dataclass(frozen=True, slots=True)
class TrailView:
    audit: AuditLog

    async def records(self, request: Request) -> Response:
        operator_of(request)  # only behind the console guard
        try:
            query, limit = trail_query(request.query_params)
        except WireError as exc:
            return refusal(request, exc)
        found = await self.audit.find(query, limit=limit)
        if "text/html" in request.headers.get("accept", ""):
            return page_response("Console: audit trail", trail_table(found, limit))
        return JSONResponse({"records": found, "limit": limit}, headers={"cache-control": "no-store"})


def trail_query(params: QueryParams) -> tuple[AuditQuery, int]:
    """The filter and limit a query string asks for; InvalidRequest naming the field otherwise."""
    values: dict[str, str] = {}
    for name, value in params.multi_items():
        if name not in (*MATCHED, *TIMES, "limit"):
            raise InvalidRequest(f"Invalid request: the trail has no filter '{name}'", data={"field": name})
        if name in values or len(value) > MAX_VALUE_CHARS:
            raise InvalidRequest(f"Invalid request: '{name}' is repeated or too long", data={"field": name})
        values[name] = value
    for name in TIMES:
        if name in values:
            try:
                values[name] = moment(values[name])
            except ValueError:
                raise InvalidRequest(
                    f"Invalid request: '{name}' is not an ISO 8601 date or time", data={"field": name}
                ) from None
    limit = _limit(values.pop("limit", None))
    return AuditQuery(**{name: value for name, value in values.items() if value}), limit


def trail_table(records: list[dict[str, Any]], limit: int) -> str:
    """The records as one table, every value escaped."""
    head = "".join(f"<th scope=col>{escape(column)}</th>" for column in SHOWN)
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(str(record[column] or ''))}</td>" for column in SHOWN) + "</tr>"
        for record in records
    )
    caption = f"{len(records)} record(s), newest first, at most {limit}"
    return (
        f'<main><h1>Audit trail</h1><p><a href="/console">Back to the console</a></p>'
        f"<table><caption>{escape(caption)}</caption><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></main>"
    )


def _limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if not value.isdigit() or not 1 <= int(value) <= MAX_LIMIT:
        raise InvalidRequest(
            f"Invalid request: 'limit' is a whole number from 1 to {MAX_LIMIT}", data={"field": "limit"}
        )
    return int(value)
