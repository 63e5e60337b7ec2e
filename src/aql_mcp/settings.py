"""Typed, frozen settings: every section, its fields, defaults and checks.

`configuration.load_settings` builds them (file, then environment `AQL_MCP_<SECTION>__<NAME>`,
then command-line overrides). `config/default.yaml` documents every field; a test keeps it equal
to these models.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from aql_mcp.auth.settings import AuthSettings
from aql_mcp.builtin_sections import (
    ConsoleSettings,
    CorporateSettings,
    ExecutionSettings,
    RecordsSettings,
    SafetySettings,
)
from aql_mcp.section import Section

ENV_PREFIX = "AQL_MCP_"
BUILTIN_PLUGINS: tuple[str, ...] = (
    "aql_mcp.plugins.records:plugin",
    "aql_mcp.plugins.corporate:plugin",
    "aql_mcp.plugins.executions:plugin",
    "aql_mcp.plugins.safety:plugin",
)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# How far a plugin is trusted (MCP-AQL adapter trust levels), in increasing order. Defined here, the
# lowest layer that names it (`aql.max_trust`), so the settings never import the MCP-AQL layer.
TrustLevel = Literal["untested", "generated", "validated", "community_reviewed", "certified"]
TRUST_LEVELS: tuple[TrustLevel, ...] = ("untested", "generated", "validated", "community_reviewed", "certified")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")


class ServerSettings(Section):
    name: str = "aql-mcp"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    public_url: str | None = None
    dev: bool = False
    plugins: tuple[str, ...] = ()
    builtin_plugins: tuple[str, ...] = BUILTIN_PLUGINS
    forwarded_allow_ips: tuple[str, ...] = ()
    # Installed packages' plugins (entry-point group `aql_mcp.plugins`) load after the two lists
    # above; off, only the lists load. `disabled_plugins` names entry points to leave out.
    entry_point_plugins: bool = True
    disabled_plugins: tuple[str, ...] = ()

    @field_validator("name")
    @classmethod
    def _name_is_uri_scheme(cls, value: str) -> str:
        # The name is also the `<service>://` resource scheme (corporate §11.1), so RFC 3986 §3.1.
        if not _SCHEME.fullmatch(value):
            raise ValueError("must be a lower-case URI scheme: a letter, then letters, digits, '+', '-' or '.'")
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url_is_http(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme not in ("http", "https"):
            raise ValueError("must be an http(s) URL")
        return value.rstrip("/") if value else value


class ShutdownSettings(Section):
    drain_seconds: float = Field(default=5.0, ge=0, le=300)
    grace_seconds: float = Field(default=20.0, ge=0, le=600)


class StoreSettings(Section):
    """Where state lives: SQLite under `path` (one replica), or PostgreSQL at `url` (any number)."""

    path: Path = Path("state")
    url: SecretStr = SecretStr("")
    listen_url: SecretStr = SecretStr("")
    password: SecretStr | None = None
    password_file: Path | None = None
    pool_min_size: int = Field(default=2, ge=0, le=100)
    pool_max_size: int = Field(default=10, ge=1, le=200)
    statement_cache_size: int = Field(default=100, ge=0, le=10_000)
    connect_timeout_seconds: float = Field(default=5.0, gt=0, le=120)
    command_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    ssl_mode: Literal["disable", "prefer", "require", "verify-ca", "verify-full"] = "prefer"
    ssl_root_cert: Path | None = None
    sqlite_readers: int = Field(default=4, ge=1, le=64)
    lock_timeout_seconds: float = Field(default=2.0, gt=0, le=60)
    sqlite_wal_limit_bytes: int = Field(default=4 * 1024 * 1024, ge=65_536)
    # Fair store access (docs/store.md, "Fair store access"): the part of the SQLite readers or the
    # pool's connections one tenant may hold, and how many records a filtered, searched or sorted
    # listing may have to examine.
    tenant_share: float = Field(default=0.5, gt=0, le=1)
    listing_scan_rows: int = Field(default=50_000, ge=1)
    # How long a filtered, searched or sorted listing may run before it is stopped (docs/store.md).
    listing_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    # How many listings no declared index answers (scans) may run at once per replica, on SQLite scan
    # threads or a PostgreSQL pool of their own, apart from every other call (docs/store.md, "Scan slots").
    scan_concurrency: int = Field(default=4, ge=1, le=64)
    # How long a replica's lease on a task or an execution it runs lasts without renewal (renewed
    # three times within it); once it ran out, another replica takes the work over (docs/executions.md).
    lease_seconds: float = Field(default=15.0, ge=1, le=300)

    @field_validator("url", "listen_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr) -> SecretStr:
        # The message never repeats the value: it may hold a password.
        url = value.get_secret_value()
        if url and urlsplit(url).scheme not in ("postgresql", "postgres"):
            raise ValueError("must be empty (SQLite under store.path) or a postgresql:// URL")
        return value

    @property
    def is_postgres(self) -> bool:
        return bool(self.url.get_secret_value())


class LoggingSettings(Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "console"] | None = None


class MetricsSettings(Section):
    enabled: bool = True
    port: int | None = Field(default=None, ge=1, le=65535)
    allowed_clients: tuple[str, ...] = ()

    @field_validator("allowed_clients")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for network in value:
            ipaddress.ip_network(network, strict=False)
        return value


class ProbesSettings(Section):
    """`/health` and `/ready` on a listener of their own, out of reach of the service port's floods."""

    port: int | None = Field(default=None, ge=1, le=65535)


