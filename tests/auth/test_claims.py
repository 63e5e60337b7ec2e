"""Reading the caller out of claims (auth/claims.py), the principal's issuer-qualified identity and tenant
(auth/principal.py) and the delegation policy (auth/delegation.py): docs/identity.md."""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.auth.claims import DEFAULT_MAPPING, MAX_ACTORS, ClaimMapping, actors_of, claim_at
from aql_mcp.auth.delegation import DelegationRules
from aql_mcp.auth.principal import Principal, subject_digest, tenant_key, withheld_reason
from aql_mcp.exceptions import InvalidToken

ENTRA = ClaimMapping(subject="oid", tenant="tid", scopes=("scp", "roles"), namespace="https://entra.test/v2.0")
KEYCLOAK = ClaimMapping(tenant="org", scopes=("realm_access.roles",), namespace="https://keycloak.test/realms/a")


def test_a_claim_path_names_a_claim_as_written_before_it_is_split_on_dots() -> None:
    claims = {"realm_access": {"roles": ["a"]}, "https://example.com/tenant": "acme", "a.b": 1, "a": {"b": 2}}
    assert claim_at(claims, "realm_access.roles") == ["a"]
    assert claim_at(claims, "https://example.com/tenant") == "acme"
    assert claim_at(claims, "a.b") == 1
    assert claim_at(claims, "realm_access.missing") is None
    assert claim_at(claims, "https://example.com/other") is None
    assert claim_at({"realm_access": ["roles"]}, "realm_access.roles") is None


def test_an_entra_like_token_maps_oid_tid_and_scp() -> None:
    claims = {"sub": "pairwise-x", "oid": "0001-oid", "tid": "tenant-guid", "scp": "mcp records.write", "exp": 9}
    principal = ENTRA.principal(claims, expires_at=9.0)
    assert (principal.subject, principal.tenant) == ("0001-oid", "tenant-guid")
    assert principal.scopes == {"mcp", "records.write"}
    assert principal.issuer == "https://entra.test/v2.0"


def test_an_entra_app_token_without_scp_takes_its_roles() -> None:
    principal = ENTRA.principal({"oid": "app-oid", "tid": "t", "roles": ["Records.Admin"]}, expires_at=None)
    assert principal.scopes == {"Records.Admin"}


def test_a_keycloak_like_token_maps_realm_roles_and_a_custom_tenant() -> None:
    claims = {"sub": "kc-user", "org": "acme", "realm_access": {"roles": ["mcp", "offline_access"]}, "scope": "x"}
    principal = KEYCLOAK.principal(claims, expires_at=None)
    assert (principal.subject, principal.tenant, principal.scopes) == ("kc-user", "acme", {"mcp", "offline_access"})


@pytest.mark.parametrize("subject", [None, "", 7, ["oid"]])
def test_a_token_without_its_mapped_subject_is_invalid(subject: Any) -> None:
    claims = {"sub": "present", "tid": "t", "scp": "mcp"}
    if subject is not None:
        claims["oid"] = subject
    with pytest.raises(InvalidToken):
        ENTRA.principal(claims, expires_at=None)


def test_an_unmapped_or_absent_tenant_is_none() -> None:
    assert DEFAULT_MAPPING.principal({"sub": "a", "tid": "t"}, expires_at=None).tenant is None
    assert ENTRA.principal({"oid": "a"}, expires_at=None).tenant is None
    assert ENTRA.principal({"oid": "a", "tid": 5}, expires_at=None).tenant is None


def test_the_act_chain_lists_the_current_actor_first() -> None:
    claims = {"sub": "user", "act": {"sub": "agent", "act": {"sub": "orchestrator"}}}
    assert actors_of(claims) == ("agent", "orchestrator")
    assert actors_of({"sub": "user"}) == ()


@pytest.mark.parametrize(
    "act",
    [{"client_id": "agent"}, {"sub": ""}, {"sub": 5}, "agent", ["agent"], {"sub": "a", "act": {"iss": "x"}}],
)
def test_a_malformed_act_makes_the_token_invalid_not_undelegated(act: Any) -> None:
    with pytest.raises(InvalidToken):
        DEFAULT_MAPPING.principal({"sub": "user", "act": act}, expires_at=None)


