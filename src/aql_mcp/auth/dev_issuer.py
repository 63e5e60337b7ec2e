"""The development token issuer: an ES256 key kept in the state directory.

Only in development mode: the service serves this key's JWKS, accepts only tokens it signed,
and `aql-mcp dev-token` mints them from the same key file. The key never leaves the state
directory (mode 0600); the JWKS carries only its public half.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from aql_mcp.exceptions import ConfigError

KEY_FILE = "dev-issuer-es256.pem"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class DevIssuer:
    """Mints and describes development tokens for one issuer and audience."""

    def __init__(self, *, state_dir: Path, issuer: str, audience: str) -> None:
        self.issuer = issuer
        self.audience = audience
        self.private_key = _load_or_create(state_dir / KEY_FILE)
        self.public_key = self.private_key.public_key()
        self.jwk = _public_jwk(self.public_key)
        self.kid = self.jwk["kid"]

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.jwk]}

    def mint(self, *, subject: str, scopes: list[str], ttl: int, audience: str | None = None) -> str:
        """A token for `audience` (the service's by default; the console's login uses its own)."""
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "aud": audience or self.audience,
            "sub": subject,
            "iat": now,
            "nbf": now,
            "exp": now + ttl,
            "jti": secrets.token_hex(8),
            "scope": " ".join(scopes),
        }
        return jwt.encode(claims, self.private_key, algorithm="ES256", headers={"kid": self.kid})


def _load_or_create(path: Path) -> ec.EllipticCurvePrivateKey:
    if path.exists():
        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (ValueError, TypeError):
            key = None
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ConfigError(
                f"store.path (AQL_MCP_STORE__PATH): {path.name} does not hold an EC private key; "
                "delete it to have a new development key made"
            )
        return key
    path.parent.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    # Written with 0600 from the start (no window where another user could read it), then renamed.
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    tmp.replace(path)
    return key


def _public_jwk(public_key: ec.EllipticCurvePublicKey) -> dict[str, str]:
    numbers = public_key.public_numbers()
    jwk = {
        "crv": "P-256",
        "kty": "EC",
        "x": _b64(numbers.x.to_bytes(32, "big")),
        "y": _b64(numbers.y.to_bytes(32, "big")),
    }
    # RFC 7638 thumbprint: the required members, sorted, no whitespace.
    thumbprint = hashlib.sha256(json.dumps(jwk, sort_keys=True, separators=(",", ":")).encode()).digest()
    return {**jwk, "kid": _b64(thumbprint), "use": "sig", "alg": "ES256"}
