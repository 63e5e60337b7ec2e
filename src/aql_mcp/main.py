"""The `aql-mcp` command: serve, dev-token, check-config, audit (aql_mcp/audit/commands.py)."""

from __future__ import annotations

import argparse
import gc
import math
import shlex
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import structlog
import uvicorn
from starlette.applications import Starlette

from aql_mcp import __version__
from aql_mcp.app import create_app, create_metrics_app, create_probes_app
from aql_mcp.audit.commands import add_commands as add_audit_commands
from aql_mcp.auth.dev_issuer import KEY_FILE, DevIssuer
from aql_mcp.auth.dev_key import find_key, record_path, remove_record, write_record
from aql_mcp.configuration import load_settings, records_dir
from aql_mcp.exceptions import ConfigError
from aql_mcp.observability.logging import configure_logging
from aql_mcp.plugin_host.contracts import BannerPlugin
from aql_mcp.plugin_host.loader import check_trust, load_plugins
from aql_mcp.plugin_host.sources import plugin_sources
from aql_mcp.protocol.primitives import Registry
from aql_mcp.server.connection import protocol_for
from aql_mcp.server.connection_limits import LINGERING_REFUSALS, ConnectionLimits, message_bound
from aql_mcp.server.file_limit import fit_connections, raise_file_limit
from aql_mcp.server.shutdown import Companion, DrainingServer
from aql_mcp.settings import Settings
from aql_mcp.store.factory import open_store

log = structlog.get_logger("aql_mcp.main")
# Descriptors kept out of the connection budget: listeners, logs, the JWKS and OTLP clients, the
# store's files (SQLite) or pool (PostgreSQL, added below).
FILE_RESERVE = 64
# Prometheus scrapes one replica from one or two places: a small cap keeps that port cheap.
METRICS_MAX_CONNECTIONS = 32
# The kubelet's liveness, readiness and startup probes, an operator's curl: a handful at a time.
PROBES_MAX_CONNECTIONS = 32


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except ConfigError as exc:
        print(f"aql-mcp: configuration refused: {exc}", file=sys.stderr)
        return 2
    return code


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="aql-mcp", description="Corporate-profile Streamable HTTP MCP server")
    root.add_argument("--version", action="version", version=f"aql-mcp {__version__}")
    commands = root.add_subparsers(required=True, metavar="COMMAND")

    serve_cmd = commands.add_parser("serve", help="run the service")
    serve_cmd.add_argument("--config", type=Path, help="YAML config file (see config/default.yaml)")
    serve_cmd.add_argument("--dev", action="store_true", default=None, help="development mode (dev token issuer)")
    serve_cmd.add_argument("--host")
    serve_cmd.add_argument("--port", type=int)
    serve_cmd.set_defaults(run=serve)

    token_cmd = commands.add_parser("dev-token", help="mint a development bearer token")
    token_cmd.add_argument("--config", type=Path)
    token_cmd.add_argument(
        "--state",
        type=Path,
        help="the state directory of the development server (default: store.path, then its record)",
    )
    token_cmd.add_argument("--host", help="the host the service runs on (part of the token's audience)")
    token_cmd.add_argument("--port", type=int, help="the port the service runs on (part of the token's audience)")
    token_cmd.add_argument("--sub", default="developer", help="subject (default: developer)")
    token_cmd.add_argument("--scope", default="mcp", help='space-separated scopes (default: "mcp")')
    token_cmd.add_argument(
        "--ttl", type=_ttl, help="lifetime in seconds, 60 to 2592000 (default: auth.dev_token_ttl_seconds)"
    )
    token_cmd.set_defaults(run=dev_token)

    check_cmd = commands.add_parser("check-config", help="validate settings and exit")
    check_cmd.add_argument("--config", type=Path)
    check_cmd.add_argument("--dev", action="store_true", default=None)
    check_cmd.set_defaults(run=check_config)

    add_audit_commands(commands, _settings)
    return root


