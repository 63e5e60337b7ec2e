"""What an operation is: its name, category, parameters, danger level and handler (MCP-AQL §6, §8)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aql_mcp.auth.principal import Principal

# The parameter models' base is the protocol layer's (typed tools use it too); offered here, where
# plugins and operations look for it.
from aql_mcp.protocol.parameter_models import Params as Params

# The trust levels are a setting (`aql.max_trust`) before they are an operation's: defined with the
# settings, and offered here too, where plugins look for the names of the MCP-AQL layer.
from aql_mcp.settings import TRUST_LEVELS as TRUST_LEVELS
from aql_mcp.settings import TrustLevel as TrustLevel

if TYPE_CHECKING:
    from aql_mcp.protocol.context import Context

Category = Literal["CREATE", "READ", "UPDATE", "DELETE", "EXECUTE"]

# MCP-AQL danger levels §2.1, in increasing order.
DangerLevel = Literal["safe", "reversible", "destructive", "dangerous", "forbidden"]
DANGER_LEVELS: tuple[DangerLevel, ...] = ("safe", "reversible", "destructive", "dangerous", "forbidden")

# MCP-AQL danger levels §3.3: the level an operation has when it declares none.
DEFAULT_DANGER: Mapping[Category, DangerLevel] = {
    "READ": "safe",
    "CREATE": "reversible",
    "UPDATE": "reversible",
    "DELETE": "destructive",
    "EXECUTE": "reversible",
}
RISK_WORDS: Mapping[DangerLevel, str] = {
    "safe": "none",
    "reversible": "low",
    "destructive": "medium",
    "dangerous": "high",
    "forbidden": "critical",
}


class NoParams(Params):
    """An operation without parameters."""


@dataclass(frozen=True, slots=True)
class Example:
    request: dict[str, Any]
    description: str = ""

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request}
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """Execution lifecycle of an EXECUTE operation (MCP-AQL §8.4.5)."""

    states: tuple[str, ...] = ("pending", "running", "completed", "failed", "cancelled")
    supports_cancel: bool = False
    supports_retry: bool = False
    progress_reporting: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {
            "states": list(self.states),
            "supports_cancel": self.supports_cancel,
            "supports_retry": self.supports_retry,
            "progress_reporting": self.progress_reporting,
        }


@dataclass(frozen=True, slots=True)
class Returns:
    """The return type as introspection's TypeInfo names it."""

    name: str
    kind: Literal["enum", "object", "scalar", "union"] = "object"
    description: str = ""

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True, slots=True)
class TypeDef:
    """An adapter type for `introspect` `query: "types"`; `detail` carries values/fields/members."""

    name: str
    kind: Literal["enum", "object", "scalar", "union"]
    description: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.description:
            out["description"] = self.description
        return out

    def details(self) -> dict[str, Any]:
        out = self.summary()
        if self.kind == "enum":
            out["values"] = list(self.detail.get("values", ()))
        elif self.kind == "object":
            out["fields"] = list(self.detail.get("fields", ()))
        elif self.kind == "union":
            out["members"] = list(self.detail.get("members", ()))
        return out


@dataclass(slots=True)
class Call:
    """Who calls an operation, from which session, with the MCP request context for progress and elicitation."""

    principal: Principal | None
    session_id: str | None
    ctx: Context
    batch: bool = False
    # The item's own parameters as sent: the router sets them for the audit record's digest.
    params: Any = None


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a collection: the router fits it to the result limit and writes `pageInfo`.

    `cursors[i]` continues after `items[i]`; `has_next`/`has_previous` describe the page as the
    handler built it, before any truncation.
    """

    items: list[dict[str, Any]]
    cursors: list[str]
    has_next: bool
    has_previous: bool
    total_count: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Outcome:
    """Data with warnings (MCP-AQL warnings)."""

    data: Any
    warnings: tuple[dict[str, Any], ...] = ()


Handler = Callable[[Any, Call], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation: registered by a plugin, routed by name, described by introspection.

    `params` is a pydantic model (a `Params` subclass) whose fields carry descriptions; the handler
    gets an instance of it. `critical` names the parameters a confirmation token is bound to
    (default: all but field selection). `field_presets` turns on field selection (`fields`).
    `discovery` puts a READ operation in the `discover` family of the dqmo profile.
    `parameter_hints` adds ParameterInfo keys per parameter that the model cannot know, such as
    defaults and descriptions taken from the settings (a page size default, the size it clamps to).
    `bare_errors` answers failures with `code` and `message` only (the introspection response
    schema's IntrospectionError). `cost` is what one call takes from its caller's rate budget, an
    integer from 1 to 100 checked at registration: more than 1 for an operation that does the work
    of many calls, such as an import or an export (operations/cost.py; docs/aql.md, "Cost of a call").
    """

    name: str
    category: Category
    description: str
    handler: Handler
    params: type[Params] = NoParams
    returns: Returns = Returns("object")
    danger: DangerLevel | None = None
    danger_reasons: tuple[str, ...] = ()
    side_effects: str = ""
    examples: tuple[Example, ...] = ()
    lifecycle: Lifecycle | None = None
    critical: tuple[str, ...] | None = None
    field_presets: Mapping[str, tuple[str, ...] | None] | None = None
    default_preset: str = "full"
    discovery: bool = False
    idempotent: bool | None = None
    reserved: bool = False
    parameter_hints: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    bare_errors: bool = False
    cost: int = 1

    @property
    def danger_level(self) -> DangerLevel:
        return self.danger or DEFAULT_DANGER[self.category]

    @property
    def is_idempotent(self) -> bool:
        if self.idempotent is not None:
            return self.idempotent
        return self.category in ("READ", "DELETE")

    @property
    def is_destructive(self) -> bool:
        """Whether the operation may remove or irreversibly change state: its danger level is
        `destructive` or above (MCP-AQL danger levels §2.2), so introspection's `permissions` and the
        level its description states never disagree (an import only adds records: `reversible`)."""
        return DANGER_LEVELS.index(self.danger_level) >= DANGER_LEVELS.index("destructive")
