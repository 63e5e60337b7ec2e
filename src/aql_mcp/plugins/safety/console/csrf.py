"""Cross-site request forgery defences for the console's forms (docs/console.md, "Forms").

Two independent checks, both required on every POST:

- a CSRF token in the form, bound to the operator's credential: HMAC-SHA256 keyed with the digest
  of the credential (the bearer token a gateway injects, or the development login's token) over a
  fixed label. Every replica computes the same value from the same credential, with no shared key
  and no server state, and a page that does not know the credential cannot compute it. It is
  compared in constant time. A credential that changes (a gateway refreshing the token) makes the
  old forms stale; the live region re-rendered from the event stream carries fresh ones;
- the request's provenance: `Sec-Fetch-Site`, when the browser sends it, must be `same-origin`;
  a present `Origin` has already passed the service's allow-list (middleware/origin.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from starlette.requests import Request

from aql_mcp.plugins.safety.console.refusal import CsrfRefused

FIELD = "csrf"
LABEL = b"aql-mcp console csrf v1"
SAME_ORIGIN = frozenset({"same-origin"})


def csrf_token(credential: str) -> str:
    key = hashlib.sha256(credential.encode("utf-8")).digest()
    mac = hmac.new(key, LABEL, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode("ascii")


def is_same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another site (Fetch Metadata)."""
    site = request.headers.get("sec-fetch-site")
    return site is None or site in SAME_ORIGIN


def check_csrf(request: Request, offered: str | None, expected: str) -> None:
    """Raise `CsrfRefused` unless the request is same-origin and `offered` equals `expected`."""
    if not is_same_origin(request):
        raise CsrfRefused("cross_site")
    if not offered or not hmac.compare_digest(offered.encode("utf-8"), expected.encode("utf-8")):
        raise CsrfRefused("csrf_token")
