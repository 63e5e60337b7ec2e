"""What a `subscriptions/listen` request asks to hear, and the changes a listener can be told of.

MCP 2026-07-28 basic/patterns/subscriptions, "Notification Filter": every notification type is
opt-in (`toolsListChanged`, `promptsListChanged`, `resourcesListChanged` and a list of resource
URIs for `notifications/resources/updated`); the server MUST NOT send a type the client did not
ask for. All fields are optional; a field of the wrong type is -32602, never ignored, so a client
cannot believe it subscribed to something it did not. Unknown fields are left out of the
acknowledgement, which lists what the server agreed to honour.

The Tasks extension (SEP-2663, "Task Status Notifications") adds `taskIds`: the tasks whose
status changes the client wants as `notifications/tasks`. Which of them the server agrees to (the
caller's own) is decided by the listen endpoint (endpoint/modern/listen.py), not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aql_mcp.exceptions import InvalidParams
from aql_mcp.protocol.resources import check_uri

META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
RESOURCES_CHANGED = "notifications/resources/list_changed"
RESOURCE_UPDATED = "notifications/resources/updated"
TASK_STATUS = "notifications/tasks"
# The filter's flags and the list-changed notification each one opts in to (schema `SubscriptionFilter`).
FLAGS = {
    "toolsListChanged": TOOLS_CHANGED,
    "promptsListChanged": PROMPTS_CHANGED,
    "resourcesListChanged": RESOURCES_CHANGED,
}
URIS = "resourceSubscriptions"
TASK_IDS = "taskIds"
# Ours are 32 hex digits; anything much longer names no task.
MAX_TASK_ID = 256


@dataclass(frozen=True, slots=True)
class Change:
    """One thing a listener may be told: a list changed (`uri` empty), resource `uri` was updated,
    or task `uri` of `owner` changed its status (the stream reads the task when it writes).

    Two equal changes say the same thing, so a listener that has not written the first yet writes
    it once (endpoint/modern/listeners.py)."""

    method: str
    uri: str = ""
    owner: str = ""

    def params(self) -> dict[str, Any]:
        return {"uri": self.uri} if self.uri else {}


@dataclass(frozen=True, slots=True)
class SubscriptionFilter:
    """The notification types one listen stream opted in to."""

    methods: frozenset[str] = frozenset()
    uris: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()

    def wants(self, change: Change) -> bool:
        if change.method == RESOURCE_UPDATED:
            return change.uri in self.uris
        if change.method == TASK_STATUS:
            return change.uri in self.task_ids
        return change.method in self.methods

    def to_wire(self) -> dict[str, Any]:
        """The acknowledged filter: the types honoured, each as the client spelled it."""
        out: dict[str, Any] = {flag: True for flag, method in FLAGS.items() if method in self.methods}
        if self.uris:
            out[URIS] = list(self.uris)
        if self.task_ids:
            out[TASK_IDS] = list(self.task_ids)
        return out


def parse_filter(params: Mapping[str, Any], *, max_uris: int) -> SubscriptionFilter:
    """The request's `notifications` filter; InvalidParams (-32602) naming the field at fault."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise InvalidParams(data={"field": "notifications", "reason": "required"})
    methods = set()
    for flag, method in FLAGS.items():
        value = wanted.get(flag, False)
        if not isinstance(value, bool):
            raise InvalidParams(data={"field": f"notifications.{flag}", "reason": "type"})
        if value:
            methods.add(method)
    uris = _uris(wanted.get(URIS, []), max_uris)
    return SubscriptionFilter(frozenset(methods), uris, _task_ids(wanted.get(TASK_IDS, []), max_uris))


def _uris(value: Any, max_uris: int) -> tuple[str, ...]:
    field = f"notifications.{URIS}"
    if not isinstance(value, list):
        raise InvalidParams(data={"field": field, "reason": "type"})
    uris = tuple(dict.fromkeys(check_uri(uri, field) for uri in value))
    if len(uris) > max_uris:
        raise InvalidParams(data={"field": field, "reason": "too_many", "max": max_uris})
    return uris


def _task_ids(value: Any, max_ids: int) -> tuple[str, ...]:
    """`taskIds`: task ids as `tasks/get` takes them, at most as many as resource URIs."""
    field = f"notifications.{TASK_IDS}"
    if not isinstance(value, list) or not all(isinstance(item, str) and 0 < len(item) <= MAX_TASK_ID for item in value):
        raise InvalidParams(data={"field": field, "reason": "type"})
    task_ids = tuple(dict.fromkeys(value))
    if len(task_ids) > max_ids:
        raise InvalidParams(data={"field": field, "reason": "too_many", "max": max_ids})
    return task_ids
