"""Several trusted issuers (`auth.issuers`, docs/identity.md): two IdP doubles over real HTTP at once, the
verifier built from settings as the service builds it, and the settings' start-up refusals."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from aql_mcp.auth.principal import subject_digest
from aql_mcp.auth.verifier import Authentication, build_authentication
from aql_mcp.configuration import load_settings
from aql_mcp.exceptions import ConfigError, InvalidToken
from tests.support.idp import INTROSPECTION_CLIENT_ID, IdentityProvider, running_idp

pytestmark = pytest.mark.anyio

AUDIENCE = "https://aql-mcp.test/mcp"
ENTRA_AUDIENCE = "api://aql-mcp"
PRODUCTION = {
    "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP": "true",  # the doubles serve plain http on loopback
    "AQL_MCP_SERVER__PUBLIC_URL": "https://aql-mcp.test",
}


@pytest.fixture(scope="module")
def entra() -> Iterator[IdentityProvider]:
    """An Entra-like IdP: `oid` subject, `tid` tenant, `scp` or `roles` scopes, its own audience."""
    with running_idp(audience=ENTRA_AUDIENCE) as idp:
        idp.rotate("PS256")
        yield idp


@pytest.fixture(scope="module")
def keycloak() -> Iterator[IdentityProvider]:
    """A Keycloak-like IdP: realm roles as scopes, the tenant in a custom claim, EdDSA keys beside RS256."""
    with running_idp(audience=AUDIENCE) as idp:
        idp.rotate("EdDSA")
        yield idp


def entries(entra: IdentityProvider, keycloak: IdentityProvider) -> list[dict[str, Any]]:
    return [
        {
            "issuer": entra.issuer,
            "jwks_url": entra.jwks_url,
            "audiences": [ENTRA_AUDIENCE, AUDIENCE],
            "algorithms": ["RS256", "PS256"],
            "claims": {"subject": "oid", "tenant": "tid", "scopes": ["scp", "roles"]},
        },
        {
            "issuer": keycloak.issuer,
            "jwks_url": keycloak.jwks_url,
            "audiences": [AUDIENCE],
            "algorithms": ["RS256", "EdDSA"],
            "claims": {"tenant": "org", "scopes": ["realm_access.roles"]},
        },
    ]


@pytest.fixture
async def authentication(entra: IdentityProvider, keycloak: IdentityProvider) -> AsyncIterator[Authentication]:
    env = {**PRODUCTION, "AQL_MCP_AUTH__ISSUERS": json.dumps(entries(entra, keycloak))}
    built = build_authentication(load_settings(None, env), None)
    try:
        yield built
    finally:
        await built.client.aclose()


def entra_token(idp: IdentityProvider, alg: str = "RS256", **claims: Any) -> str:
    base = {"sub": "pairwise", "oid": "oid-alice", "tid": "tenant-a", "scp": "mcp records.write", "scope": None}
    return idp.mint(alg=alg, claims={**base, **claims})


def keycloak_token(idp: IdentityProvider, alg: str = "RS256", **claims: Any) -> str:
    base = {"sub": "kc-bob", "org": "acme", "realm_access": {"roles": ["mcp", "records.read"]}, "scope": "profile"}
    return idp.mint(alg=alg, claims={**base, **claims})


async def test_a_token_from_each_issuer_is_accepted_with_its_own_mapping(
    authentication: Authentication, entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    from_entra = await authentication.verifier.verify(entra_token(entra))
    from_keycloak = await authentication.verifier.verify(keycloak_token(keycloak))

    assert (from_entra.subject, from_entra.tenant, from_entra.scopes) == (
        "oid-alice",
        "tenant-a",
        {"mcp", "records.write"},
    )
    assert from_entra.issuer == entra.issuer
    assert (from_keycloak.subject, from_keycloak.tenant) == ("kc-bob", "acme")
    assert from_keycloak.scopes == {"mcp", "records.read"}
    assert from_keycloak.digest == subject_digest(f"{keycloak.issuer}#kc-bob")
    assert len(authentication.key_sources) == 2


async def test_an_entra_app_token_takes_its_roles_and_any_listed_audience(
    authentication: Authentication, entra: IdentityProvider
) -> None:
    token = entra_token(entra, scp=None, roles=["Records.Admin"], aud=AUDIENCE)
    assert (await authentication.verifier.verify(token)).scopes == {"Records.Admin"}


@pytest.mark.parametrize(("alg", "idp"), [("PS256", "entra"), ("EdDSA", "keycloak")])
async def test_ps256_and_eddsa_tokens_verify_through_their_issuers_entry(
    authentication: Authentication, alg: str, idp: str, request: pytest.FixtureRequest
) -> None:
    provider: IdentityProvider = request.getfixturevalue(idp)
    token = entra_token(provider, alg) if idp == "entra" else keycloak_token(provider, alg)
    assert (await authentication.verifier.verify(token)).scopes >= {"mcp"}


async def test_an_algorithm_the_entry_does_not_list_is_refused(
    authentication: Authentication, keycloak: IdentityProvider
) -> None:
    """Keycloak's entry lists RS256 and EdDSA only: its ES256 key is never trusted."""
    with pytest.raises(InvalidToken):
        await authentication.verifier.verify(keycloak_token(keycloak, "ES256"))