def _ttl(value: str) -> int:
    seconds = int(value) if value.isdigit() else -1
    if not 60 <= seconds <= 86_400 * 30:
        raise argparse.ArgumentTypeError("must be a whole number of seconds from 60 to 2592000")
    return seconds


def _settings(args: argparse.Namespace, *, dev: bool | None = None) -> Settings:
    server: dict[str, Any] = {}
    if getattr(args, "dev", None) or dev:
        server["dev"] = True
    if getattr(args, "host", None):
        server["host"] = args.host
    if getattr(args, "port", None):
        server["port"] = args.port
    overrides: dict[str, dict[str, Any]] = {"server": server} if server else {}
    if getattr(args, "state", None):
        overrides["store"] = {"path": args.state}
    return load_settings(args.config, overrides=overrides or None)


def serve(args: argparse.Namespace) -> int:
    settings = _settings(args)
    log_format = settings.logging.format or ("console" if settings.server.dev and sys.stdout.isatty() else "json")
    configure_logging(level=settings.logging.level, console=log_format == "console")
    app = create_app(settings)
    if settings.server.dev:
        _print_banner(settings, args.config, app.state.services.plugins)
    limits = connection_limits(settings, on_refusal=app.state.services.telemetry.metrics.limit_event)
    # Bound before anything is served: a taken metrics or probes port is a configuration error, not
    # a failure after the service port is already answering.
    companions = metrics_servers(settings, app, limits) + probe_servers(settings, app, limits)
    config = listener_config(
        app,
        settings,
        limits,
        port=settings.server.port,
        lifespan="on",
        proxy_headers=bool(settings.server.forwarded_allow_ips),
        forwarded_allow_ips=list(settings.server.forwarded_allow_ips) or None,
        timeout_graceful_shutdown=math.ceil(settings.shutdown.grace_seconds),
    )
    services = app.state.services
    recorded: list[Path | None] = []

    def record_key() -> None:
        # Where the key is (create_app made it), for `dev-token` run from another directory: written
        # only once the port is ours, so a second server refused the port leaves the first one's record.
        recorded.append(write_record(records_dir(), settings.server.port, settings.store.path))

    # Everything built so far (modules, plugins, the registry, settings) lives as long as the process:
    # out of the collector's sight, a full collection scans only what requests create, which keeps
    # its pauses (the p99 of a busy service) short (bench/PROFILE.md).
    gc.freeze()
    server = DrainingServer(
        config,
        probes=services.probes,
        endpoint=services.endpoint,
        drain_seconds=settings.shutdown.drain_seconds,
        retry_ms=settings.streams.retry_ms,
        companions=companions,
        listeners=services.listeners,
        on_started=record_key if settings.server.dev else None,
    )
    try:
        server.run()
    except SystemExit:
        # uvicorn exits when the start failed; a refused configuration exits as every other does (2).
        if services.refusal.error is not None:
            raise services.refusal.error from None
        raise
    finally:
        remove_record(recorded[0] if recorded else None)
    return 0


def connection_limits(settings: Settings, *, on_refusal: Callable[[str], None]) -> ConnectionLimits:
    """The main port's limits; the connection cap lowered, if need be, to fit the open-file limit."""
    http, store = settings.http, settings.store
    file_limit = raise_file_limit()
    engine = store.pool_max_size + 1 if store.is_postgres else 3 * (store.sqlite_readers + 1)
    # The other ports' caps, and refused connections lingering outside each port's cap (three ports).
    reserve = FILE_RESERVE + engine + METRICS_MAX_CONNECTIONS + PROBES_MAX_CONNECTIONS + 3 * LINGERING_REFUSALS
    max_connections = fit_connections(http.max_connections, file_limit=file_limit, reserve=reserve)
    log.info("connection_limits", file_limit=file_limit, max_connections=max_connections, reserve=reserve)
    return ConnectionLimits(
        max_connections=max_connections,
        max_header_bytes=http.max_header_bytes,
        max_headers=http.max_headers,
        header_timeout=http.header_timeout_seconds,
        body_timeout=http.body_timeout_seconds,
        idle_timeout=http.idle_timeout_seconds,
        max_message_bytes=message_bound(max_body_bytes=http.max_body_bytes, max_header_bytes=http.max_header_bytes),
        on_refusal=on_refusal,
        max_per_source=http.max_connections_per_source,
    )


