"""MCP tasks as the end-to-end tests drive them: calls, polls, results."""

from __future__ import annotations

from typing import Any, Protocol

import httpx

from tests.support.modern import MODERN, modern_body, modern_headers
from tests.support.wait import until

DEADLINE = 20.0
EXTENSION = "io.modelcontextprotocol/tasks"
WITH_TASKS = {"elicitation": {}, "extensions": {EXTENSION: {}}}


class Endpoint(Protocol):
    """Where a request goes and who may send it: a server, or one replica of several."""

    @property
    def url(self) -> str: ...
    def token(self, subject: str) -> str: ...


def meta(caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": WITH_TASKS if caps is None else caps,
    }


def post(
    server: Endpoint,
    method: str,
    params: dict[str, Any],
    *,
    caller: str,
    caps: dict[str, Any] | None = None,
    name: str | None = None,
) -> httpx.Response:
    if name is None:
        name = params.get("name") if method == "tools/call" else params.get("taskId")
    headers = modern_headers(server.token(caller), method, name, arguments=params.get("arguments"))
    body = modern_body(method, params, meta(caps), 7)
    return httpx.post(server.url, json=body, headers=headers, timeout=DEADLINE)


def result_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


def call(server: Endpoint, tool: str, arguments: dict[str, Any], caller: str, **kw: Any) -> dict[str, Any]:
    return result_of(post(server, "tools/call", {"name": tool, "arguments": arguments}, caller=caller, **kw))


def get(server: Endpoint, task_id: str, caller: str) -> dict[str, Any]:
    return result_of(post(server, "tasks/get", {"taskId": task_id}, caller=caller))


def settled(server: Endpoint, task_id: str, caller: str, status: str | None = None) -> dict[str, Any]:
    """Poll `tasks/get` until the task ended (or reached `status`), as a client does."""
    seen: dict[str, Any] = {}

    def reached() -> bool:
        seen.update(get(server, task_id, caller))
        return seen["status"] == status or seen["status"] in ("completed", "failed", "cancelled")

    until(reached, f"task {task_id} did not settle", seconds=DEADLINE)
    return seen
