import base64
import hashlib
import json
import stat
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from aql_mcp.auth.dev_issuer import KEY_FILE, DevIssuer
from aql_mcp.exceptions import ConfigError

ISSUER = "http://127.0.0.1:8000"
AUDIENCE = "http://127.0.0.1:8000/mcp"


def make_issuer(state: Path) -> DevIssuer:
    return DevIssuer(state_dir=state, issuer=ISSUER, audience=AUDIENCE)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def test_key_file_is_created_readable_by_the_owner_only(tmp_path: Path) -> None:
    make_issuer(tmp_path / "state" / "nested")
    key_file = tmp_path / "state" / "nested" / KEY_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_key_file_is_reused_across_instances(tmp_path: Path) -> None:
    first = make_issuer(tmp_path)
    content = (tmp_path / KEY_FILE).read_bytes()
    second = make_issuer(tmp_path)
    assert second.kid == first.kid
    assert (tmp_path / KEY_FILE).read_bytes() == content


def test_separate_state_directories_get_separate_keys(tmp_path: Path) -> None:
    assert make_issuer(tmp_path / "a").kid != make_issuer(tmp_path / "b").kid


def test_jwks_holds_only_public_members(tmp_path: Path) -> None:
    jwks = make_issuer(tmp_path).jwks()
    assert len(jwks["keys"]) == 1
    key = jwks["keys"][0]
    assert set(key) == {"kty", "crv", "x", "y", "kid", "use", "alg"}
    assert "d" not in key
    assert (key["kty"], key["crv"], key["alg"], key["use"]) == ("EC", "P-256", "ES256", "sig")


def test_kid_is_the_rfc7638_thumbprint_of_the_public_key(tmp_path: Path) -> None:
    issuer = make_issuer(tmp_path)
    numbers = issuer.public_key.public_numbers()
    x = b64url(numbers.x.to_bytes(32, "big"))
    y = b64url(numbers.y.to_bytes(32, "big"))
    # RFC 7638 §3.2: required members only, lexicographic order, no whitespace.
    canonical = '{"crv":"P-256","kty":"EC","x":"' + x + '","y":"' + y + '"}'
    assert issuer.kid == b64url(hashlib.sha256(canonical.encode("utf-8")).digest())
    assert issuer.jwks()["keys"][0]["x"] == x
    assert issuer.jwks()["keys"][0]["y"] == y


def test_public_key_is_p256(tmp_path: Path) -> None:
    assert isinstance(make_issuer(tmp_path).public_key.curve, ec.SECP256R1)


def test_minted_token_verifies_against_the_published_jwks(tmp_path: Path) -> None:
    issuer = make_issuer(tmp_path)
    token = issuer.mint(subject="alice", scopes=["mcp", "records"], ttl=600)
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "ES256"
    assert header["kid"] == issuer.kid
    key = jwt.PyJWK(issuer.jwks()["keys"][0])
    claims = jwt.decode(token, key, algorithms=["ES256"], audience=AUDIENCE, issuer=ISSUER)
    assert claims["sub"] == "alice"
    assert claims["scope"] == "mcp records"
    assert claims["exp"] - claims["iat"] == 600
    assert claims["nbf"] <= claims["iat"]


def test_each_minted_token_has_its_own_jti(tmp_path: Path) -> None:
    issuer = make_issuer(tmp_path)
    ids = {jwt.decode(issuer.mint(subject="a", scopes=[], ttl=60), options={"verify_signature": False})["jti"]}
    ids.add(jwt.decode(issuer.mint(subject="a", scopes=[], ttl=60), options={"verify_signature": False})["jti"])
    assert len(ids) == 2


def test_key_file_that_is_not_an_ec_key_is_refused(tmp_path: Path) -> None:
    (tmp_path / KEY_FILE).write_text("not a key", encoding="utf-8")
    with pytest.raises(ConfigError, match="AQL_MCP_STORE__PATH"):
        make_issuer(tmp_path)


def test_jwks_is_json_serialisable(tmp_path: Path) -> None:
    jwks = make_issuer(tmp_path).jwks()
    assert json.loads(json.dumps(jwks)) == jwks
