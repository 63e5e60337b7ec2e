"""The MCP endpoint's own guards around the era router, outermost first: Host -> authentication ->
rate limit -> protocol version (app.py assembles them; `/mcp` is reached from the global middleware
directly, middleware/shortcut.py). The rate limit also guards the discovery documents."""

from __future__ import annotations

from collections.abc import Callable

from starlette.middleware import Middleware
from starlette.types import ASGIApp

from aql_mcp.lifespan import Services
from aql_mcp.middleware.auth import AuthMiddleware
from aql_mcp.middleware.host import HostMiddleware
from aql_mcp.middleware.protocol_version import ProtocolVersionMiddleware
from aql_mcp.middleware.rate_limit import RateLimitMiddleware


def mcp_endpoint(services: Services, router: ASGIApp) -> ASGIApp:
    """`/mcp`: its own guards around the era router (reached from the global middleware directly,
    middleware/shortcut.py; its route stays for Starlette's `/mcp/` redirect)."""
    endpoint = router
    for cls, args, kwargs in reversed(mcp_middleware(services)):
        endpoint = cls(endpoint, *args, **kwargs)
    return endpoint


def mcp_middleware(services: Services) -> list[Middleware]:
    """`/mcp`'s own guards, outermost first: Host, authentication, rate limit, protocol version."""
    settings = services.settings
    return [
        Middleware(HostMiddleware, allowed_hosts=settings.allowed_hosts),
        Middleware(
            AuthMiddleware,
            verifier=services.authentication.verifier,
            realm=settings.server.name,
            resource_metadata=f"{settings.base_url}/.well-known/oauth-protected-resource",
            required_scopes=settings.auth.required_scopes,
            anonymous=settings.auth.anonymous_listing,
            on_failure=auth_failed(services),
        ),
        rate_limit(services),
        Middleware(ProtocolVersionMiddleware, modern_enabled=settings.mcp.modern_era),
    ]


def rate_limit(services: Services) -> Middleware:
    """The caller's rate budget and concurrency cap (`limits.*`), one per replica share."""
    settings = services.settings
    return Middleware(
        RateLimitMiddleware,
        rate_per_second=settings.limits.rate_per_second,
        burst=settings.limits.rate_burst,
        max_concurrent=settings.limits.max_concurrent_calls,
        share=services.share,
        on_refusal=services.telemetry.metrics.limit_event,
        on_audit=lambda budget, key, path: services.audit.offer(
            "rate_limit", operation=path, principal=key, outcome="refused", code=budget
        ),
    )


def auth_failed(services: Services) -> Callable[[str], None]:
    """What the authentication middleware tells of a refusal: the metric, and an `auth_failure`
    record (droppable: failures can come in floods) whose subject is `anonymous` whatever the token
    said, since nothing in a refused token is trusted (docs/audit.md)."""
    count = services.telemetry.metrics.auth_failure

    def failed(reason: str) -> None:
        count(reason)
        services.audit.offer("auth_failure", operation="authenticate", principal="anonymous", outcome=reason)

    return failed
