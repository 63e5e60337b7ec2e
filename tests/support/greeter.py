"""A third-party plugin as its author would write it: every name from `aql_mcp.plugin`, nothing
else from `aql_mcp` (`tests.support.greeter:plugin`). Operations first, then a typed plain tool,
a prompt and a resource; the tests of the public module, typed tools and the test client use it."""

from __future__ import annotations

import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from aql_mcp.plugin import (
    NOT_FOUND_RESOURCE,
    Call,
    Content,
    Context,
    Example,
    Operation,
    OperationError,
    Params,
    PluginOperations,
    Prompt,
    PromptArgument,
    Registry,
    Resource,
    Returns,
    Tool,
    TrustLevel,
    message,
    text,
    text_contents,
)

GREETINGS = {"en": "Hello", "fr": "Bonjour"}


class Greet(Params):
    name: str = Field(description="Who to greet.", min_length=1, max_length=64)
    language: Literal["en", "fr"] = Field(default="en", description="Language of the greeting.")


class Forget(Params):
    name: str = Field(description="Whose greeting to forget.")


class Greeting(BaseModel):
    text: str
    on: datetime.date


async def greet(params: Greet, call: Call) -> dict[str, str]:
    who = call.principal.subject if call.principal else "nobody"
    return {"greeting": f"{GREETINGS[params.language]}, {params.name}!", "asked_by": who}


async def forget(params: Forget, call: Call) -> dict[str, str]:
    raise OperationError(NOT_FOUND_RESOURCE, f"No greeting for '{params.name}'", {"name": params.name})


async def shout(
    words: Annotated[str, Field(description="What to shout.", max_length=200)],
    times: Annotated[int, Field(description="How many times.", ge=1, le=5)] = 1,
    on: Annotated[datetime.date | None, Field(description="The day to date it (YYYY-MM-DD).")] = None,
    *,
    ctx: Context,
) -> Greeting:
    """Shouts the words in capitals, `times` times. Read-only, no side effects."""
    await ctx.log("info", {"shouting": times})
    return Greeting(text=" ".join([words.upper()] * times), on=on or datetime.date(2026, 1, 1))


async def welcome(arguments: dict[str, str], ctx: Context) -> list[Content]:
    return [message("user", text(f"Welcome {arguments.get('name', 'friend')} to the greeter."))]


async def about(uri: str, ctx: Context) -> list[Content]:
    return [text_contents(uri, "The greeter greets.", "text/plain")]


class Greeter:
    """Both plugin protocols: operations (`greet`, `forget_greeting`) and a tool, prompt, resource."""

    name = "greeter"
    trust: TrustLevel = "validated"

    def register_operations(self, operations: PluginOperations) -> None:
        operations.add(
            Operation(
                "greet",
                "READ",
                "Greet someone by name.",
                greet,
                Greet,
                Returns("Greeting"),
                examples=(Example({"operation": "greet", "params": {"name": "Ada"}}),),
            )
        )
        operations.add(
            Operation(
                "forget_greeting",
                "DELETE",
                "Forget someone's greeting.",
                forget,
                Forget,
                side_effects="Removes the greeting.",
            )
        )

    def register(self, registry: Registry) -> None:
        registry.add_tool(Tool.from_function(shout, annotations={"readOnlyHint": True}))
        registry.add_prompt(
            Prompt("welcome", "A welcome message.", welcome, (PromptArgument("name", "Who to welcome"),))
        )
        registry.add_resource(Resource("greeter://about", "about", about, "What the greeter does.", "text/plain"))


plugin = Greeter()
