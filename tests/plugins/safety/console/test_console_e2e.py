"""The operator console on a real `aql-mcp serve --dev` (docs/console.md; MCP-AQL §8.7.3, §8.8).

Challenges are raised through real MCP calls (a deny pattern in `record_execution_step`), read off
the console page and decided through its forms. Every refusal is checked for its status, code and
headers, and for leaking nothing; the server log is checked for the codes and tokens at the end of
the run (tests/conftest.py) and here for the audit lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from aql_mcp.auth.principal import subject_digest
from tests.support.aql import session
from tests.support.console import LEAKS, ConsoleClient, code_on, csrf_on, login_code, raise_challenge, step
from tests.support.idp import running_idp
from tests.support.redaction import remember_secret
from tests.support.server import ServerProcess, start_server
from tests.support.sse import iter_events

OPERATOR = ("aql:operator",)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {"AQL_MCP_CONSOLE__REFRESH_SECONDS": "0.2"}
    with start_server(tmp_path_factory.mktemp("console"), env=env) as process:
        yield process


@pytest.fixture
def operator(server: ServerProcess) -> Iterator[ConsoleClient]:
    with httpx.Client(base_url=server.base, timeout=20) as http:
        yield ConsoleClient(http, server.token("olivia", OPERATOR))


def audit_lines(server: ServerProcess, event: str) -> list[dict[str, Any]]:
    lines = []
    for line in server.log_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("audit") == event:
            lines.append(entry)
    return lines


def assert_refused(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert not any(leak in response.text for leak in LEAKS), response.text
    assert response.headers["x-request-id"]
    body: dict[str, Any] = response.json()["error"]
    assert body["data"]["requestId"] == response.headers["x-request-id"]
    return body


def test_console_without_a_token_is_401_with_the_mcp_bearer_challenge(server: ServerProcess) -> None:
    """Corporate §7.4: a missing token is 401 with `WWW-Authenticate` naming the resource metadata."""
    response = httpx.get(f"{server.base}/console", headers={"accept": "application/json"})
    error = assert_refused(response, 401)
    assert error["code"] == -32000
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer realm=")
    assert "resource_metadata=" in challenge
    assert "error=" not in challenge


def test_console_with_an_invalid_token_is_401_invalid_token(server: ServerProcess) -> None:
    response = httpx.get(f"{server.base}/console/events", headers={"authorization": "Bearer not-a-token"})
    assert_refused(response, 401)
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_console_with_a_token_lacking_the_operator_scope_is_403_insufficient_scope(server: ServerProcess) -> None:
    token = server.token("agent-x", ("mcp",))
    for method, path in (("GET", "/console"), ("GET", "/console/events"), ("POST", "/console/verify")):
        response = httpx.request(method, f"{server.base}{path}", headers={"authorization": f"Bearer {token}"})
        error = assert_refused(response, 403)
        assert error["data"]["scope"] == "aql:operator"
        assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
        assert 'scope="aql:operator"' in response.headers["www-authenticate"]


def test_a_browser_without_a_token_in_development_mode_is_sent_to_the_login_page(server: ServerProcess) -> None:
    response = httpx.get(f"{server.base}/console", headers={"accept": "text/html"})
    assert response.status_code == 303
    assert response.headers["location"] == "/console/login"


def test_the_page_carries_a_nonce_csp_no_framing_and_no_store(operator: ConsoleClient) -> None:
    response = operator.http.get("/console", headers=operator.headers)
    assert response.status_code == 200
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy
    nonce = policy.split("script-src 'nonce-")[1].split("'")[0]
    assert f"<script nonce={nonce}>" in response.text
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"
    assert "http://" not in response.text.replace(operator.http.base_url.host, "")  # no external assets
    for section in ("challenges", "approvals", "blocks", "runs", "events"):
        assert f'<section id="{section}"' in response.text


def test_a_challenge_raised_through_mcp_shows_its_code_on_the_page_and_is_approved_there(
    server: ServerProcess, operator: ConsoleClient
) -> None:
    """§8.8.2: the code is shown to the human on the console only; the right code unblocks the agent."""
    with session(server, subject="agent-approve") as agent:
        challenge = raise_challenge(agent)
        assert step(agent)["stopped"] is True
        html = operator.page()
        code = code_on(html, challenge)
        assert len(code) >= 22  # >= 128 bits, base64url or hex
        response = operator.post("verify", challenge_id=challenge, code=code, csrf=csrf_on(html))
        assert response.status_code == 303
        assert response.headers["location"].startswith("/console?done=verify")
        replayed = operator.http.post(
            "/console/verify",
            data={"challenge_id": challenge, "code": code, "csrf": csrf_on(html)},
            headers={"authorization": operator.headers["authorization"], "accept": "application/json"},
        )
        assert assert_refused(replayed, 409)["code"] == "TOKEN_ALREADY_USED"
        directive = step(agent)
    assert directive["continue"] is True
    assert "stopped" not in directive
    after = operator.page()
    assert f'data-challenge="{challenge}"' not in after
    assert "Verified" in operator.http.get("/console?done=verify", headers=operator.headers).text
    lines = audit_lines(server, "console_action")
    assert any(line["operation"] == "verify" and line["outcome"] == "ok" and line["request_id"] for line in lines)


def test_a_wrong_code_is_refused_with_422_and_counted(server: ServerProcess, operator: ConsoleClient) -> None:
    with session(server, subject="agent-wrong") as agent:
        challenge = raise_challenge(agent)
        html = operator.page()
        response = operator.http.post(
            "/console/verify",
            data={"challenge_id": challenge, "code": "not-the-code", "csrf": csrf_on(html)},
            headers={"authorization": operator.headers["authorization"], "accept": "application/json"},
        )
        error = assert_refused(response, 422)
        assert error["code"] == "TOKEN_INVALID"
        assert error["data"]["failures"] == 1
        assert step(agent)["stopped"] is True


def test_a_post_without_the_csrf_token_is_403_and_decides_nothing(
    server: ServerProcess, operator: ConsoleClient
) -> None:
    with session(server, subject="agent-csrf") as agent:
        challenge = raise_challenge(agent)
        code = code_on(operator.page(), challenge)
        json_headers = {"authorization": operator.headers["authorization"], "accept": "application/json"}
        missing = operator.http.post(
            "/console/verify", data={"challenge_id": challenge, "code": code}, headers=json_headers
        )
        wrong = operator.http.post(
            "/console/verify", data={"challenge_id": challenge, "code": code, "csrf": "x" * 43}, headers=json_headers
        )
        other_token = server.token("oscar", OPERATOR)
        foreign = operator.http.post(
            "/console/verify",
            data={"challenge_id": challenge, "code": code, "csrf": csrf_on(operator.page())},
            headers={"authorization": f"Bearer {other_token}", "accept": "application/json"},
        )
        cross_site = operator.http.post(
            "/console/verify",
            data={"challenge_id": challenge, "code": code, "csrf": csrf_on(operator.page())},
            headers={**json_headers, "sec-fetch-site": "cross-site"},
        )
        for response, reason in ((missing, "csrf_token"), (wrong, "csrf_token"), (foreign, "csrf_token")):
            assert assert_refused(response, 403)["data"]["reason"] == reason
        assert assert_refused(cross_site, 403)["data"]["reason"] == "cross_site"
        assert step(agent)["stopped"] is True
        assert f'data-challenge="{challenge}"' in operator.page()


def test_a_post_from_an_origin_outside_the_allow_list_is_403(server: ServerProcess, operator: ConsoleClient) -> None:
    html = operator.page()
    response = operator.http.post(
        "/console/reject",
        data={"challenge_id": "x", "csrf": csrf_on(html)},
        headers={**operator.headers, "origin": "http://evil.test", "accept": "application/json"},
    )
    assert_refused(response, 403)


def test_a_form_that_is_not_urlencoded_or_lacks_a_field_is_refused(operator: ConsoleClient) -> None:
    csrf = csrf_on(operator.page())
    headers = {"authorization": operator.headers["authorization"], "accept": "application/json"}
    as_json = operator.http.post("/console/verify", json={"challenge_id": "x", "csrf": csrf}, headers=headers)
    assert_refused(as_json, 415)
    no_code = operator.http.post("/console/verify", data={"challenge_id": "x", "csrf": csrf}, headers=headers)
    assert assert_refused(no_code, 400)["data"]["field"] == "code"
    unknown = operator.http.post("/console/approve", data={"approval_id": "nope", "csrf": csrf}, headers=headers)
    assert assert_refused(unknown, 404)["code"] == "NOT_FOUND_RESOURCE"


def test_the_agent_cannot_approve_its_own_challenge_on_the_console(server: ServerProcess) -> None:
    """§8.7.3 self-approval: an agent's principal holding the operator scope is still refused."""
    token = server.token("agent-self", ("mcp", "aql:operator"))
    with session(server, token=token) as agent, httpx.Client(base_url=server.base, timeout=20) as http:
        challenge = raise_challenge(agent)
        console = ConsoleClient(http, token)
        html = console.page()
        response = console.http.post(
            "/console/verify",
            data={"challenge_id": challenge, "code": code_on(html, challenge), "csrf": csrf_on(html)},
            headers={"authorization": f"Bearer {token}", "accept": "application/json"},
        )
        error = assert_refused(response, 403)
        assert (error["code"], error["data"]["reason"]) == ("PERMISSION_DENIED", "self_approval")
        assert step(agent)["stopped"] is True


