"""Opaque bearer tokens from an allow-list of digests (corporate Appendix A.3).

Opaque tokens checked by RFC 7662 introspection are tested in test_introspection.py.
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path

import pytest

from aql_mcp.auth.opaque import OpaqueTokens, read_allow_list
from aql_mcp.auth.principal import Principal
from aql_mcp.exceptions import ConfigError

pytestmark = pytest.mark.anyio


def sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def opaque_token() -> str:
    return "opq_" + secrets.token_urlsafe(32)


async def test_an_allow_listed_token_is_found_by_its_digest() -> None:
    token = opaque_token()
    tokens = OpaqueTokens({sha256(token): ("robot", ("mcp", "read"))})

    assert tokens.lookup(token) == Principal(subject="robot", scopes=frozenset({"mcp", "read"}))
    assert tokens.lookup(opaque_token()) is None
    assert len(tokens) == 1


async def test_the_allow_list_holds_digests_and_never_needs_the_token() -> None:
    """Appendix A.3: the configuration carries no secret; knowing the digest is not knowing the token."""
    token = opaque_token()
    entries = {sha256(token): ("robot", ("mcp",))}
    del token  # from here on only the digest is known

    tokens = OpaqueTokens(entries)
    (digest,) = entries

    assert tokens.lookup(digest) is None
    assert tokens.lookup(digest.upper()) is None


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


async def test_an_allow_list_file_maps_digests_to_subjects_and_scopes(tmp_path: Path) -> None:
    robot, batch = opaque_token(), opaque_token()
    path = write(
        tmp_path / "tokens.yaml",
        f"{sha256(robot)}:\n  sub: robot\n  scopes: [mcp, read]\n{sha256(batch).upper()}:\n  sub: batch\n",
    )

    entries = read_allow_list(path)

    assert entries == {sha256(robot): ("robot", ("mcp", "read")), sha256(batch): ("batch", ())}
    assert OpaqueTokens(entries).lookup(batch) == Principal(subject="batch")


async def test_an_allow_list_file_may_be_json(tmp_path: Path) -> None:
    token = opaque_token()
    path = write(tmp_path / "tokens.json", f'{{"{sha256(token)}": {{"sub": "robot", "scopes": ["mcp"]}}}}')

    assert read_allow_list(path) == {sha256(token): ("robot", ("mcp",))}


async def test_an_empty_allow_list_file_allows_no_token(tmp_path: Path) -> None:
    assert read_allow_list(write(tmp_path / "tokens.yaml", "")) == {}


DIGEST = "ab" * 32
REFUSED = {
    "unreadable": None,
    "not-yaml": "{: [",
    "short-key": "abc123:\n  sub: robot\n",
    "value-not-a-mapping": f"{DIGEST}: robot\n",
    "no-sub": f"{DIGEST}:\n  scopes: [mcp]\n",
    "sub-not-a-string": f"{DIGEST}:\n  sub: [robot]\n",
}


@pytest.mark.parametrize("case", REFUSED)
async def test_a_malformed_allow_list_file_is_refused_naming_the_setting(tmp_path: Path, case: str) -> None:
    text = REFUSED[case]
    path = tmp_path / "tokens.yaml" if text is None else write(tmp_path / "tokens.yaml", text)

    with pytest.raises(ConfigError, match="AQL_MCP_AUTH__OPAQUE_TOKENS_FILE"):
        read_allow_list(path)


async def test_an_allow_list_file_that_is_a_list_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "tokens.yaml", f"- {DIGEST}\n")

    with pytest.raises(ConfigError, match="AQL_MCP_AUTH__OPAQUE_TOKENS_FILE"):
        read_allow_list(path)


async def test_an_allow_list_key_that_is_not_hex_is_refused(tmp_path: Path) -> None:
    """A 64-character token pasted instead of its digest would put the secret in the file and never match."""
    path = write(tmp_path / "tokens.yaml", f"{'opq_' + 'x' * 60}:\n  sub: robot\n")

    with pytest.raises(ConfigError, match="AQL_MCP_AUTH__OPAQUE_TOKENS_FILE"):
        read_allow_list(path)


async def test_allow_list_scopes_given_as_a_string_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "tokens.yaml", f"{DIGEST}:\n  sub: robot\n  scopes: mcp\n")

    with pytest.raises(ConfigError, match="AQL_MCP_AUTH__OPAQUE_TOKENS_FILE"):
        read_allow_list(path)