class TracingSettings(Section):
    otlp_endpoint: str | None = None
    # OTLP/HTTP metrics endpoint for the MCP conventions' histograms (docs/monitoring.md, "MCP metrics").
    otlp_metrics_endpoint: str | None = None
    service_name: str | None = None
    sample_ratio: float = Field(default=1.0, ge=0.0, le=1.0)


class HttpSettings(Section):
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    # Connection limits (src/aql_mcp/server/connection.py): uvicorn has none of these.
    max_header_bytes: int = Field(default=32_768, ge=1024, le=1_048_576)
    max_headers: int = Field(default=100, ge=10, le=1000)
    header_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    body_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    idle_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    max_connections: int = Field(default=1024, ge=16, le=1_000_000)
    # Off by default: behind a gateway every connection has the gateway's address (docs/connections.md).
    max_connections_per_source: int | None = Field(default=None, ge=1, le=1_000_000)

    @field_validator("allowed_origins")
    @classmethod
    def _origins_are_exact(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for origin in value:
            if origin == "*":
                continue
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
                raise ValueError(f"{origin!r} is not an origin (scheme://host[:port])")
        return value


class LimitSettings(Section):
    tool_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    max_result_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    rate_per_second: float = Field(default=50.0, gt=0)
    rate_burst: int = Field(default=100, ge=1)
    max_concurrent_calls: int = Field(default=16, ge=1)
    max_sessions_per_principal: int = Field(default=100, ge=1)


class SessionSettings(Section):
    idle_seconds: int = Field(default=3600, ge=10)
    max_open: int = Field(default=10_000, ge=1)
    retry_after_seconds: int = Field(default=30, ge=1)
    max_client_info_bytes: int = Field(default=16_384, ge=1024, le=1_048_576)
    max_client_info_depth: int = Field(default=10, ge=4, le=64)


class StreamSettings(Section):
    retry_ms: int = Field(default=1000, ge=100)
    keepalive_seconds: float = Field(default=15.0, gt=0)
    event_retention_seconds: int = Field(default=600, ge=10)
    page_size: int = Field(default=100, ge=1, le=1000)
    # `subscriptions/listen` streams (modern era), per replica: in all, per caller, URIs per stream.
    max_listens: int = Field(default=512, ge=1, le=1_000_000)
    max_listens_per_principal: int = Field(default=8, ge=1, le=10_000)
    max_listen_resources: int = Field(default=100, ge=1, le=10_000)


class AqlSettings(Section):
    """MCP-AQL: which endpoint tools are exposed and the payload limits of MCP-AQL §4.7.5."""

    mode: Literal["semantic", "single", "all"] = "semantic"
    profile: Literal["crude", "dqmo"] = "crude"
    tool_prefix: str = Field(default="mcp_aql", pattern=r"^[a-z][a-z0-9_]{1,40}$")
    max_string_length: int = Field(default=1_048_576, ge=1)
    max_array_elements: int = Field(default=10_000, ge=1)
    max_nesting_depth: int = Field(default=32, ge=2, le=64)
    max_batch_size: int = Field(default=50, ge=1, le=1000)
    default_page_size: int = Field(default=20, ge=1, le=1000)
    max_page_size: int = Field(default=100, ge=1, le=1000)
    confirmation_ttl_seconds: int = Field(default=300, ge=1, le=900)
    confirm_with_elicitation: bool = False
    # How a recoverable failure (validation, not found, confirmation required) reaches MCP: a tool
    # error (`isError: true`, MCP 2025-11-25 tools) or a plain result whose envelope says
    # `success: false` (MCP-AQL mcp-integration §4.1); docs/aql.md, "Recoverable errors".
    recoverable_errors: Literal["tool_error", "result"] = "tool_error"
    # A plugin's `trust` is its own claim: the operator caps it, or sets it per plugin (operations/trust.py).
    max_trust: TrustLevel = "community_reviewed"
    plugin_trust: dict[str, TrustLevel] = Field(default_factory=dict)


class McpSettings(Section):
    """Which MCP protocol eras `/mcp` serves beside the legacy one (docs/eras.md)."""

    # Serve MCP 2026-07-28 beside the legacy era. Off: a 2026-07-28 request is refused with 400
    # -32600, which a dual-era client reads as "legacy server" and falls back to `initialize`.
    modern_era: bool = True
    # Signs the `requestState` of an `input_required` answer, so any replica can take up the retry:
    # every replica needs the same key (a Secret). Required in production with a PostgreSQL store
    # (several replicas); otherwise, when unset, each process uses a random key (docs/eras.md).
    request_state_key: SecretStr | None = None
    # The key before the last rotation: still accepted for states it signed, never used to sign.
    request_state_previous_key: SecretStr | None = None
    # How long a client may take to answer (a human reading an elicitation), in seconds.
    request_state_ttl_seconds: int = Field(default=600, ge=30, le=3600)
    # How long a task of the Tasks extension may run and stays readable after its creation (its ttlMs).
    task_ttl_seconds: int = Field(default=3600, ge=60, le=86_400)
    # Tasks one caller may have working or waiting for input at once; one more is 429 (docs/eras.md).
    max_tasks_per_principal: int = Field(default=32, ge=1, le=10_000)

    @field_validator("request_state_key", "request_state_previous_key")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value().encode()) < 32:
            raise ValueError("must be at least 32 bytes (e.g. `openssl rand -base64 48`)")
        return value