def test_a_refused_form_in_a_browser_gets_an_html_page_with_the_request_id(operator: ConsoleClient) -> None:
    response = operator.post("verify", challenge_id="x", code="y", csrf="wrong")
    assert response.status_code == 403
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["x-request-id"] in response.text
    assert "default-src 'none'" in response.headers["content-security-policy"]


def test_the_block_can_be_lifted_from_the_console_as_an_admin_override(
    server: ServerProcess, operator: ConsoleClient
) -> None:
    """§8.8.3: only verification or an explicit admin override unblocks; the override is the Lift form."""
    with session(server, subject="agent-lift") as agent:
        raise_challenge(agent)
        principal = subject_digest("agent-lift")
        html = operator.page()
        assert f'name="principal" value="{principal}"' in html
        response = operator.post("lift", principal=principal, csrf=csrf_on(html))
        assert response.status_code == 303
        assert f'name="principal" value="{principal}"' not in operator.page()
        assert step(agent)["continue"] is True


@pytest.mark.anyio
async def test_the_event_stream_sends_the_live_region_and_again_when_a_challenge_appears(
    server: ServerProcess,
) -> None:
    """The page's live updates: an `overview` event at once, another when the store changes."""
    token = server.token("olivia", OPERATOR)
    headers = {"authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(base_url=server.base, timeout=20) as http,
        http.stream("GET", "/console/events", headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = iter_events(response)
        first = await anext(events)
        assert first.data is not None
        assert '<section id="challenges"' in first.data
        with session(server, subject="agent-live") as agent:
            challenge = raise_challenge(agent)
        async for event in events:
            if event.data and f'data-challenge="{challenge}"' in event.data:
                break


def test_the_development_login_sets_an_httponly_samesite_strict_cookie_and_sign_out_clears_it(
    server: ServerProcess,
) -> None:
    with httpx.Client(base_url=server.base, timeout=20) as http:
        form = http.get("/console/login")
        assert form.status_code == 200
        assert "<label for=operator>" in form.text
        login_cookie = form.headers["set-cookie"]
        assert "HttpOnly" in login_cookie
        assert "SameSite=Strict" in login_cookie
        nonce = csrf_on(form.text)
        json_accept = {"accept": "application/json"}
        forged = http.post("/console/login", data={"operator": "mallory", "csrf": "forged"}, headers=json_accept)
        assert assert_refused(forged, 403)["data"]["reason"] == "csrf_token"
        code = login_code(server)
        bad_name = http.post(
            "/console/login", data={"operator": "<x>", "csrf": nonce, "code": code}, headers=json_accept
        )
        assert_refused(bad_name, 400)
        signed_in = http.post("/console/login", data={"operator": "olga", "csrf": nonce, "code": code})
        assert signed_in.status_code == 303
        assert signed_in.headers["location"] == "/console"
        session_cookie = next(c for c in signed_in.headers.get_list("set-cookie") if c.startswith("aql_console="))
        remember_secret(session_cookie.split(";")[0].split("=", 1)[1])
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/console", "Max-Age=28800"):
            assert attribute in session_cookie.split("; ")
        page = http.get("/console")
        assert page.status_code == 200
        assert "olga" in page.text
        assert "Sign out" in page.text
        refused = http.post("/console/logout", data={"csrf": "wrong"}, headers=json_accept)
        assert_refused(refused, 403)
        signed_out = http.post("/console/logout", data={"csrf": csrf_on(page.text)})
        assert signed_out.status_code == 303
        assert "Max-Age=0" in signed_out.headers["set-cookie"]
        assert http.get("/console", headers=json_accept).status_code == 401
    logins = audit_lines(server, "console_login")
    assert any(line["outcome"] == "ok" and line["principal"] == subject_digest("olga") for line in logins)
    assert "olga" not in json.dumps(logins)


def test_the_verification_code_appears_on_the_console_page_only_never_in_mcp_answers_or_logs(
    server: ServerProcess, operator: ConsoleClient
) -> None:
    """MCP-AQL §8.8.2, §8.8.4: the agent gets the challenge id, the human the code."""
    answers = []
    with session(server, subject="agent-secret") as agent:
        challenge = raise_challenge(agent)
        code = code_on(operator.page(), challenge)
        answers.append(step(agent))
        answers.append(agent.call("mcp_aql_read", "introspect", query="operations"))
        wrong = operator.http.post(
            "/console/verify",
            data={"challenge_id": challenge, "code": code[::-1], "csrf": csrf_on(operator.page())},
            headers={"authorization": operator.headers["authorization"], "accept": "application/json"},
        )
        answers.append(wrong.json())
        replacement = wrong.json()["error"]["data"].get("verificationId", challenge)
        fresh = code_on(operator.page(), replacement)
        answers.append(step(agent))
    text = json.dumps(answers)
    assert challenge in text
    assert code not in text
    assert fresh not in text
    assert code not in server.log_text()
    assert fresh not in server.log_text()


def test_wrong_codes_past_the_limit_are_429_with_retry_after(server: ServerProcess, operator: ConsoleClient) -> None:
    """§8.8.5: at most `safety.max_failed_verifications` (10) failures per agent within the window."""
    headers = {"authorization": operator.headers["authorization"], "accept": "application/json"}
    with session(server, subject="agent-brute") as agent:
        challenge = raise_challenge(agent)
        csrf = csrf_on(operator.page())
        for attempt in range(1, 11):
            wrong = operator.http.post(
                "/console/verify", data={"challenge_id": challenge, "code": "guess", "csrf": csrf}, headers=headers
            )
            error = assert_refused(wrong, 422)
            assert error["data"]["failures"] == attempt
            challenge = error["data"].get("verificationId", challenge)
        limited = operator.http.post(
            "/console/verify", data={"challenge_id": challenge, "code": "guess", "csrf": csrf}, headers=headers
        )
        assert assert_refused(limited, 429)["code"] == "RATE_LIMIT_EXCEEDED"
        assert int(limited.headers["retry-after"]) > 0
        assert step(agent)["stopped"] is True


def test_a_paused_action_is_approved_or_denied_with_the_console_buttons(
    server: ServerProcess, operator: ConsoleClient
) -> None:
    """§8.7.2 `requiresApproval`: the agent pauses until a human decides; the console is where."""
    with session(server, subject="agent-pause") as agent:
        assert agent.call("mcp_aql_execute", "execute_agent", element_name="deployer")["success"]
        first = step(agent, "deployer", "deploy_service staging")["approvalId"]
        html = operator.page()
        assert f'name="approval_id" value="{first}"' in html
        assert operator.post("approve", approval_id=first, csrf=csrf_on(html)).status_code == 303
        assert step(agent, "deployer", "deploy_service staging")["continue"] is True
        second = step(agent, "deployer", "deploy_service production-eu")["approvalId"]
        html = operator.page()
        assert operator.post("deny", approval_id=second, csrf=csrf_on(html)).status_code == 303
        after = operator.page()
    assert f'name="approval_id" value="{first}"' not in after
    assert f'name="approval_id" value="{second}"' not in after
    assert "approval_approved" in after
    assert "approval_denied" in after
    decided = {line["operation"] for line in audit_lines(server, "console_action") if line["outcome"] == "ok"}
    assert {"approve", "deny"} <= decided


def test_the_development_login_needs_the_sign_in_code_the_service_wrote_at_start(server: ServerProcess) -> None:
    """Without it anyone who reaches the console would sign in as an operator (docs/console.md)."""
    path = server.state / "console-login-code"
    with httpx.Client(base_url=server.base, timeout=20) as http:
        form = http.get("/console/login")
        nonce, accept = csrf_on(form.text), {"accept": "application/json"}
        guessed = http.post(
            "/console/login", data={"operator": "mallory", "csrf": nonce, "code": "guess"}, headers=accept
        )
        missing = http.post("/console/login", data={"operator": "mallory", "csrf": nonce}, headers=accept)
    assert assert_refused(guessed, 403)["data"]["reason"] == "login_code"
    assert "aql_console=" not in str(guessed.headers.get_list("set-cookie"))
    assert assert_refused(missing, 400)["data"]["field"] == "code"
    assert path.stat().st_mode & 0o777 == 0o600
    assert login_code(server) not in server.log_text()


def test_a_console_sign_in_is_not_a_credential_for_mcp(server: ServerProcess) -> None:
    """The login's token has the console's own audience: `/mcp` answers 401 invalid_token."""
    with httpx.Client(base_url=server.base, timeout=20) as http:
        form = http.get("/console/login")
        signed_in = http.post(
            "/console/login", data={"operator": "olga", "csrf": csrf_on(form.text), "code": login_code(server)}
        )
        cookie = next(c for c in signed_in.headers.get_list("set-cookie") if c.startswith("aql_console="))
        token = remember_secret(cookie.split(";")[0].split("=", 1)[1])
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        refused = http.post(
            "/mcp",
            json=initialize,
            headers={"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"},
        )
        as_bearer = http.get("/console", headers={"authorization": f"Bearer {token}", "accept": "application/json"})
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert token not in refused.text
    assert as_bearer.status_code == 401


@pytest.mark.anyio
async def test_the_event_stream_ends_when_the_operators_token_is_revoked(tmp_path: Path) -> None:
    """An opaque token has no expiry of its own: the stream asks the verifier again every tick, so a
    token the IdP now calls inactive stops receiving codes."""
    with running_idp() as idp:
        env = {
            **idp.service_env(),
            "AQL_MCP_AUTH__INTROSPECTION_CACHE_SECONDS": "0",
            "AQL_MCP_CONSOLE__REFRESH_SECONDS": "0.2",
        }
        with start_server(tmp_path, env=env) as server:
            token = remember_secret(idp.issue_opaque(sub="olivia", scope="mcp aql:operator"))
            async with (
                httpx.AsyncClient(base_url=server.base, timeout=20) as http,
                http.stream("GET", "/console/events", headers={"authorization": f"Bearer {token}"}) as response,
            ):
                assert response.status_code == 200
                events = iter_events(response)
                first = await anext(events)
                assert first.data is not None
                idp.answer_introspection(token, {"active": False})
                with anyio.fail_after(15):
                    rest = [event async for event in events]
                again = await http.get("/console/events", headers={"authorization": f"Bearer {token}"})
    assert all('<section id="challenges"' not in (event.data or "") for event in rest)
    assert again.status_code == 401
