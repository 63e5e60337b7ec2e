"""Driving the operator console from a test as an operator's browser or a script behind a gateway does:
plain HTTP with a bearer token, the CSRF token and the codes read off the page (docs/console.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import unescape
from typing import Any

import httpx

from tests.support.aql import Session
from tests.support.redaction import remember_secret

DENIED_ACTION = "drop_database production"
CSRF = re.compile(r'name="?csrf"? value="([^"]+)"')
LEAKS = ("Traceback", 'File "', ".py", "SELECT ", "Bearer ")


def raise_challenge(agent: Session, element_name: str = "builder") -> str:
    """Start a monitored execution and report a denied action (MCP-AQL §8.8.1): the challenge id."""
    started = agent.call("mcp_aql_execute", "execute_agent", element_name=element_name)
    assert started["success"], started
    step = agent.call(
        "mcp_aql_create", "record_execution_step", element_name=element_name, nextActionHint=DENIED_ACTION
    )
    assert step["success"], step
    directive = step["data"]
    assert (directive["continue"], directive.get("stopped")) == (False, True), directive
    return str(directive["verificationId"])


def step(agent: Session, element_name: str = "builder", hint: str = "read_file notes.txt") -> dict[str, Any]:
    answer = agent.call("mcp_aql_create", "record_execution_step", element_name=element_name, nextActionHint=hint)
    assert answer["success"], answer
    return dict(answer["data"])


def code_on(html: str, challenge_id: str) -> str:
    """The verification code the page shows for a challenge (remembered as a secret: no log may hold it)."""
    found = re.search(rf'data-challenge="{re.escape(challenge_id)}">([^<]+)</code>', html)
    assert found, f"challenge {challenge_id} is not on the page"
    return remember_secret(unescape(found.group(1)))


def login_code(server: Any) -> str:
    """The development login's sign-in code, read as the person running the service would: from the
    file the service wrote in its state directory (its terminal shows it too, when it is one)."""
    return remember_secret((server.state / "console-login-code").read_text().strip())


def csrf_on(html: str) -> str:
    found = CSRF.search(html)
    assert found, "no CSRF token on the page"
    return found.group(1)


@dataclass
class ConsoleClient:
    """An operator's HTTP client of one server's console, with the token a gateway would inject."""

    http: httpx.Client
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}", "accept": "text/html"}

    def page(self) -> str:
        response = self.http.get("/console", headers=self.headers)
        assert response.status_code == 200, response.text
        return response.text

    def post(self, action: str, **fields: str) -> httpx.Response:
        return self.http.post(f"/console/{action}", data=fields, headers=self.headers)

    def verify(self, challenge_id: str) -> httpx.Response:
        """Read the code and the CSRF token off the page, and submit the verify form."""
        html = self.page()
        return self.post("verify", challenge_id=challenge_id, code=code_on(html, challenge_id), csrf=csrf_on(html))
