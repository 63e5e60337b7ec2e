"""`GET /console`: the operator console page (docs/console.md, "The page").

A header saying who is signed in, a status line announcing live updates (aria-live), the outcome of
the last decision, and the live region (tables.py). A small inline script opens the event stream
(`/console/events`) and swaps the live region in place when an `overview` event arrives, keeping
what the operator was typing and where the keyboard focus was. Without script the page still works:
every decision is a plain form and a reload shows the current state.
"""

from __future__ import annotations

from html import escape

from starlette.requests import Request
from starlette.responses import Response

from aql_mcp.plugins.safety.console.csrf import FIELD, csrf_token
from aql_mcp.plugins.safety.console.document import page_response
from aql_mcp.plugins.safety.console.guard import operator_of
from aql_mcp.plugins.safety.console.tables import live_region
from aql_mcp.plugins.safety.desk import OperatorDesk

# The outcome shown after a decision (`?done=<action>`); any other value shows nothing.
DONE = {
    "verify": "Verified: the challenge is approved and the agent may go on.",
    "reject": "Rejected: the challenge failed and the agent stays held.",
    "approve": "Approved: the paused action may go on.",
    "deny": "Denied: the agent was told not to take the action.",
    "lift": "Block lifted: the agent may run again.",
}

SCRIPT = """
(() => {
  const live = document.getElementById("live");
  const state = document.getElementById("stream-state");
  const source = new EventSource("/console/events");
  source.addEventListener("overview", (event) => {
    const focused = document.activeElement && document.activeElement.id;
    const typed = {};
    live.querySelectorAll("input[type=text]").forEach((input) => { if (input.value) typed[input.id] = input.value; });
    live.innerHTML = event.data;
    for (const [id, value] of Object.entries(typed)) {
      const input = document.getElementById(id);
      if (input) input.value = value;
    }
    const again = focused && document.getElementById(focused);
    if (again) again.focus();
    state.textContent = "Live: updated " + new Date().toLocaleTimeString();
    document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
  });
  source.addEventListener("open", () => { state.textContent = "Live: connected"; });
  source.addEventListener("error", () => { state.textContent = "Live updates interrupted; retrying"; });
})();
"""


class ConsolePage:
    def __init__(self, desk: OperatorDesk, *, service: str) -> None:
        self.desk = desk
        self.service = service

    async def render(self, request: Request) -> Response:
        operator = operator_of(request)
        csrf = csrf_token(operator.credential)
        done = DONE.get(request.query_params.get("done", ""))
        notice = f"<p class=notice role=status>{escape(done)}</p>" if done else ""
        logout = (
            f'<form method=post action="/console/logout"><input type=hidden name={FIELD} value="{csrf}">'
            "<button type=submit class=secondary>Sign out</button></form>"
            if operator.from_cookie
            else ""
        )
        body = (
            f"<header><div><h1>Operator console</h1><p class=muted>{escape(self.service)}: signed in as "
            f"<code>{escape(operator.principal.subject)}</code></p></div>{logout}</header>"
            f"<main>{notice}<p id=stream-state class=muted role=status aria-live=polite>Live updates: connecting</p>"
            f"<div id=live>{live_region(await self.desk.overview(), csrf)}</div></main>"
        )
        return page_response("Operator console", body, script=SCRIPT)