class DiscoverySettings(Section):
    """The documents a client reads before it connects: the Server Card and the catalog (docs/discovery.md)."""

    # Serve `/mcp/server-card` and the catalog (SEP-2127 is experimental). Unset: in development mode only.
    server_card: bool | None = None
    # The card's reverse-DNS name; unset: the public URL's host reversed, '/', then `server.name`.
    name: str | None = Field(default=None, min_length=3, max_length=200, pattern=r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")
    description: str = Field(default="MCP server fronting an MCP-AQL operation router.", min_length=1, max_length=100)
    # How long a client or a shared cache may keep a document before it revalidates (its ETag).
    max_age_seconds: int = Field(default=3600, ge=0, le=86_400)


class AuditSettings(Section):
    """The audit trail in the store (docs/audit.md)."""

    # Write the trail at all. Off: no record is written (the `audit_event` log lines stay), the start
    # logs `audit_trail_off` and `/ready` says `audit_trail: off`; for measuring its cost (docs/audit.md).
    trail: bool = True
    # Record successful reads too; writes, refusals and every console action are always recorded.
    reads: bool = False
    # The caller in a record: `digest` (its sha256 prefix, as in the logs) or `clear` (the subject itself).
    subject: Literal["digest", "clear"] = "digest"
    # `aql-mcp audit prune` deletes records older than this, leaving a checkpoint per chain.
    retention_days: int = Field(default=365, ge=1, le=36_500)


class Settings(BaseSettings):
    """Every setting of the service, grouped in sections as in `config/default.yaml`."""

    model_config = SettingsConfigDict(
        frozen=True, extra="forbid", env_prefix=ENV_PREFIX, env_nested_delimiter="__", case_sensitive=False
    )

    server: ServerSettings = ServerSettings()
    store: StoreSettings = StoreSettings()
    logging: LoggingSettings = LoggingSettings()
    metrics: MetricsSettings = MetricsSettings()
    probes: ProbesSettings = ProbesSettings()
    tracing: TracingSettings = TracingSettings()
    corporate: CorporateSettings = CorporateSettings()
    http: HttpSettings = HttpSettings()
    auth: AuthSettings = AuthSettings()
    limits: LimitSettings = LimitSettings()
    sessions: SessionSettings = SessionSettings()
    streams: StreamSettings = StreamSettings()
    shutdown: ShutdownSettings = ShutdownSettings()
    aql: AqlSettings = AqlSettings()
    records: RecordsSettings = RecordsSettings()
    mcp: McpSettings = McpSettings()
    discovery: DiscoverySettings = DiscoverySettings()
    executions: ExecutionSettings = ExecutionSettings()
    safety: SafetySettings = SafetySettings()
    console: ConsoleSettings = ConsoleSettings()
    audit: AuditSettings = AuditSettings()
    # `plugins.<name>`: a plugin's own settings, validated by the plugin's `settings_model` when it
    # loads (plugin_host/sections.py), so they are free-form here.
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @property
    def base_url(self) -> str:
        if self.server.public_url:
            return self.server.public_url
        host = self.server.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.server.port}"

    @property
    def issuer(self) -> str:
        return self.auth.issuer or self.base_url

    @property
    def audience(self) -> str:
        return self.auth.audience or f"{self.base_url}/mcp"

    @property
    def plugin_paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.server.builtin_plugins + self.server.plugins))

    @property
    def allowed_hosts(self) -> tuple[str, ...]:
        """The Host allow-list; in development mode the loopback names and the port by default."""
        if self.http.allowed_hosts or not self.server.dev:
            return self.http.allowed_hosts
        port = self.server.port
        return tuple(h for name in LOOPBACK_HOSTS for h in (name, f"{name}:{port}"))

    @property
    def allowed_origins(self) -> tuple[str, ...]:
        """The Origin allow-list; in development mode the loopback origins on the port by default."""
        if self.http.allowed_origins or not self.server.dev:
            return self.http.allowed_origins
        return tuple(f"http://{name}:{self.server.port}" for name in LOOPBACK_HOSTS)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Sources are passed in through `init_settings`; see `load_settings`.
        return (init_settings,)


def field_defaults() -> dict[str, dict[str, Any]]:
    """Every section's fields and their defaults, as `config/default.yaml` must list them."""
    out: dict[str, dict[str, Any]] = {}
    for section, info in Settings.model_fields.items():
        model = info.annotation
        if section == "plugins":
            out[section] = {}  # each plugin's model documents its own fields
            continue
        assert isinstance(model, type)
        assert issubclass(model, BaseModel)
        out[section] = {name: _plain(f) for name, f in model.model_fields.items()}
    return out


def _plain(field: FieldInfo) -> Any:
    value = field.get_default(call_default_factory=True, validated_data={})
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, tuple):
        return [item.model_dump(mode="json") if isinstance(item, BaseModel) else item for item in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    return value
