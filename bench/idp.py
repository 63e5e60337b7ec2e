"""A stand-in corporate IdP for the benchmark: an ES256 key, its JWKS served over HTTP, and tokens.

aql-mcp runs in production mode in the benchmark (as the security issue asks), so it needs a JWKS
URL. This serves one from a thread of the driver (on the load CPU); the service fetches it at
startup and on its refresh schedule, never per request, so it costs the measurement nothing.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

PORT = 18299
ISSUER = "https://idp.bench.invalid"
KID = "bench-es256"


class Idp:
    def __init__(self) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        public = json.loads(ECAlgorithm.to_jwk(self._key.public_key()))
        body = json.dumps({"keys": [{**public, "kid": KID, "use": "sig", "alg": "ES256"}]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
        threading.Thread(target=self._server.serve_forever, name="bench-idp", daemon=True).start()

    @property
    def jwks_url(self) -> str:
        return f"http://127.0.0.1:{PORT}/.well-known/jwks.json"

    def env(self, audience: str) -> dict[str, str]:
        """The settings that point aql-mcp at this IdP (production mode: no development issuer)."""
        return {
            "AQL_MCP_AUTH__JWKS_URL": self.jwks_url,
            "AQL_MCP_AUTH__ISSUER": ISSUER,
            "AQL_MCP_AUTH__AUDIENCE": audience,
            # This IdP serves plain http on loopback; production mode refuses that unless told.
            "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP": "true",
        }

    def token(self, audience: str, ttl: int = 3600) -> str:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": audience, "sub": "bench", "scope": "mcp", "iat": now, "exp": now + ttl}
        return jwt.encode(claims, self._key, algorithm="ES256", headers={"kid": KID})


_IDP: Idp | None = None


def idp() -> Idp:
    """The one IdP of this driver process, started on first use."""
    global _IDP
    if _IDP is None:
        _IDP = Idp()
    return _IDP
