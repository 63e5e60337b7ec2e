"""The fixtures the conformance suite (0.2.0-alpha.12) calls in its Tasks extension scenarios
(`tasks-*`, SEP-2663): a plain tool, tools that run as tasks, fail, ask the client, or ask first by
MRTR and then become a task. Each runs on the service's own task runner
(endpoint/modern/tasks_extension.py) and asks through the `Context` as any plugin would.
Registered by the conformance plugin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from aql_mcp.exceptions import ToolError
from aql_mcp.protocol.context import Context
from aql_mcp.protocol.primitives import Registry, Tool

# The suite's failing job reports its error "after ~1s"; less keeps the suite quick and still async.
FAILING_DELAY = 0.5
# The tool that becomes a task after an MRTR round works this long before it answers.
WORK_DELAY = 0.2
MAX_SECONDS = 3600


def _form(question: str, field: str, kind: str = "string") -> dict[str, Any]:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return {"method": "elicitation/create", "params": {"mode": "form", "message": question, "requestedSchema": schema}}


def _accepted(answer: Mapping[str, Any], field: str) -> str:
    content = answer.get("content") if answer.get("action") == "accept" else None
    return str(content.get(field, "")) if isinstance(content, dict) else ""


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


async def greet(arguments: dict[str, Any], ctx: Context) -> str:
    return f"Hello, {arguments['name']}!"


async def slow_compute(arguments: dict[str, Any], ctx: Context) -> str:
    seconds = arguments.get("seconds", 1)
    await anyio.sleep(seconds)
    return f"Computed {arguments.get('label', 'result')} after {seconds}s"


async def failing_job(arguments: dict[str, Any], ctx: Context) -> str:
    await anyio.sleep(FAILING_DELAY)
    raise ToolError("The job failed: the input could not be processed")


async def protocol_error_job(arguments: dict[str, Any], ctx: Context) -> str:
    raise RuntimeError("fixture crash")  # an internal failure: the task is `failed`, nothing leaks


async def confirm_delete(arguments: dict[str, Any], ctx: Context) -> str:
    question = _form(f"Delete {arguments['filename']}?", "confirm", "boolean")
    answer = (await ctx.ask({"confirm_delete": question}))["confirm_delete"]
    confirmed = answer.get("action") == "accept"
    return f"Deleted {arguments['filename']}" if confirmed else f"Kept {arguments['filename']}"


async def multi_input(arguments: dict[str, Any], ctx: Context) -> str:
    # Both questions at once, so both are pending together (partial answers, SEP-2663).
    answers = await ctx.ask({"first": _form("First name?", "name"), "second": _form("Second name?", "name")})
    return f"Got {_accepted(answers['first'], 'name')} and {_accepted(answers['second'], 'name')}"


async def ask_user_name(arguments: dict[str, Any], ctx: Context) -> None:
    """Before the task: an MRTR round for the name, kept in the memo the task starts with."""
    if "user_name" not in ctx.memo:
        answers = await ctx.ask({"user_name": _form("What is your name?", "name")})
        ctx.memo["user_name"] = _accepted(answers["user_name"], "name")


async def greet_after_asking(arguments: dict[str, Any], ctx: Context) -> str:
    await ask_user_name(arguments, ctx)  # nothing to ask when `before_task` did it
    await anyio.sleep(WORK_DELAY)
    return f"Hello, {ctx.memo['user_name']}! Your task is done."


def register(registry: Registry) -> None:
    seconds = {"type": "number", "minimum": 0, "maximum": MAX_SECONDS}
    filename = _object({"filename": {"type": "string"}}, ["filename"])
    empty = _object({}, [])
    for tool in (
        Tool("greet", "Greets by name, at once", greet, _object({"name": {"type": "string"}}, ["name"])),
        Tool(
            "slow_compute",
            "Sleeps `seconds` and reports; a task when the client declares the Tasks extension",
            slow_compute,
            _object({"seconds": seconds, "label": {"type": "string"}}, []),
            task_support="optional",
        ),
        Tool("failing_job", "Fails with a tool error; a task only", failing_job, empty, task_support="required"),
        Tool("protocol_error_job", "Crashes inside the task", protocol_error_job, empty, task_support="optional"),
        Tool("confirm_delete", "Asks to confirm, then reports", confirm_delete, filename, task_support="optional"),
        Tool("multi_input", "Asks two questions at once", multi_input, empty, task_support="optional"),
        Tool(
            "test_tool_with_task",
            "Asks a name by MRTR, then greets from a task",
            greet_after_asking,
            empty,
            task_support="required",
            before_task=ask_user_name,
        ),
    ):
        registry.add_tool(tool)
