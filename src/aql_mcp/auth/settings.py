"""The `auth` settings section (config/default.yaml documents each key).

Kept beside the code that reads it, as the console, executions and safety sections are;
`settings.py` assembles every section.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from aql_mcp.section import Section


class OpaqueToken(Section):
    """What an opaque token in the allow-list stands for."""

    sub: str
    scopes: tuple[str, ...] = ()


class ScopePolicy(Section):
    """Scopes a caller needs, all of them, per tool, prompt, resource, MCP-AQL operation and
    endpoint family (an operation needs its own, its family's and its family tool's, whatever tool
    carried it); `*` applies to the rest."""

    tools: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    prompts: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    resources: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    operations: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    families: dict[str, tuple[str, ...]] = Field(default_factory=dict)


# The algorithms an `auth.issuers` entry may list: asymmetric ones only, HS256 is for development.
IssuerAlgorithm = Literal["RS256", "PS256", "ES256", "EdDSA"]


class IssuerClaims(Section):
    """Where an issuer puts who the caller is (docs/identity.md, "Claim mapping"): claim paths, a
    name as written or else dotted nested names; `scopes` are tried in order, the first present wins."""

    subject: str = Field(default="sub", min_length=1)
    tenant: str | None = Field(default=None, min_length=1)
    scopes: tuple[str, ...] = Field(default=("scope", "scp"), min_length=1)


class TrustedIssuer(Section):
    """One more IdP whose tokens are accepted (`auth.issuers`): JWTs whose `iss` is exactly `issuer`,
    checked with its own keys (`jwks_url`) or asked about at its own `introspection_url`."""

    issuer: str = Field(min_length=1)
    jwks_url: str | None = None
    introspection_url: str | None = None
    introspection_client_id: str | None = None
    introspection_client_secret: SecretStr | None = None
    audiences: tuple[str, ...] = Field(min_length=1)
    algorithms: tuple[IssuerAlgorithm, ...] = Field(default=("RS256", "ES256"), min_length=1)
    claims: IssuerClaims = Field(default_factory=lambda: IssuerClaims())

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, value: str) -> str:
        # RFC 8414 §2: an issuer has no query or fragment; `#` also separates issuer and subject in
        # the qualified names of auth/principal.py.
        if "#" in value or "?" in value:
            raise ValueError("an issuer identifier has no query or fragment ('?' or '#', RFC 8414 §2)")
        return value

    @field_validator("jwks_url", "introspection_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme.lower() not in ("http", "https"):
            raise ValueError("must be an http(s) URL")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> TrustedIssuer:
        if (self.jwks_url is None) == (self.introspection_url is None):
            raise ValueError(f"issuer {self.issuer!r}: set exactly one of jwks_url and introspection_url")
        if self.introspection_url and not (self.introspection_client_id and self.introspection_client_secret):
            raise ValueError(
                f"issuer {self.issuer!r}: introspection_client_id and introspection_client_secret are required "
                "with introspection_url"
            )
        return self


class DelegationPolicy(Section):
    """Scopes delegated tokens (RFC 8693 `act`) may not use (`refuse`), and scopes only delegated
    tokens may use (`require`); docs/identity.md, "Delegation"."""

    require: tuple[str, ...] = ()
    refuse: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _disjoint(self) -> DelegationPolicy:
        both = sorted(set(self.require) & set(self.refuse))
        if both:
            raise ValueError(f"scope(s) {' '.join(both)} both required and refused for delegated tokens")
        return self


class AuthSettings(Section):
    issuer: str | None = None
    audience: str | None = None
    jwks_url: str | None = None
    # PEM file of the CA certificates the IdP's TLS certificate chains to (a private corporate CA),
    # trusted for the JWKS and introspection calls in addition to the system's.
    ca_bundle: Path | None = None
    algorithms: tuple[Literal["RS256", "PS256", "ES256", "EdDSA", "HS256"], ...] = ("RS256", "ES256")
    clock_skew_seconds: int = Field(default=30, ge=0, le=60)
    jwks_ttl_seconds: int = Field(default=300, ge=10, le=600)
    jwks_refetch_cooldown_seconds: int = Field(default=30, ge=1)
    jwks_max_stale_seconds: int = Field(default=3600, ge=60)
    hs256_secret: SecretStr | None = None
    opaque_tokens: dict[str, OpaqueToken] = Field(default_factory=dict)
    opaque_tokens_file: Path | None = None
    introspection_url: str | None = None
    introspection_client_id: str | None = None
    introspection_client_secret: SecretStr | None = None
    introspection_cache_seconds: int = Field(default=60, ge=0, le=600)
    required_scopes: tuple[str, ...] = ()
    anonymous_listing: bool = False
    policy: ScopePolicy = Field(default_factory=lambda: ScopePolicy())
    dev_token_ttl_seconds: int = Field(default=3600, ge=60, le=86_400 * 30)
    introspection_negative_cache_seconds: int = Field(default=60, ge=0, le=3600)
    introspection_negative_cache_size: int = Field(default=10_000, ge=1, le=1_000_000)
    introspection_rate_per_second: float = Field(default=20.0, gt=0, le=10_000)
    introspection_rate_burst: int = Field(default=40, ge=1, le=100_000)
    allow_insecure_http: bool = False
    operator_scope: str = Field(default="aql:operator", pattern=r"^[\x21\x23-\x5b\x5d-\x7e]+$")
    # More IdPs beside the single-issuer settings above, each routed to by a token's `iss`.
    issuers: tuple[TrustedIssuer, ...] = ()
    delegation: DelegationPolicy = Field(default_factory=lambda: DelegationPolicy())

    @field_validator("jwks_url", "introspection_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme not in ("http", "https"):
            raise ValueError("must be an http(s) URL")
        return value

    @field_validator("issuers")
    @classmethod
    def _distinct(cls, value: tuple[TrustedIssuer, ...]) -> tuple[TrustedIssuer, ...]:
        seen: set[str] = set()
        for entry in value:
            if entry.issuer in seen:
                raise ValueError(f"issuer {entry.issuer!r} is listed twice; each issuer has one entry")
            seen.add(entry.issuer)
        return value

    @field_validator("opaque_tokens")
    @classmethod
    def _digests(cls, value: dict[str, OpaqueToken]) -> dict[str, OpaqueToken]:
        for digest in value:
            if not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise ValueError("keys are SHA-256 digests of the tokens, 64 lower-case hex digits (never tokens)")
        return value
