"""The development login's cookies (docs/console.md, "Signing in")."""

from __future__ import annotations

from aql_mcp.plugins.safety.console.session import cleared_session_cookie, login_cookie, session_cookie


def test_the_session_cookie_is_httponly_samesite_strict_and_scoped_to_the_console() -> None:
    value = session_cookie("tok", max_age=600, secure=False)
    assert value.split("; ") == ["aql_console=tok", "Path=/console", "Max-Age=600", "HttpOnly", "SameSite=Strict"]


def test_the_cookies_are_secure_when_the_service_is_served_over_https() -> None:
    assert session_cookie("tok", max_age=600, secure=True).endswith("; Secure")
    assert login_cookie("n", secure=True).endswith("; Secure")


def test_signing_out_expires_the_cookie_at_once() -> None:
    value = cleared_session_cookie(secure=False)
    assert value.startswith("aql_console=;")
    assert "Max-Age=0" in value


def test_the_login_cookie_only_travels_to_the_login_form() -> None:
    assert "Path=/console/login" in login_cookie("n", secure=False)