async def test_a_token_signed_by_one_issuers_key_but_claiming_the_other_is_refused(
    authentication: Authentication, entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    # Entra's key and kid, Keycloak's iss and a Keycloak-shaped body: Keycloak's key set has no such kid.
    forged = entra.mint(claims={"iss": keycloak.issuer, "aud": AUDIENCE, "realm_access": {"roles": ["mcp"]}})
    with pytest.raises(InvalidToken):
        await authentication.verifier.verify(forged)
    # The other way round, with Keycloak's EdDSA key, which Entra's entry does not even allow.
    forged = keycloak.mint(alg="EdDSA", claims={"iss": entra.issuer, "aud": ENTRA_AUDIENCE, "oid": "oid-alice"})
    with pytest.raises(InvalidToken):
        await authentication.verifier.verify(forged)


async def test_a_kid_of_the_other_issuer_never_reaches_its_key_set(
    authentication: Authentication, entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    """The kid names a key Keycloak publishes, the token claims Entra: only Entra's keys are asked."""
    kid = keycloak.key("RS256").kid
    forged = keycloak.mint(kid=kid, claims={"iss": entra.issuer, "aud": ENTRA_AUDIENCE, "oid": "x"})
    with pytest.raises(InvalidToken):
        await authentication.verifier.verify(forged)


async def test_the_wrong_audience_for_the_issuer_is_refused(
    authentication: Authentication, keycloak: IdentityProvider
) -> None:
    with pytest.raises(InvalidToken):
        await authentication.verifier.verify(keycloak_token(keycloak, aud=ENTRA_AUDIENCE))


async def test_a_token_from_an_unlisted_issuer_is_refused(
    authentication: Authentication, entra: IdentityProvider
) -> None:
    with pytest.raises(InvalidToken):
        await authentication.verifier.verify(entra_token(entra, iss="https://unlisted.test"))
    with pytest.raises(InvalidToken):
        await authentication.verifier.verify(entra_token(entra, iss=None))


async def test_a_token_without_its_issuers_subject_claim_is_refused(
    authentication: Authentication, entra: IdentityProvider
) -> None:
    with pytest.raises(InvalidToken):
        await authentication.verifier.verify(entra_token(entra, oid=None))


async def test_a_delegated_token_carries_its_actor_chain(
    authentication: Authentication, entra: IdentityProvider
) -> None:
    token = entra_token(entra, act={"sub": "agent-7", "act": {"sub": "orchestrator"}})
    assert (await authentication.verifier.verify(token)).actors == ("agent-7", "orchestrator")


async def test_an_issuer_checked_by_introspection_gets_its_jwts_and_the_opaque_tokens(
    entra: IdentityProvider, keycloak: IdentityProvider
) -> None:
    """Keycloak configured through introspection: its JWTs go there by `iss`, and, as the only
    introspection endpoint, so do opaque tokens; its mapping reads the answer."""
    listed = entries(entra, keycloak)
    listed[1] = {
        "issuer": keycloak.issuer,
        "introspection_url": keycloak.introspection_url,
        "introspection_client_id": INTROSPECTION_CLIENT_ID,
        "introspection_client_secret": keycloak.introspection_secret,
        "audiences": [AUDIENCE],
        "claims": {"tenant": "org", "scopes": ["scope"]},
    }
    env = {**PRODUCTION, "AQL_MCP_AUTH__ISSUERS": json.dumps(listed)}
    authentication = build_authentication(load_settings(None, env), None)
    jwt_shaped = keycloak_token(keycloak)
    keycloak.answer_introspection(jwt_shaped, {"active": True, "sub": "kc-bob", "org": "acme", "scope": "mcp"})
    opaque = keycloak.issue_opaque(sub="robot", scope="mcp")
    try:
        principal = await authentication.verifier.verify(jwt_shaped)
        assert (principal.subject, principal.tenant, principal.scopes) == ("kc-bob", "acme", {"mcp"})
        assert (await authentication.verifier.verify(opaque)).subject == "robot"
        assert keycloak.introspections[jwt_shaped] == 1
        # An Entra JWT still verifies by Entra's keys, and never reaches Keycloak's introspection.
        await authentication.verifier.verify(entra_token(entra))
        assert keycloak.introspection_calls() == 2
    finally:
        await authentication.client.aclose()
        keycloak.reset_introspection()


# --- Start-up refusals -------------------------------------------------------------------------

ENTRY = {"issuer": "https://idp.test", "jwks_url": "https://idp.test/keys", "audiences": ["api://x"]}


def refusal(*listed: dict[str, Any], **env: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, {"AQL_MCP_AUTH__ISSUERS": json.dumps(list(listed)), **env})
    return str(caught.value)


def test_a_listed_issuer_is_a_token_source_for_production_mode() -> None:
    settings = load_settings(None, {"AQL_MCP_AUTH__ISSUERS": json.dumps([ENTRY])})
    assert settings.auth.issuers[0].claims.subject == "sub"
    assert settings.auth.issuers[0].algorithms == ("RS256", "ES256")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"jwks_url": None}, "exactly one of jwks_url and introspection_url"),
        ({"introspection_url": "https://idp.test/introspect"}, "exactly one of jwks_url and introspection_url"),
        (
            {"jwks_url": None, "introspection_url": "https://idp.test/introspect"},
            "introspection_client_id and introspection_client_secret are required",
        ),
        ({"audiences": []}, "audiences"),
        ({"algorithms": ["HS256"]}, "algorithms"),
        ({"issuer": "https://idp.test/#x"}, "no query or fragment"),
        ({"jwks_url": "ftp://idp.test/keys"}, "http(s) URL"),
        ({"claims": {"scopes": []}}, "scopes"),
    ],
    ids=["neither", "both", "no-client", "no-audience", "hs256", "fragment", "scheme", "no-scopes"],
)
def test_a_malformed_entry_is_refused_at_start_up_naming_the_setting(change: dict[str, Any], words: str) -> None:
    message = refusal({k: v for k, v in {**ENTRY, **change}.items() if v is not None})
    assert "AQL_MCP_AUTH__ISSUERS" in message
    assert words in message