def listener_config(
    app: Starlette,
    settings: Settings,
    limits: ConnectionLimits,
    *,
    port: int,
    lifespan: Literal["on", "off"],
    **options: Any,
) -> uvicorn.Config:
    """The uvicorn settings of every listening port: none of them without the connection limits."""
    return uvicorn.Config(
        app,
        host=settings.server.host,
        port=port,
        http=protocol_for(limits),
        # No WebSocket route exists: an upgrade request is served as plain HTTP, never handed to a
        # protocol without the connection limits.
        ws="none",
        log_config=None,
        access_log=False,
        server_header=False,
        lifespan=lifespan,
        timeout_keep_alive=math.ceil(settings.http.idle_timeout_seconds),
        **options,
    )


def metrics_servers(settings: Settings, app: Starlette, limits: ConnectionLimits) -> list[Companion]:
    """The server of `metrics.port` with its socket already bound, when metrics have a port of their
    own (none otherwise)."""
    metrics = settings.metrics
    if not metrics.enabled or metrics.port is None:
        return []
    metrics_app = create_metrics_app(settings, app.state.services.telemetry.metrics)
    setting = "metrics.port (AQL_MCP_METRICS__PORT)"
    return [companion(metrics_app, settings, limits, port=metrics.port, cap=METRICS_MAX_CONNECTIONS, setting=setting)]


def probe_servers(settings: Settings, app: Starlette, limits: ConnectionLimits) -> list[Companion]:
    """The server of `probes.port` with its socket already bound, when the probes have a port of
    their own (none otherwise): a connection table of its own, which no flood on the service port
    fills (docs/connections.md, "Connect floods")."""
    port = settings.probes.port
    if port is None:
        return []
    probes_app = create_probes_app(app.state.services.probes)
    setting = "probes.port (AQL_MCP_PROBES__PORT)"
    return [companion(probes_app, settings, limits, port=port, cap=PROBES_MAX_CONNECTIONS, setting=setting)]


def companion(
    app: Starlette, settings: Settings, limits: ConnectionLimits, *, port: int, cap: int, setting: str
) -> Companion:
    """A server of its own for `app` on `port`, bound now (or a ConfigError naming `setting`): the
    service port's limits but a connection cap of `cap`, and no per-source cap (one scraper, one
    kubelet, each from one address)."""
    listener = bind(settings.server.host, port, setting=setting)
    own_limits = replace(limits, max_connections=cap, max_per_source=None)
    config = listener_config(app, settings, own_limits, port=port, lifespan="off")
    return Companion(uvicorn.Server(config), [listener])


