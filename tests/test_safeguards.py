"""The refusals at startup of settings that are only safe on a developer's machine (corporate §6, §7):
each names the variable to change."""

from typing import Any

import pytest

from aql_mcp.configuration import load_settings
from aql_mcp.exceptions import ConfigError

DEV: dict[str, dict[str, Any]] = {"server": {"dev": True}}


def refusal(environ: dict[str, str], overrides: dict[str, dict[str, Any]] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, environ, overrides)
    return str(caught.value)


def test_production_mode_without_a_token_source_is_refused_naming_the_jwks_variable() -> None:
    message = refusal({})
    assert "AQL_MCP_AUTH__JWKS_URL" in message


def test_production_mode_starts_with_the_four_operator_settings() -> None:
    """Issue: with JWKS URL, issuer, audience and allowed origins, serve starts in production mode."""
    settings = load_settings(
        None,
        {
            "AQL_MCP_AUTH__JWKS_URL": "https://idp.example/jwks.json",
            "AQL_MCP_AUTH__ISSUER": "https://idp.example",
            "AQL_MCP_AUTH__AUDIENCE": "https://mcp.example/mcp",
            "AQL_MCP_HTTP__ALLOWED_ORIGINS": '["https://agents.example.com"]',
        },
    )
    assert settings.server.dev is False
    assert settings.allowed_origins == ("https://agents.example.com",)


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        (
            {"AQL_MCP_AUTH__ALGORITHMS": '["RS256", "HS256"]', "AQL_MCP_AUTH__HS256_SECRET": "x" * 32},
            "AQL_MCP_AUTH__ALGORITHMS",
        ),
        ({}, "AQL_MCP_AUTH__ISSUER"),
    ],
    ids=["hs256", "no-issuer"],
)
def test_unsafe_production_settings_are_refused_with_the_variable_named(environ: dict[str, str], variable: str) -> None:
    base = {"AQL_MCP_AUTH__JWKS_URL": "https://idp.example/jwks.json"}
    if variable != "AQL_MCP_AUTH__ISSUER":
        base |= {"AQL_MCP_AUTH__ISSUER": "https://idp.example", "AQL_MCP_AUTH__AUDIENCE": "https://mcp.example/mcp"}
    assert variable in refusal({**base, **environ})


PRODUCTION_IDP = {"AQL_MCP_AUTH__ISSUER": "https://idp.example", "AQL_MCP_AUTH__AUDIENCE": "https://mcp.example/mcp"}
INTROSPECTION = {
    "AQL_MCP_AUTH__INTROSPECTION_CLIENT_ID": "aql-mcp",
    "AQL_MCP_AUTH__INTROSPECTION_CLIENT_SECRET": "s3cret",
}


@pytest.mark.parametrize(
    ("variable", "extra"),
    [("AQL_MCP_AUTH__JWKS_URL", {}), ("AQL_MCP_AUTH__INTROSPECTION_URL", INTROSPECTION)],
    ids=["jwks", "introspection"],
)
def test_a_plain_http_idp_url_is_refused_outside_development_mode_naming_its_variable(
    variable: str, extra: dict[str, str]
) -> None:
    """The JWKS decides whose signatures count; the introspection call carries the caller's token
    and the client secret: neither may travel over plain http in production (corporate §7.1)."""
    message = refusal({**PRODUCTION_IDP, **extra, variable: "http://idp.example/endpoint"})
    assert variable in message
    assert "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP" in message


@pytest.mark.parametrize("variable", ["AQL_MCP_AUTH__JWKS_URL", "AQL_MCP_AUTH__INTROSPECTION_URL"])
def test_a_plain_http_idp_url_is_accepted_with_the_explicit_opt_in(variable: str) -> None:
    environ = {**PRODUCTION_IDP, **INTROSPECTION, variable: "http://127.0.0.1:9/endpoint"}
    settings = load_settings(None, {**environ, "AQL_MCP_AUTH__ALLOW_INSECURE_HTTP": "true"})
    assert settings.auth.allow_insecure_http is True


def test_a_plain_http_idp_url_is_accepted_in_development_mode() -> None:
    settings = load_settings(None, {"AQL_MCP_AUTH__JWKS_URL": "http://127.0.0.1:9/jwks.json"}, DEV)
    assert settings.auth.allow_insecure_http is False


def test_an_https_idp_url_needs_no_opt_in() -> None:
    settings = load_settings(None, {**PRODUCTION_IDP, "AQL_MCP_AUTH__JWKS_URL": "HTTPS://idp.example/jwks.json"})
    assert settings.auth.allow_insecure_http is False


