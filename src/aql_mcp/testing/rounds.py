"""The fixtures the conformance suite (0.2.0-alpha.12, MCP 2026-07-28) calls to exercise rounds:
multi round-trip requests (`input_required`), client capabilities and request-scoped logging.

Each asks through the `Context` exactly as a plugin would (`ask`, `elicit`, `sample`,
`list_roots`), so the suite checks the service's own MRTR path, not a canned answer: the
`input_required` result, its signed `requestState` and the retry all come from `endpoint/modern/endpoint.py`,
`endpoint/modern/rounds.py` and `endpoint/modern/request_state.py`. Registered by the conformance plugin.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio

from aql_mcp.protocol.content import Content, message, text
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Prompt, Registry, Tool

STEP_DELAY = 0.05


def _form(message_text: str, field: str, kind: str = "string") -> dict[str, Any]:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message_text, "requestedSchema": schema},
    }


def _question(prompt: str, max_tokens: int) -> dict[str, Any]:
    content = {"type": "text", "text": prompt}
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": content}], "maxTokens": max_tokens},
    }


ROOTS = {"method": "roots/list", "params": {}}


def _accepted(answer: Mapping[str, Any], field: str) -> str:
    content = answer.get("content") if answer.get("action") == "accept" else None
    return str((content or {}).get(field, "")) if isinstance(content, dict) else ""


def _sampled(answer: Mapping[str, Any]) -> str:
    blocks = answer.get("content")
    blocks = [blocks] if isinstance(blocks, dict) else blocks if isinstance(blocks, list) else []
    return " ".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))


async def elicitation(_arguments: dict[str, Any], ctx: Context) -> str:
    answers = await ctx.ask({"user_name": _form("What is your name?", "name")})
    return f"Hello, {_accepted(answers['user_name'], 'name')}!"


async def sampling(_arguments: dict[str, Any], ctx: Context) -> str:
    answers = await ctx.ask({"capital_question": _question("What is the capital of France?", 100)})
    return f"The model said: {_sampled(answers['capital_question'])}"


async def list_roots(_arguments: dict[str, Any], ctx: Context) -> str:
    roots = (await ctx.ask({"client_roots": ROOTS}))["client_roots"].get("roots", [])
    uris = [root.get("uri") for root in roots if isinstance(root, dict)]
    return f"The client has {len(uris)} root(s): {json.dumps(uris)}"


async def request_state(_arguments: dict[str, Any], ctx: Context) -> str:
    answers = await ctx.ask({"confirm": _form("Please confirm", "ok", "boolean")})
    # Reaching here on a retry means the service verified the echoed requestState (or none was needed).
    return f"state-ok: confirmed={_accepted(answers['confirm'], 'ok')}"


async def multiple_inputs(_arguments: dict[str, Any], ctx: Context) -> str:
    answers = await ctx.ask(
        {
            "user_name": _form("What is your name?", "name"),
            "greeting": _question("Generate a greeting", 50),
            "client_roots": ROOTS,
        }
    )
    roots = answers["client_roots"].get("roots", [])
    name, greeting = _accepted(answers["user_name"], "name"), _sampled(answers["greeting"])
    return f"{greeting} {name} ({len(roots)} root(s))"


async def multi_round(_arguments: dict[str, Any], ctx: Context) -> str:
    name = _accepted((await ctx.ask({"step1": _form("Step 1: What is your name?", "name")}))["step1"], "name")
    color = _accepted(
        (await ctx.ask({"step2": _form("Step 2: What is your favorite color?", "color")}))["step2"], "color"
    )
    return f"{name} likes {color}"


async def tampered_state(_arguments: dict[str, Any], ctx: Context) -> str:
    answers = await ctx.ask({"confirm": _form("Please confirm", "ok", "boolean")})
    return f"confirmed={_accepted(answers['confirm'], 'ok')}"


async def capabilities(_arguments: dict[str, Any], ctx: Context) -> str:
    """Asks only what the request's client capabilities allow (mrtr: never an undeclared request)."""
    wanted: dict[str, dict[str, Any]] = {}
    if ctx.has_client_capability("elicitation"):
        wanted["user_name"] = _form("What is your name?", "name")
    if ctx.has_client_capability("sampling"):
        wanted["greeting"] = _question("Generate a greeting", 50)
    if ctx.has_client_capability("roots"):
        wanted["client_roots"] = ROOTS
    answers = await ctx.ask(wanted) if wanted else {}
    return f"Answered: {sorted(answers)}"


async def missing_capability(_arguments: dict[str, Any], ctx: Context) -> str:
    """Needs sampling: a request that does not declare it gets -32021 (2026-07-28 basic)."""
    answer = await ctx.sample(
        {"messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}], "maxTokens": 10}
    )
    return f"The model said: {_sampled(answer)}"


async def streaming_elicitation(_arguments: dict[str, Any], ctx: Context) -> str:
    """Reports progress, then asks: the question must end the request, never travel on its stream."""
    await ctx.progress(0, 1, "about to ask")
    answer = await ctx.elicit("What is your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    return f"Hello, {_accepted(answer, 'name')}!"


async def logging_tool(_arguments: dict[str, Any], ctx: Context) -> str:
    """Logs at every level; a request without `_meta` logLevel must receive none of them."""
    for level in ("debug", "info", "warning", "error"):
        await ctx.log(level, f"a {level} message", "conformance")
        await anyio.sleep(STEP_DELAY / 5)
    return "Logged at debug, info, warning and error"


async def prompt(arguments: dict[str, str], ctx: Context) -> list[Content]:
    answers = await ctx.ask({"user_context": _form("What context should the prompt use?", "context")})
    context = _accepted(answers["user_context"], "context")
    return [message("user", text(f"Use this context: {context}"))]


def register(registry: Registry) -> None:
    """Adds the round fixtures to the conformance plugin's registry."""
    for name, description, handler in (
        ("test_input_required_result_elicitation", "Asks the user's name (input_required)", elicitation),
        ("test_input_required_result_sampling", "Asks the client's model a question", sampling),
        ("test_input_required_result_list_roots", "Asks the client's roots", list_roots),
        ("test_input_required_result_request_state", "Asks a confirmation; checks the state", request_state),
        ("test_input_required_result_multiple_inputs", "Asks three questions at once", multiple_inputs),
        ("test_input_required_result_multi_round", "Asks two questions in two rounds", multi_round),
        ("test_input_required_result_tampered_state", "Asks a confirmation with a signed state", tampered_state),
        ("test_input_required_result_capabilities", "Asks only what the client declared", capabilities),
        ("test_missing_capability", "Needs the sampling capability", missing_capability),
        ("test_streaming_elicitation", "Reports progress, then asks the user", streaming_elicitation),
        ("test_logging_tool", "Logs at four levels", logging_tool),
    ):
        # The streaming tool declares what it asks for, so a request without it is refused before
        # its progress starts a stream (docs/eras.md, "Asking the client").
        needs = ("elicitation",) if handler is streaming_elicitation else ()
        registry.add_tool(Tool(name, description, handler, client_capabilities=needs))
    registry.add_prompt(Prompt("test_input_required_result_prompt", "A prompt that asks for context first", prompt))