def bind(host: str, port: int, *, setting: str) -> socket.socket:
    """A TCP socket bound to `host:port` (uvicorn listens on it), or a ConfigError naming `setting`."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"{setting}: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def dev_token(args: argparse.Namespace) -> int:
    settings = _settings(args, dev=True)
    store = settings.store
    explicit = store.path if "path" in store.model_fields_set else None
    records = records_dir()
    port = settings.server.port
    search = find_key(explicit=explicit, default=store.path, records=records, port=port)
    if search.found is None:
        looked = "".join(f"\n  {state / KEY_FILE}" for state in search.looked)
        record = f"\n  {record_path(records, port)} (no running development server recorded)" if records else ""
        print(
            f"aql-mcp dev-token: no development key found. Looked for:{looked}{record if explicit is None else ''}\n"
            "Start the development server first (`aql-mcp serve --dev`, `make run`), or point at its state "
            "directory with --state DIR (or store.path, AQL_MCP_STORE__PATH).",
            file=sys.stderr,
        )
        return 1
    issuer = DevIssuer(state_dir=search.found, issuer=settings.issuer, audience=settings.audience)
    ttl = args.ttl or settings.auth.dev_token_ttl_seconds
    print(issuer.mint(subject=args.sub, scopes=args.scope.split(), ttl=ttl))
    return 0


def check_config(args: argparse.Namespace) -> int:
    """The settings, and every plugin imported, configured and registered as `serve` would (the store
    built but never opened, nothing started), so a plugin that cannot load fails here rather than in
    the pod; so does a plugin that `serve` would run with less trust than it declares."""
    settings = _settings(args)
    sources = plugin_sources(settings)
    plugins = load_plugins(sources, Registry(), settings, open_store(settings))
    check_trust(plugins, settings)
    print(
        f"configuration ok: {settings.server.name} on {settings.server.host}:{settings.server.port}, "
        f"dev={settings.server.dev}, plugins={[plugin.name for plugin in plugins]}"
    )
    for plugin, source in zip(plugins, sources, strict=True):
        print(f"  plugin {plugin.name}: {source.path} ({source.origin})")
    return 0


def token_command(settings: Settings, config: Path | None) -> str:
    """`dev-token` for this server, runnable as printed from any directory and without the virtual
    environment on PATH: this interpreter, absolute paths."""
    parts = [sys.executable, "-m", "aql_mcp", "dev-token"]
    if config is not None:
        parts += ["--config", str(config.absolute())]
    parts += ["--state", str(settings.store.path.absolute())]
    parts += ["--host", settings.server.host, "--port", str(settings.server.port)]
    return shlex.join(parts)


def _print_banner(settings: Settings, config: Path | None, plugins: Sequence[object]) -> None:
    url = f"{settings.base_url}/mcp"
    command = token_command(settings, config)
    # Printed once, on purpose, in development mode only; never through the logger. The token only
    # goes to a terminal: stderr redirected to a file or a log collector would keep a live credential.
    if sys.stderr.isatty():
        issuer = DevIssuer(state_dir=settings.store.path, issuer=settings.issuer, audience=settings.audience)
        token = issuer.mint(subject="developer", scopes=["mcp"], ttl=settings.auth.dev_token_ttl_seconds)
        how = (
            f"Bearer token (valid {settings.auth.dev_token_ttl_seconds}s):\n\n"
            f"  export MCP_TOKEN={token}\n\n"
            f"More tokens (--sub, --scope, --ttl):\n\n  {command}\n\n"
        )
    else:
        how = (
            "Bearer token: not shown, stderr is not a terminal. Mint one with the same configuration:\n\n"
            f"  export MCP_TOKEN=$({command})\n\n"
        )
    print(
        f"\naql-mcp {__version__} in DEVELOPMENT mode on {url}\n"
        f"{how}"
        "Example call (MCP 2026-07-28, no session: which operations are there):\n\n"
        f"{_example_call(url)}\n"
        f"{_plugin_lines(settings, plugins)}",
        file=sys.stderr,
        flush=True,
    )


def _example_call(url: str) -> str:
    """The README quick start's call: one stateless request that asks the MCP-AQL router what it offers."""
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mcp_aql_read",'
        '"arguments":{"operation":"introspect","params":{"query":"operations"}},'
        '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        '"io.modelcontextprotocol/clientCapabilities":{}}}}'
    )
    return (
        f'  curl -s {url} -H "Authorization: Bearer $MCP_TOKEN" \\\n'
        "    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \\\n"
        "    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: mcp_aql_read' \\\n"
        "    -H 'Mcp-Param-Operation: introspect' \\\n"
        f"    -d '{body}'\n"
    )


def _plugin_lines(settings: Settings, plugins: Sequence[object]) -> str:
    """What plugins add to the banner (the safety plugin: the operator console's address and
    sign-in code); a secret only when stderr is a terminal, as the token above."""
    terminal = sys.stderr.isatty()
    return "".join(plugin.banner(settings, terminal=terminal) for plugin in plugins if isinstance(plugin, BannerPlugin))


if __name__ == "__main__":
    sys.exit(main())
