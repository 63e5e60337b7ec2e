"""A plugin whose operation and typed tools take dates, enums and UUIDs and return declared models,
as an author writes it from `aql_mcp.plugin` only (`tests.support.typed_tools:plugin`): the tests of
JSON-mode validation, output schemas, content detection and the agent prompt's types use it."""

from __future__ import annotations

import datetime
import enum
import uuid
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aql_mcp.plugin import Call, ConfigError, Context, Operation, Params, PluginOperations, Registry, Tool


class Color(enum.Enum):
    red = "red"
    blue = "blue"


class Booking(Params):
    on: datetime.date = Field(description="The day (YYYY-MM-DD).")
    color: Color = Field(description="The colour.")
    ref: uuid.UUID = Field(description="The reference.")


class Booked(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    day_of_week: str = Field(serialization_alias="dayOfWeek")
    color: Color


class Coded(BaseModel):
    code: str

    @field_validator("code")
    @classmethod
    def known(cls, value: str) -> str:
        raise ValueError(f"unknown code {value}")


def described(booking: Booking) -> dict[str, str]:
    return {"on": booking.on.isoformat(), "color": booking.color.value, "ref": str(booking.ref)}


async def book(params: Booking, call: Call) -> dict[str, str]:
    return described(params)


async def book_tool(params: Booking, ctx: Context) -> dict[str, str]:
    """Books a day (the whole arguments object as the operation's model). Read-only."""
    return described(params)


async def tint(
    on: Annotated[datetime.date, Field(description="The day.")],
    color: Annotated[Color, Field(description="The colour.")],
    ref: Annotated[uuid.UUID, Field(description="The reference.")],
) -> dict[str, str]:
    """Tints a day (one parameter each)."""
    return {"on": on.isoformat(), "color": color.value, "ref": str(ref)}


async def booked(on: Annotated[datetime.date, Field(description="The day.")]) -> Booked:
    """The weekday of a day, as a model with an alias."""
    return Booked(day_of_week=on.strftime("%A"), color=Color.red)


async def broken() -> Booked:
    """Returns what its own output schema refuses."""
    wrong: Any = {"dayOfWeek": 5, "secret_field": "hunter2"}
    return wrong  # type: ignore[no-any-return]


async def rows() -> list[dict[str, Any]]:
    """Rows whose items carry a `type` field of their own."""
    return [{"type": "user", "id": 1}]


async def nothing() -> list[int]:
    """An empty list."""
    return []


async def check(coded: Annotated[Coded, Field(description="A code.")]) -> str:
    """Checks a code with a validator that quotes it."""
    return "ok"


async def secret(key: Annotated[uuid.UUID, Field(description="Key.", json_schema_extra={"sensitive": True})]) -> str:
    """Takes a sensitive parameter (what JSON Schema lets through, pydantic refuses)."""
    return "ok"


async def optional(
    limit: Annotated[int | None, Field(description="Max.")] = None,
    color: Annotated[Color | None, Field(description="The colour.")] = None,
    ctx: Context | None = None,
) -> str:
    """Optional typed parameters and an optional context. Read-only."""
    return f"{limit} {color} {type(ctx).__name__}"


class TypedTools:
    name = "typed_tools"
    trust = "validated"

    def register_operations(self, operations: PluginOperations) -> None:
        operations.add(Operation("book_day", "READ", "Book a day.", book, Booking))

    def register(self, registry: Registry) -> None:
        read_only = {"readOnlyHint": True}
        registry.add_tool(Tool.from_function(book_tool, annotations=read_only))
        registry.add_tool(Tool.from_function(tint, annotations={"readOnlyHint": False, "destructiveHint": True}))
        for function in (booked, broken, rows, nothing, check, secret):
            registry.add_tool(Tool.from_function(function))


class OptionalTools:
    """A read-only tool with optional typed parameters and context, beside a destructive one."""

    name = "typed_optional"

    def register(self, registry: Registry) -> None:
        registry.add_tool(Tool.from_function(tint, annotations={"readOnlyHint": False, "destructiveHint": True}))
        registry.add_tool(Tool.from_function(optional, annotations={"readOnlyHint": True}))


plugin = TypedTools()


class RegionSettings(BaseModel):
    region: str = "nowhere"


class Refusing:
    """A plugin whose `configure` refuses its settings with the public `ConfigError`."""

    name = "refusing"
    settings_model = RegionSettings

    def configure(self, settings: RegionSettings) -> None:
        raise ConfigError(f"plugins.refusing.region: {settings.region!r} is not a region this plugin serves")

    def register(self, registry: Registry) -> None:
        """Never reached: `configure` refuses first."""


refusing = Refusing()