def test_an_act_chain_deeper_than_the_limit_is_invalid() -> None:
    act: dict[str, Any] = {"sub": "last"}
    for index in range(MAX_ACTORS):
        act = {"sub": f"actor-{index}", "act": act}
    with pytest.raises(InvalidToken):
        actors_of({"act": act})


def test_the_single_issuer_principal_keeps_its_digest_and_owner() -> None:
    principal = DEFAULT_MAPPING.principal({"sub": "alice", "org": "acme"}, expires_at=None)
    assert principal.digest == subject_digest("alice")
    assert tenant_key(principal, "sub") == "alice"
    assert tenant_key(principal, "org") == "acme"


def test_the_same_subject_from_two_issuers_is_two_callers() -> None:
    """OpenID Connect Core §2: `sub` is unique only within its issuer."""
    entra = ENTRA.principal({"oid": "alice", "tid": "acme"}, expires_at=None)
    keycloak = KEYCLOAK.principal({"sub": "alice", "org": "acme"}, expires_at=None)
    single = DEFAULT_MAPPING.principal({"sub": "alice", "org": "acme"}, expires_at=None)
    assert len({entra.digest, keycloak.digest, single.digest}) == 3
    assert len({tenant_key(p, "sub") for p in (entra, keycloak, single)}) == 3
    assert len({tenant_key(p, "org") for p in (entra, keycloak, single)}) == 3
    assert tenant_key(entra, "sub") == "https://entra.test/v2.0#alice"


def test_the_mapped_tenant_is_what_a_tenant_claim_other_than_sub_reads() -> None:
    entra = ENTRA.principal({"oid": "u1", "tid": "acme-guid", "org": "ignored"}, expires_at=None)
    assert tenant_key(entra, "org") == "https://entra.test/v2.0#acme-guid"
    assert tenant_key(entra, "sub") == "https://entra.test/v2.0#u1"
    unmapped = ClaimMapping(namespace="https://okta.test").principal({"sub": "u", "org": "o"}, expires_at=None)
    assert tenant_key(unmapped, "org") == "https://okta.test#o"
    assert tenant_key(unmapped, "team") is None


def test_actor_digests_follow_the_principals_digest_rule() -> None:
    single = DEFAULT_MAPPING.principal({"sub": "u", "act": {"sub": "agent"}}, expires_at=None)
    listed = ENTRA.principal({"oid": "u", "act": {"sub": "agent"}}, expires_at=None)
    assert single.actor_digests == (subject_digest("agent"),)
    assert listed.actor_digests == (subject_digest("https://entra.test/v2.0#agent"),)


def test_delegation_refuse_withholds_the_scope_from_delegated_tokens_only() -> None:
    rules = DelegationRules(refuse=("records:admin",), require=("agent:write",))
    delegated = rules.apply(Principal("u", frozenset({"mcp", "records:admin", "agent:write"}), actors=("agent",)))
    direct = rules.apply(Principal("u", frozenset({"mcp", "records:admin", "agent:write"})))
    assert delegated.scopes == {"mcp", "agent:write"}
    assert dict(delegated.withheld) == {"records:admin": "refused"}
    assert direct.scopes == {"mcp", "records:admin"}
    assert dict(direct.withheld) == {"agent:write": "required"}
    assert delegated.digest == direct.digest == subject_digest("u")
    assert withheld_reason(delegated, ("records:admin",)) == "refused"
    assert withheld_reason(direct, ("agent:write",)) == "required"
    assert withheld_reason(direct, ("other",)) is None
    assert withheld_reason(None, ("agent:write",)) is None


def test_no_delegation_policy_leaves_the_principal_as_it_is() -> None:
    principal = Principal("u", frozenset({"mcp"}), actors=("agent",))
    assert DelegationRules().apply(principal) is principal
    assert DelegationRules(refuse=("other",)).apply(principal) is principal