def test_an_issuer_listed_twice_is_refused() -> None:
    assert "listed twice" in refusal(ENTRY, {**ENTRY, "audiences": ["api://y"]})


def test_an_entry_repeating_the_single_issuer_is_refused() -> None:
    message = refusal(ENTRY, AQL_MCP_AUTH__ISSUER="https://idp.test", AQL_MCP_AUTH__JWKS_URL="https://idp.test/k")
    assert "auth.issuers[0].issuer" in message
    assert "already the issuer of the single-issuer settings" in message


@pytest.mark.parametrize("url", ["jwks_url", "introspection_url"])
def test_a_plain_http_entry_url_is_refused_outside_development_mode(url: str) -> None:
    entry = {"issuer": "https://idp.test", "audiences": ["a"], url: "http://idp.test/x"}
    if url == "introspection_url":
        entry |= {"introspection_client_id": "c", "introspection_client_secret": "s"}
    message = refusal(entry)
    assert f"auth.issuers[0].{url} (AQL_MCP_AUTH__ISSUERS): plain http is refused" in message
    load_settings(None, {"AQL_MCP_AUTH__ISSUERS": json.dumps([entry]), "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP": "true"})
    load_settings(None, {"AQL_MCP_AUTH__ISSUERS": json.dumps([entry])}, {"server": {"dev": True}})


def test_a_scope_both_required_and_refused_for_delegation_is_refused() -> None:
    message = refusal(ENTRY, AQL_MCP_AUTH__DELEGATION='{"require": ["a", "b"], "refuse": ["b"]}')
    assert "AQL_MCP_AUTH__DELEGATION" in message
    assert "b both required and refused" in message
