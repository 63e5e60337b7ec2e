"""The `/mcp` endpoint in-process: one test per rejection path, and the basic flows.

Every rejection is checked for its HTTP status, its JSON-RPC code, the request id in
`error.data.requestId` (corporate Appendix B.3) and the absence of anything internal (corporate
§13.3). Body-limit rejections live in `tests/middleware/test_limits.py`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from aql_mcp.auth.dev_issuer import DevIssuer
from aql_mcp.protocol.primitives import Registry
from aql_mcp.settings import Settings
from aql_mcp.testing.conformance import plugin as conformance
from tests.support.asgi import MCP_HEADERS, asgi_client, dev_settings, initialize_params, open_session, rpc

pytestmark = pytest.mark.anyio

LEAKS = ("traceback", "/work/", "/tmp/", "site-packages", ".py", "sqlite", "select ", "insert ")
LEGACY_VERSIONS = {"2025-11-25", "2025-06-18", "2025-03-26"}


def mint(settings: Settings, *, subject: str = "tester", ttl: int = 600) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    return issuer.mint(subject=subject, scopes=["mcp"], ttl=ttl)


def bearer(token: str) -> dict[str, str]:
    return {**MCP_HEADERS, "authorization": f"Bearer {token}"}


def assert_no_leak(text: str, *secrets: str) -> None:
    lowered = text.lower()
    for leak in LEAKS:
        assert leak not in lowered, (leak, text)
    for secret in secrets:
        assert secret not in text


def assert_wire_error(response: httpx.Response, status: int, code: int, *secrets: str) -> dict[str, Any]:
    """The response is a JSON-RPC error with this status and code, tied to the request id, leaking nothing."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body
    error: dict[str, Any] = body["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert error["message"]
    assert error["data"]["requestId"] == response.headers["x-request-id"]
    assert_no_leak(response.text, *secrets)
    return error


async def post_raw(client: httpx.AsyncClient, token: str, body: bytes, **headers: str) -> httpx.Response:
    return await client.post("/mcp", content=body, headers={**bearer(token), **headers})


# --- malformed JSON-RPC ---------------------------------------------------------------------------


async def test_unparseable_json_is_400_parse_error(client: httpx.AsyncClient, token: str) -> None:
    response = await post_raw(client, token, b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert_wire_error(response, 400, -32700, token)


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe\xfd", b'{"jsonrpc":"2.0","id":1,"method":"ping\xff"}', b'{"jsonrpc":"2.0","id":"\xed\xa0\x80"}'],
    ids=["garbage", "inside-a-string", "lone-surrogate"],
)
async def test_invalid_utf8_is_400_parse_error(client: httpx.AsyncClient, token: str, body: bytes) -> None:
    assert_wire_error(await post_raw(client, token, body), 400, -32700, token)


@pytest.mark.parametrize("batch", [[rpc("ping", message_id=1), rpc("ping", message_id=2)], [rpc("ping")], []])
async def test_json_rpc_batch_is_400_invalid_request(
    client: httpx.AsyncClient, token: str, batch: list[dict[str, Any]]
) -> None:
    """Corporate §6: the body is a single JSON-RPC message."""
    assert_wire_error(await post_raw(client, token, orjson.dumps(batch)), 400, -32600, token)


@pytest.mark.parametrize("body", [b'"ping"', b"42", b"null", b"true"])
async def test_non_object_body_is_400_invalid_request(client: httpx.AsyncClient, token: str, body: bytes) -> None:
    assert_wire_error(await post_raw(client, token, body), 400, -32600, token)


@pytest.mark.parametrize(
    "message",
    [{"id": 1, "method": "ping"}, {"jsonrpc": "1.0", "id": 1, "method": "ping"}, {"jsonrpc": 2.0, "id": 1}],
    ids=["missing", "1.0", "number"],
)
async def test_missing_or_wrong_jsonrpc_member_is_400_invalid_request(
    client: httpx.AsyncClient, token: str, message: dict[str, Any]
) -> None:
    assert_wire_error(await post_raw(client, token, orjson.dumps(message)), 400, -32600, token)


@pytest.mark.parametrize("message_id", [None, True, False, 1.5, {"a": 1}, [1]], ids=repr)
async def test_request_id_of_a_wrong_type_is_400_invalid_request(
    client: httpx.AsyncClient, token: str, message_id: Any
) -> None:
    """MCP 2025-11-25 basic/index: a request id is a string or an integer, never null."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": message_id, "method": "ping"})
    assert_wire_error(await post_raw(client, token, body), 400, -32600, token)


# --- sessions -------------------------------------------------------------------------------------


async def test_request_without_session_id_is_400_invalid_request(client: httpx.AsyncClient, token: str) -> None:
    """2025-11-25 transports, Session Management 2; corporate §6."""
    await open_session(client, token)
    response = await client.post("/mcp", json=rpc("tools/list"), headers=bearer(token))
    assert_wire_error(response, 400, -32600, token)


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_get_or_delete_without_session_id_is_400_invalid_request(
    client: httpx.AsyncClient, token: str, method: str
) -> None:
    headers = {"authorization": f"Bearer {token}", "accept": "text/event-stream"}
    response = await client.request(method, "/mcp", headers=headers)
    assert_wire_error(response, 400, -32600, token)


async def test_ping_without_session_id_succeeds(client: httpx.AsyncClient, token: str) -> None:
    response = await client.post("/mcp", json=rpc("ping", message_id="p"), headers=bearer(token))
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": "p", "result": {}}


async def test_initialize_with_a_session_id_is_400_invalid_request(client: httpx.AsyncClient, token: str) -> None:
    session = await open_session(client, token)
    response = await client.post("/mcp", json=rpc("initialize", initialize_params()), headers=session)
    assert_wire_error(response, 400, -32600, token)
    assert "mcp-session-id" not in response.headers


async def test_unknown_session_id_is_404_session_not_found(client: httpx.AsyncClient, token: str) -> None:
    """2025-11-25 transports, Session Management 3: an unknown or ended session is 404."""
    session = await open_session(client, token)
    headers = {**session, "mcp-session-id": "x" * 43}
    response = await client.post("/mcp", json=rpc("tools/list"), headers=headers)
    assert_wire_error(response, 404, -32001, token)


async def test_deleted_session_is_404_session_not_found(client: httpx.AsyncClient, token: str) -> None:
    session = await open_session(client, token)
    deleted = await client.delete("/mcp", headers=session)
    assert deleted.status_code == 204
    assert deleted.content == b""
    assert_wire_error(await client.post("/mcp", json=rpc("ping"), headers=session), 404, -32001, token)
    assert_wire_error(await client.delete("/mcp", headers=session), 404, -32001, token)
    stream = {**session, "accept": "text/event-stream"}
    assert_wire_error(await client.get("/mcp", headers=stream), 404, -32001, token)


async def test_session_of_another_subject_is_answered_like_an_unknown_one(
    client: httpx.AsyncClient, token: str, settings: Settings
) -> None:
    """A session id is no proof of identity (corporate §6): another subject gets 404, no oracle."""
    session = await open_session(client, token)
    intruder = mint(settings, subject="intruder")
    stolen = {**session, "authorization": f"Bearer {intruder}"}
    theirs = assert_wire_error(await client.post("/mcp", json=rpc("ping"), headers=stolen), 404, -32001, intruder)
    unknown = {**stolen, "mcp-session-id": "y" * 43}
    missing = assert_wire_error(await client.post("/mcp", json=rpc("ping"), headers=unknown), 404, -32001, intruder)
    assert {**theirs, "data": {}} == {**missing, "data": {}}
    assert_wire_error(await client.delete("/mcp", headers=stolen), 404, -32001, intruder)
    still_there = await client.post("/mcp", json=rpc("ping"), headers=session)
    assert still_there.status_code == 200


async def test_session_limit_is_503_with_retry_after_and_open_sessions_keep_working(tmp_path: Path) -> None:
    settings = dev_settings(tmp_path, sessions={"max_open": 2})
    token = mint(settings)
    async with asgi_client(settings) as client:
        first = await open_session(client, token)
        await open_session(client, token)
        response = await client.post("/mcp", json=rpc("initialize", initialize_params()), headers=bearer(token))
        error = assert_wire_error(response, 503, -32006, token)
        assert int(response.headers["retry-after"]) > 0
        assert error["data"]["retryAfter"] == int(response.headers["retry-after"])
        assert "mcp-session-id" not in response.headers
        served = await client.post("/mcp", json=rpc("tools/list"), headers=first)
        assert served.status_code == 200
        assert served.json()["result"]["tools"]
        assert (await client.delete("/mcp", headers=first)).status_code == 204
        await open_session(client, token)


# --- protocol version -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1999-01-01", "2026-07-28", "garbage"])
async def test_unsupported_protocol_version_header_is_400_invalid_request(
    tmp_path: Path, token: str, version: str
) -> None:
    """2025-11-25 transports, Protocol Version Header: 400. With the modern era off the code is
    -32600, not the modern -32022, so a 2026-07-28 client falls back to initialize (MCP
    2026-07-28, Versioning, Backward Compatibility). (On, these go to the modern edge.)"""
    async with asgi_client(dev_settings(tmp_path, mcp={"modern_era": False})) as client:
        session = await open_session(client, token)
        headers = {**session, "mcp-protocol-version": version}
        response = await client.post("/mcp", json=rpc("tools/list"), headers=headers)
    error = assert_wire_error(response, 400, -32600, token)
    assert error["code"] != -32022
    assert set(error["data"]["supported"]) == LEGACY_VERSIONS


# --- HTTP framing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", "text/html"])
async def test_post_without_json_and_sse_in_accept_is_406(client: httpx.AsyncClient, token: str, accept: str) -> None:
    """2025-11-25 transports, Sending Messages 2; corporate §6."""
    headers = {**bearer(token), "accept": accept}
    response = await client.post("/mcp", json=rpc("ping"), headers=headers)
    assert_wire_error(response, 406, -32600, token)


@pytest.mark.parametrize("accept", ["application/json", "text/html"])
async def test_get_without_sse_in_accept_is_406(client: httpx.AsyncClient, token: str, accept: str) -> None:
    session = await open_session(client, token)
    response = await client.get("/mcp", headers={**session, "accept": accept})
    assert_wire_error(response, 406, -32600, token)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_non_json_content_type_is_415(client: httpx.AsyncClient, token: str, content_type: str | None) -> None:
    headers = {k: v for k, v in bearer(token).items() if k != "content-type"}
    if content_type is not None:
        headers["content-type"] = content_type
    response = await client.post("/mcp", content=orjson.dumps(rpc("ping")), headers=headers)
    assert_wire_error(response, 415, -32600, token)


async def test_json_content_type_with_charset_is_accepted(client: httpx.AsyncClient, token: str) -> None:
    headers = {**bearer(token), "content-type": "application/json; charset=utf-8"}
    response = await client.post("/mcp", json=rpc("ping"), headers=headers)
    assert response.status_code == 200


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
async def test_unsupported_http_method_is_405_with_allow(client: httpx.AsyncClient, token: str, method: str) -> None:
    response = await client.request(method, "/mcp", headers=bearer(token))
    assert response.status_code == 405
    allowed = {m.strip() for m in response.headers["allow"].split(",")}
    assert {"GET", "POST", "DELETE"} <= allowed


# --- messages that are not requests ---------------------------------------------------------------


async def test_notification_is_accepted_with_202_and_no_body(client: httpx.AsyncClient, token: str) -> None:
    """2025-11-25 transports, Sending Messages 4: 202 Accepted with no body."""
    session = await open_session(client, token)
    for method in ("notifications/initialized", "notifications/unknown_thing"):
        response = await client.post("/mcp", json=rpc(method, {}, message_id=None), headers=session)
        assert response.status_code == 202
        assert response.content == b""


async def test_response_message_is_accepted_with_202_and_no_body(client: httpx.AsyncClient, token: str) -> None:
    session = await open_session(client, token)
    for message in ({"jsonrpc": "2.0", "id": "srv-99", "result": {}}, {"jsonrpc": "2.0", "id": 5, "error": {}}):
        response = await client.post("/mcp", json=message, headers=session)
        assert response.status_code == 202
        assert response.content == b""


# --- errors inside a session ----------------------------------------------------------------------


async def test_unknown_method_in_a_session_is_200_method_not_found(client: httpx.AsyncClient, token: str) -> None:
    """docs/errors.md: an error answering a well-formed in-session request travels with 200."""
    session = await open_session(client, token)
    response = await client.post("/mcp", json=rpc("tools/frobnicate", {}, message_id=9), headers=session)
    assert_wire_error(response, 200, -32601, token)
    assert response.json()["id"] == 9
    assert "frobnicate" not in response.text


async def test_unknown_method_without_a_session_is_400_missing_session(client: httpx.AsyncClient, token: str) -> None:
    response = await client.post("/mcp", json=rpc("tools/frobnicate", {}), headers=bearer(token))
    assert_wire_error(response, 400, -32600, token)


async def test_tools_call_of_an_unknown_tool_is_invalid_params(client: httpx.AsyncClient, token: str) -> None:
    """Corporate §9.4: an unknown tool is -32602."""
    session = await open_session(client, token)
    params = {"name": "no_such_tool", "arguments": {}}
    response = await client.post("/mcp", json=rpc("tools/call", params, message_id=3), headers=session)
    assert_wire_error(response, 200, -32602, token)
    assert response.json()["id"] == 3


@pytest.mark.parametrize("arguments", [[], "text", 3, True])
async def test_tools_call_with_non_object_arguments_is_invalid_params(
    client: httpx.AsyncClient, token: str, arguments: Any
) -> None:
    session = await open_session(client, token)
    params = {"name": "test_simple_text", "arguments": arguments}
    response = await client.post("/mcp", json=rpc("tools/call", params), headers=session)
    assert_wire_error(response, 200, -32602, token)


async def test_tools_call_without_a_name_is_invalid_params(client: httpx.AsyncClient, token: str) -> None:
    session = await open_session(client, token)
    response = await client.post("/mcp", json=rpc("tools/call", {"arguments": {}}), headers=session)
    assert_wire_error(response, 200, -32602, token)


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("test_sampling", {}),
        ("test_sampling", {"prompt": {"leak": "sentinel-4711"}}),
        ("test_elicitation", {"message": ["sentinel-4711"]}),
        ("json_schema_2020_12_tool", {"name": "n", "email": "e", "unexpected": "sentinel-4711"}),
    ],
    ids=["missing", "wrong-type", "wrong-type-array", "additional-property"],
)
async def test_arguments_failing_the_input_schema_are_an_is_error_result(
    client: httpx.AsyncClient, token: str, name: str, arguments: dict[str, Any]
) -> None:
    """Corporate §9.4 and MCP 2025-11-25 tools, Error Handling: the model can fix its arguments."""
    session = await open_session(client, token)
    response = await client.post(
        "/mcp", json=rpc("tools/call", {"name": name, "arguments": arguments}), headers=session
    )
    assert response.status_code == 200
    body = response.json()
    assert "error" not in body
    assert body["result"]["isError"] is True
    assert body["result"]["content"][0]["type"] == "text"
    assert body["result"]["content"][0]["text"]
    # The offending value is never echoed (corporate B.4: raw user input).
    assert "sentinel-4711" not in response.text
    assert_no_leak(response.text, token)


async def test_prompts_get_of_an_unknown_prompt_is_invalid_params(client: httpx.AsyncClient, token: str) -> None:
    session = await open_session(client, token)
    response = await client.post("/mcp", json=rpc("prompts/get", {"name": "no_such_prompt"}), headers=session)
    assert_wire_error(response, 200, -32602, token)


@pytest.mark.parametrize(
    "arguments", [{}, {"arg1": "a"}, {"arg1": "a", "arg2": 2}], ids=["none", "one-missing", "not-a-string"]
)
async def test_prompts_get_without_a_required_argument_is_invalid_params(
    client: httpx.AsyncClient, token: str, arguments: dict[str, Any]
) -> None:
    """MCP 2025-11-25 server/prompts, Error Handling: missing required arguments are -32602."""
    session = await open_session(client, token)
    params = {"name": "test_prompt_with_arguments", "arguments": arguments}
    response = await client.post("/mcp", json=rpc("prompts/get", params), headers=session)
    assert_wire_error(response, 200, -32602, token)


@pytest.mark.parametrize("cursor", ["!!!", "not-a-cursor", "bzp4", 5, "", {"offset": 2}])
async def test_malformed_cursor_is_invalid_params(client: httpx.AsyncClient, token: str, cursor: Any) -> None:
    """MCP 2025-11-25 server/utilities/pagination: an invalid cursor is -32602."""
    session = await open_session(client, token)
    response = await client.post("/mcp", json=rpc("tools/list", {"cursor": cursor}), headers=session)
    assert_wire_error(response, 200, -32602, token)


async def test_resources_read_of_an_unknown_uri_is_resource_not_found(client: httpx.AsyncClient, token: str) -> None:
    """MCP 2025-11-25 server/resources, Error Handling: -32002 (legacy era, docs/errors.md)."""
    session = await open_session(client, token)
    response = await client.post("/mcp", json=rpc("resources/read", {"uri": "test://nowhere"}), headers=session)
    assert_wire_error(response, 200, -32002, token)


# --- authentication -------------------------------------------------------------------------------


async def test_request_without_token_is_401_with_a_bearer_challenge(client: httpx.AsyncClient) -> None:
    """Corporate §7.4 and RFC 9728 §5.1: the challenge names the realm and the resource metadata."""
    response = await client.post("/mcp", json=rpc("initialize", initialize_params()), headers=MCP_HEADERS)
    assert_wire_error(response, 401, -32000)
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer realm=")
    assert 'resource_metadata="http' in challenge
    assert "/.well-known/oauth-protected-resource" in challenge
    # RFC 6750 §3.1: a request without credentials gets no error code.
    assert "error=" not in challenge


def expired_token(settings: Settings) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    past = int(time.time()) - 3600
    claims = {"iss": issuer.issuer, "aud": issuer.audience, "sub": "tester", "iat": past, "exp": past + 600}
    return jwt.encode(claims, issuer.private_key, algorithm="ES256", headers={"kid": issuer.kid})


def foreign_key_token(settings: Settings) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
    now = int(time.time())
    claims = {"iss": issuer.issuer, "aud": issuer.audience, "sub": "tester", "iat": now, "exp": now + 600}
    forged = ec.generate_private_key(ec.SECP256R1())
    return jwt.encode(claims, forged, algorithm="ES256", headers={"kid": issuer.kid})


def unsigned_token(settings: Settings) -> str:
    now = int(time.time())
    claims = {"iss": settings.issuer, "aud": settings.audience, "sub": "tester", "iat": now, "exp": now + 600}
    return jwt.encode(claims, None, algorithm="none")


def other_audience_token(settings: Settings) -> str:
    issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience="https://other.example/mcp")
    return issuer.mint(subject="tester", scopes=["mcp"], ttl=600)


@pytest.mark.parametrize(
    "authorization",
    [
        lambda s: "Bearer not-a-jwt",
        lambda s: "Bearer a.b.c",
        lambda s: "Bearer ",
        lambda s: f"Bearer {expired_token(s)}",
        lambda s: f"Bearer {foreign_key_token(s)}",
        lambda s: f"Bearer {unsigned_token(s)}",
        lambda s: f"Bearer {other_audience_token(s)}",
    ],
    ids=["garbage", "three-dots", "empty", "expired", "forged", "alg-none", "audience"],
)
async def test_bad_token_is_401_invalid_token(
    client: httpx.AsyncClient, settings: Settings, authorization: Any
) -> None:
    """Corporate §7.4: an invalid or expired token is 401 with `error="invalid_token"`."""
    value = authorization(settings)
    headers = {**MCP_HEADERS, "authorization": value}
    response = await client.post("/mcp", json=rpc("ping"), headers=headers)
    secret = value.partition(" ")[2]
    assert_wire_error(response, 401, -32000, *([secret] if secret else []))
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer realm=")
    assert 'error="invalid_token"' in challenge


@pytest.mark.parametrize("scheme", ["Basic", "Token"])
async def test_another_scheme_is_401_with_a_challenge_and_no_error_code(
    client: httpx.AsyncClient, settings: Settings, scheme: str
) -> None:
    """RFC 6750 §3.1: a request without bearer credentials gets the challenge without an error code."""
    value = f"{scheme} {mint(settings)}"
    response = await client.post("/mcp", json=rpc("ping"), headers={**MCP_HEADERS, "authorization": value})
    assert_wire_error(response, 401, -32000, value.partition(" ")[2])
    assert response.headers["www-authenticate"].startswith("Bearer realm=")
    assert "error=" not in response.headers["www-authenticate"]


async def test_token_in_the_query_string_is_not_accepted(client: httpx.AsyncClient, token: str) -> None:
    """Corporate §7.1: secrets in the query string are forbidden."""
    response = await client.post("/mcp", params={"access_token": token}, json=rpc("ping"), headers=MCP_HEADERS)
    assert_wire_error(response, 401, -32000, token)


# --- initialize -----------------------------------------------------------------------------------


async def test_initialize_issues_a_visible_ascii_session_id_of_at_least_128_bits(
    client: httpx.AsyncClient, token: str
) -> None:
    """2025-11-25 transports, Session Management 1: visible ASCII (0x21-0x7E), cryptographically secure."""
    ids = set()
    for _ in range(3):
        response = await client.post("/mcp", json=rpc("initialize", initialize_params()), headers=bearer(token))
        assert response.status_code == 200
        session_id = response.headers["mcp-session-id"]
        assert all(0x21 <= ord(c) <= 0x7E for c in session_id)
        assert len(session_id) >= 22  # 128 bits in base64url
        ids.add(session_id)
    assert len(ids) == 3


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
async def test_initialize_negotiates_the_requested_supported_version(
    client: httpx.AsyncClient, token: str, version: str
) -> None:
    """MCP 2025-11-25 lifecycle, Version Negotiation: a supported requested version is answered as is."""
    response = await client.post("/mcp", json=rpc("initialize", initialize_params(version)), headers=bearer(token))
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["protocolVersion"] == version
    assert {"capabilities", "serverInfo"} <= result.keys()


@pytest.mark.parametrize("version", ["1999-01-01", "2026-07-28", "2099-12-31"])
async def test_initialize_answers_the_latest_version_for_an_unsupported_one(
    client: httpx.AsyncClient, token: str, version: str
) -> None:
    response = await client.post("/mcp", json=rpc("initialize", initialize_params(version)), headers=bearer(token))
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == "2025-11-25"


async def test_initialize_without_protocol_version_is_invalid_params(client: httpx.AsyncClient, token: str) -> None:
    params = {k: v for k, v in initialize_params().items() if k != "protocolVersion"}
    response = await client.post("/mcp", json=rpc("initialize", params), headers=bearer(token))
    assert_wire_error(response, 200, -32602, token)
    assert "mcp-session-id" not in response.headers


# --- pagination -----------------------------------------------------------------------------------


async def list_all_tools(client: httpx.AsyncClient, session: dict[str, str]) -> list[str]:
    names: list[str] = []
    params: dict[str, Any] = {}
    for _ in range(100):
        response = await client.post("/mcp", json=rpc("tools/list", params), headers=session)
        assert response.status_code == 200
        result = response.json()["result"]
        assert len(result["tools"]) <= 2
        names += [tool["name"] for tool in result["tools"]]
        if "nextCursor" not in result:
            return names
        assert result["tools"]
        params = {"cursor": result["nextCursor"]}
    raise AssertionError("tools/list never ended")


async def test_tools_list_pages_through_every_tool_once_in_a_stable_order(tmp_path: Path) -> None:
    """MCP 2025-11-25 server/utilities/pagination: follow nextCursor until it is absent."""
    settings = dev_settings(tmp_path, streams={"page_size": 2}, server={"builtin_plugins": []})
    token = mint(settings)
    async with asgi_client(settings) as client:
        session = await open_session(client, token)
        first = await list_all_tools(client, session)
        second = await list_all_tools(client, session)
    assert len(first) > 2
    assert len(first) == len(set(first))
    assert first == second
    registry = Registry()
    conformance.register(registry)
    assert sorted(first) == sorted(tool.name for tool in registry.tools())


# --- probes and the service page --------------------------------------------------------------------


async def test_health_reports_status_version_and_uptime(client: httpx.AsyncClient) -> None:
    """Corporate §16.1: no auth, JSON with status, version, uptime."""
    response = await client.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert isinstance(body["version"], str)
    assert body["version"]
    assert isinstance(body["uptime"], int | float)
    assert body["uptime"] >= 0


async def test_ready_reports_status_and_checks(client: httpx.AsyncClient) -> None:
    """Corporate §16.2: JSON with status and checks."""
    response = await client.get("/ready")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert isinstance(body["checks"], dict)
    assert body["checks"]
    assert_no_leak(response.text)


async def test_root_is_an_html_page(client: httpx.AsyncClient) -> None:
    response = await client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "/mcp" in response.text


# --- the id of a rejected message -------------------------------------------------------------------


async def test_rejection_of_a_readable_request_carries_its_id(client: httpx.AsyncClient, token: str) -> None:
    """JSON-RPC 2.0 §5: the id MUST be the request's when it could be read."""
    response = await client.post("/mcp", json=rpc("tools/list", message_id=7), headers=bearer(token))
    assert response.status_code == 400
    assert response.json()["id"] == 7


async def test_rejection_without_a_readable_id_has_a_null_id(client: httpx.AsyncClient, token: str) -> None:
    """JSON-RPC 2.0 §5: null when the id could not be read; the official client needs the member."""
    response = await post_raw(client, token, b"{")
    assert response.status_code == 400
    assert response.json()["id"] is None


# --- X-Request-Id (corporate §15.1) -----------------------------------------------------------------


async def test_offered_request_id_is_echoed_and_used_in_errors(client: httpx.AsyncClient) -> None:
    headers = {**MCP_HEADERS, "x-request-id": "agent-7f3a:call/42"}
    response = await client.post("/mcp", json=rpc("ping"), headers=headers)
    error = assert_wire_error(response, 401, -32000)
    assert response.headers.get_list("x-request-id") == ["agent-7f3a:call/42"]
    assert error["data"]["requestId"] == "agent-7f3a:call/42"


@pytest.mark.parametrize(
    "offered",
    [b"two words", b"line\nbreak", b"cr\rlf", b"x" * 129, b"<script>", b"a;b", b"caf\xc3\xa9", b""],
    ids=["space", "newline", "carriage-return", "too-long", "markup", "semicolon", "non-ascii", "empty"],
)
async def test_unsafe_request_id_is_replaced(client: httpx.AsyncClient, offered: bytes) -> None:
    response = await client.get("/health", headers=[(b"x-request-id", offered)])
    replaced = response.headers["x-request-id"]
    assert replaced.encode() != offered
    assert all(0x21 <= ord(c) <= 0x7E for c in replaced)
    assert 0 < len(replaced) <= 128
    refused = await client.post("/mcp", json=rpc("ping"), headers=[(b"x-request-id", offered), (b"accept", b"*/*")])
    assert refused.json()["error"]["data"]["requestId"] == refused.headers["x-request-id"]
    assert refused.headers["x-request-id"].encode() != offered