def test_an_upper_case_http_scheme_is_still_plain_http() -> None:
    message = refusal({**PRODUCTION_IDP, "AQL_MCP_AUTH__JWKS_URL": "HTTP://idp.example/jwks.json"})
    assert "AQL_MCP_AUTH__JWKS_URL" in message


def test_wildcard_origin_is_refused_outside_development_mode() -> None:
    message = refusal({"AQL_MCP_HTTP__ALLOWED_ORIGINS": '["*"]'})
    assert "AQL_MCP_HTTP__ALLOWED_ORIGINS" in message


def test_wildcard_origin_is_accepted_in_development_mode() -> None:
    settings = load_settings(None, {"AQL_MCP_HTTP__ALLOWED_ORIGINS": '["*"]'}, DEV)
    assert settings.allowed_origins == ("*",)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "agents.example.com"])
def test_development_mode_on_a_non_loopback_host_is_refused(host: str) -> None:
    message = refusal({"AQL_MCP_SERVER__HOST": host}, DEV)
    assert "AQL_MCP_SERVER__HOST" in message


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1"])
def test_development_mode_on_a_loopback_host_is_accepted(host: str) -> None:
    assert load_settings(None, {"AQL_MCP_SERVER__HOST": host}, DEV).server.host == host


def test_a_metrics_port_equal_to_the_service_port_is_refused() -> None:
    message = refusal({"AQL_MCP_METRICS__PORT": "8000", "AQL_MCP_SERVER__PORT": "8000"}, DEV)
    assert "AQL_MCP_METRICS__PORT" in message


@pytest.mark.parametrize("taken", ["AQL_MCP_SERVER__PORT", "AQL_MCP_METRICS__PORT"])
def test_a_probes_port_equal_to_the_service_or_metrics_port_is_refused(taken: str) -> None:
    message = refusal({"AQL_MCP_PROBES__PORT": "8001", taken: "8001"}, DEV)
    assert "AQL_MCP_PROBES__PORT" in message


PRODUCTION_POSTGRES = {
    "AQL_MCP_AUTH__JWKS_URL": "https://idp.example/jwks.json",
    "AQL_MCP_AUTH__ISSUER": "https://idp.example",
    "AQL_MCP_AUTH__AUDIENCE": "https://mcp.example/mcp",
    "AQL_MCP_STORE__URL": "postgresql://aql@db.example/aql",
}


def test_postgres_replicas_in_production_need_a_shared_request_state_key() -> None:
    """MCP 2026-07-28 mrtr: a retry may reach any replica, so every replica must verify the state
    another signed; without the key the modern era refuses to start, naming the variable."""
    assert "AQL_MCP_MCP__REQUEST_STATE_KEY" in refusal(PRODUCTION_POSTGRES)
    keyed = {**PRODUCTION_POSTGRES, "AQL_MCP_MCP__REQUEST_STATE_KEY": "k" * 48}
    assert load_settings(None, keyed).mcp.request_state_key is not None
    assert load_settings(None, {**PRODUCTION_POSTGRES, "AQL_MCP_MCP__MODERN_ERA": "false"}).mcp.modern_era is False


def test_a_request_state_key_shorter_than_32_bytes_is_refused() -> None:
    message = refusal({**PRODUCTION_POSTGRES, "AQL_MCP_MCP__REQUEST_STATE_KEY": "short"})
    assert "request_state_key" in message


PRODUCTION = {
    "AQL_MCP_AUTH__JWKS_URL": "https://idp.example/jwks.json",
    "AQL_MCP_AUTH__ISSUER": "https://idp.example",
    "AQL_MCP_AUTH__AUDIENCE": "https://mcp.example/mcp",
}


def test_a_server_card_in_production_mode_needs_the_public_url() -> None:
    """The card would otherwise name the bind address (`http://0.0.0.0:8000/mcp`) as the MCP URL."""
    message = refusal({**PRODUCTION, "AQL_MCP_DISCOVERY__SERVER_CARD": "true"})
    assert "AQL_MCP_DISCOVERY__SERVER_CARD" in message
    assert "AQL_MCP_SERVER__PUBLIC_URL" in message
    settings = load_settings(
        None,
        {**PRODUCTION, "AQL_MCP_DISCOVERY__SERVER_CARD": "true", "AQL_MCP_SERVER__PUBLIC_URL": "https://mcp.example"},
    )
    assert settings.discovery.server_card is True
