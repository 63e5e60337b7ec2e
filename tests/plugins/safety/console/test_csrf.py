"""The console's CSRF token and Fetch Metadata check (docs/console.md, "Forms")."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from aql_mcp.plugins.safety.console.csrf import check_csrf, csrf_token
from aql_mcp.plugins.safety.console.refusal import CsrfRefused


def request(headers: dict[str, str]) -> Request:
    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/console/verify", "headers": raw})


def test_the_token_is_the_same_for_one_credential_on_every_replica_and_differs_between_credentials() -> None:
    assert csrf_token("credential-a") == csrf_token("credential-a")
    assert csrf_token("credential-a") != csrf_token("credential-b")
    assert "credential-a" not in csrf_token("credential-a")
    assert len(csrf_token("x")) == 43  # 256 bits, base64url without padding


def test_the_matching_token_from_the_same_origin_passes() -> None:
    expected = csrf_token("c")
    check_csrf(request({"sec-fetch-site": "same-origin"}), expected, expected)
    check_csrf(request({}), expected, expected)  # a client that sends no Fetch Metadata


@pytest.mark.parametrize("offered", [None, "", "wrong", csrf_token("another credential")])
def test_a_missing_or_foreign_token_is_refused(offered: str | None) -> None:
    with pytest.raises(CsrfRefused) as refused:
        check_csrf(request({}), offered, csrf_token("c"))
    assert (refused.value.status, refused.value.data["reason"]) == (403, "csrf_token")


@pytest.mark.parametrize("site", ["cross-site", "same-site", "none"])
def test_a_post_the_browser_marks_as_not_same_origin_is_refused_even_with_the_right_token(site: str) -> None:
    expected = csrf_token("c")
    with pytest.raises(CsrfRefused) as refused:
        check_csrf(request({"sec-fetch-site": site}), expected, expected)
    assert refused.value.data["reason"] == "cross_site"
