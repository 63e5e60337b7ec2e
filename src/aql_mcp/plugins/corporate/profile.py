"""The built-in `corporate` plugin: the Avatar-profile prompts and meta resources (corporate §10, §11).

`agent_brief` and `agent_prompt` are written at request time from what the registry serves at that
moment, so they never drift from `tools/list`; an operator's override text replaces either one.
The resources are the reserved `use://`, `project://` and `doc://` ones of §11.2 plus the
`<service>://agent/*` mirrors of the two prompts. `deprecated()` is the §17.2 description prefix.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, metadata
from typing import Any

from aql_mcp import __version__
from aql_mcp.plugin import (
    Content,
    Context,
    Prompt,
    Registry,
    Resource,
    Settings,
    Skill,
    message,
    text,
    text_contents,
    with_deprecation,
)
from aql_mcp.plugins.corporate.agent_guide import AgentGuide

JSON_TYPE = "application/json"
MARKDOWN_TYPE = "text/markdown"

TOKEN_KINDS = {
    "jwt-jwks": "JWT signed with RS256 or ES256 by a key published in the issuer's JWKS",
    "jwt-dev-issuer": "JWT from the built-in development issuer (ES256; development mode only)",
    "opaque": "opaque token, checked against an allow-list of SHA-256 digests or by introspection (RFC 7662)",
}
CLAIMS = {
    "iss": "required; must equal the issuer",
    "aud": "required; must contain the audience",
    "exp": "required; an expired token is refused (a small clock-skew allowance applies)",
    "nbf": "checked when present: a token is refused before this time",
    "iat": "checked when present: a token issued in the future is refused",
    "sub": "required; the caller's identity (users and services alike)",
    "scope": "space-separated scopes the token grants",
    "scp": "scopes as a list or a string, read when `scope` is absent",
    "act": "optional (RFC 8693 delegation): the actor chain, recorded with the call; some scopes may be "
    "refused to delegated tokens, or kept for them",
}
HEADERS_READ = {
    "Authorization": "`Bearer <token>` on every /mcp request; never a token in the query string",
    "MCP-Session-Id": "the session from the initialize response, on every later request of the session",
    "MCP-Protocol-Version": "the negotiated protocol version; an unsupported value is refused with 400",
    "Accept": "must list application/json and text/event-stream on POST, text/event-stream on GET",
    "Content-Type": "must be application/json on POST",
    "Last-Event-ID": "on GET, resumes an SSE stream after this event id (replayed from the event log)",
    "Origin": "when present, must equal an allowed origin exactly, else 403",
    "Host": "must be an allowed host name, else 421",
    "X-Request-Id": "correlation id; kept when it is a safe token of at most 128 characters, minted otherwise",
    "traceparent": "W3C trace context; the request continues the caller's trace",
    "tracestate": "W3C trace context vendor data, propagated with traceparent",
    "Access-Control-Request-Method": "marks a CORS preflight (OPTIONS) from an allowed origin",
    "X-Forwarded-For": "the client address, trusted only from the configured proxy addresses",
    "X-Forwarded-Proto": "the original scheme, trusted only from the configured proxy addresses",
}
HEADERS_WRITTEN = {
    "MCP-Session-Id": "the new session's id, on the initialize response",
    "X-Request-Id": "the request's correlation id, on every response",
    "WWW-Authenticate": "Bearer challenge on 401 and 403 with realm, resource_metadata and error (RFC 6750)",
    "Retry-After": "seconds to wait, on 429 (rate, concurrency or session limit) and 503",
    "X-Accel-Buffering": "`no` on SSE responses, so proxies do not buffer the stream",
    "Cache-Control": "`no-cache, no-transform` on SSE responses",
    "Access-Control-Allow-Origin": "CORS: the caller's origin, when it is allowed",
    "Access-Control-Allow-Methods": "CORS preflight: GET, POST, DELETE, OPTIONS",
    "Access-Control-Allow-Headers": "CORS preflight: the request headers above that a browser may send",
    "Access-Control-Expose-Headers": "CORS: MCP-Session-Id, MCP-Protocol-Version, X-Request-Id",
    "Access-Control-Max-Age": "CORS preflight: how long a browser may cache the answer",
    "Vary": "`Origin` on responses that carry CORS headers",
}


def deprecated(description: str, *, deadline: str) -> str:
    """The description of a deprecated tool, prompt or resource (corporate §17.2)."""
    return with_deprecation(description, deadline)


@dataclass(frozen=True)
class CorporateProfile:
    """What the corporate texts say about this deployment; built by the app from its settings."""

    service: str
    version: str
    issuer: str
    audience: str
    auth_mode: str
    scopes_used: tuple[str, ...]
    readme_text: str
    brief_override: str | None = None
    prompt_override: str | None = None


class CorporatePlugin:
    """Registers `agent_brief`, `agent_prompt` and the corporate meta resources."""

    name = "corporate"

    def __init__(self, profile: CorporateProfile) -> None:
        self.profile = profile

    def register(self, registry: Registry) -> None:
        guide = AgentGuide(registry, self.profile)
        service = self.profile.service
        registry.add_prompt(
            Prompt(
                "agent_brief",
                f"Routing brief for {service}: its domain, when to pick it and when not, key constraints.",
                _prompt(guide.brief),
                title="Agent brief",
            )
        )
        registry.add_prompt(
            Prompt(
                "agent_prompt",
                f"Operating instructions for {service}: every tool, security constraints, answer format, examples.",
                _prompt(guide.prompt),
                title="Agent prompt",
            )
        )
        for resource in self._resources(guide):
            registry.add_resource(resource)
        # The same operating instructions as a skill (docs/discovery.md, "Skills"), written at each read.
        registry.add_skill(
            Skill.of(
                "agent-guide",
                f"Operating instructions for {service}: every tool, security constraints, answer format, examples.",
                guide.prompt,
                metadata={"plugin": self.name},
            )
        )

    def _resources(self, guide: AgentGuide) -> list[Resource]:
        profile = self.profile
        auth = _json(auth_document(profile))
        headers = _json(headers_document())
        version = _json({"name": profile.service, "version": profile.version})
        specs: list[tuple[str, str, str, str, Callable[[], str]]] = [
            (f"{profile.service}://agent/brief", "agent-brief", "Mirror of agent_brief.", MARKDOWN_TYPE, guide.brief),
            (
                f"{profile.service}://agent/prompt",
                "agent-prompt",
                "Mirror of agent_prompt.",
                MARKDOWN_TYPE,
                guide.prompt,
            ),
            ("use://auth", "auth", "Auth scheme, token kinds, claims, scopes, refusals.", JSON_TYPE, lambda: auth),
            ("use://http-headers", "http-headers", "HTTP headers read and written.", JSON_TYPE, lambda: headers),
            ("project://version", "version", "Service name and version.", JSON_TYPE, lambda: version),
            ("doc://readme", "readme", "The service README.", MARKDOWN_TYPE, lambda: profile.readme_text),
        ]
        return [_resource(*spec) for spec in specs]


def _prompt(render: Callable[[], str]) -> Callable[[dict[str, str], Context], Awaitable[list[Content]]]:
    async def handler(arguments: dict[str, str], ctx: Context) -> list[Content]:
        return [message("user", text(render()))]

    return handler


def _resource(uri: str, name: str, description: str, mime_type: str, render: Callable[[], str]) -> Resource:
    async def reader(requested: str, ctx: Context) -> list[Content]:
        return [text_contents(uri, render(), mime_type)]

    return Resource(uri, name, reader, description=description, mime_type=mime_type)


def _json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False)


def auth_document(profile: CorporateProfile) -> dict[str, Any]:
    """`use://auth`: how to authenticate and where each refusal comes back (corporate §7, Appendix A)."""
    modes = [mode.strip() for mode in profile.auth_mode.replace(",", "+").split("+") if mode.strip()]
    return {
        "scheme": "Bearer",
        "header": "Authorization: Bearer <token>",
        "mode": profile.auth_mode,
        "tokenKinds": [TOKEN_KINDS.get(mode, mode) for mode in modes],
        "issuer": profile.issuer,
        "audience": profile.audience,
        "claims": CLAIMS,
        "scopes": list(profile.scopes_used),
        "tokenInQueryString": "refused",
        "protectedResourceMetadata": "/.well-known/oauth-protected-resource",
        "refusals": [
            {
                "when": "no token, or an invalid, expired or wrong-audience token",
                "where": 'HTTP 401 with WWW-Authenticate: Bearer (error="invalid_token" when one was sent)',
                "jsonrpcCode": -32000,
            },
            {
                "when": "the token cannot be checked now: the IdP is down, or this replica's budget of "
                "introspection calls is spent; the token was not judged, keep it and retry",
                "where": "HTTP 503 with Retry-After (no WWW-Authenticate)",
                "jsonrpcCode": -32006,
            },
            {
                "when": "the token lacks a scope required for the MCP endpoint",
                "where": 'HTTP 403 with WWW-Authenticate: Bearer error="insufficient_scope"',
                "jsonrpcCode": -32000,
            },
            {
                "when": "the token lacks a scope a tool needs",
                "where": "in-band: a tools/call result with isError: true naming the missing scope",
            },
            {
                "when": "the token lacks a scope a prompt or resource needs",
                "where": 'in-band: a JSON-RPC error with data.reason "insufficient_scope"',
                "jsonrpcCode": -32000,
            },
        ],
    }


def headers_document() -> dict[str, Any]:
    """`use://http-headers` (corporate §11.2: MUST when the service uses non-standard headers)."""
    return {
        "reads": [{"name": name, "description": description} for name, description in HEADERS_READ.items()],
        "writes": [{"name": name, "description": description} for name, description in HEADERS_WRITTEN.items()],
    }


def plugin(settings: Settings) -> CorporatePlugin:
    """The built-in instance, described from the settings it runs with."""
    auth = settings.auth
    modes = [
        mode
        for mode, on in (
            ("jwt-jwks", auth.jwks_url is not None),
            ("jwt-issuers", bool(auth.issuers)),
            ("jwt-dev-issuer", settings.server.dev),
            ("opaque", bool(auth.opaque_tokens or auth.opaque_tokens_file or auth.introspection_url)),
        )
        if on
    ]
    policy = auth.policy
    scopes = {*auth.required_scopes}
    for rules in (policy.tools, policy.prompts, policy.resources):
        scopes.update(scope for needed in rules.values() for scope in needed)
    return CorporatePlugin(
        CorporateProfile(
            service=settings.server.name,
            version=__version__,
            issuer=settings.issuer,
            audience=settings.audience,
            auth_mode="+".join(modes) or "none",
            scopes_used=tuple(sorted(scopes)),
            readme_text=readme(),
            brief_override=settings.corporate.agent_brief,
            prompt_override=settings.corporate.agent_prompt,
        )
    )


def readme() -> str:
    """The README as packaged: the distribution's long description (pyproject `readme`)."""
    try:
        return metadata("aql-mcp").get_payload() or ""  # type: ignore[attr-defined]
    except PackageNotFoundError:
        return ""
