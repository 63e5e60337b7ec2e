"""Where a change is announced: to the sessions of the legacy era and to the listen streams of the
modern era, on this replica and on every other one sharing the store.

- Legacy sessions hear of it on every replica too (endpoint/legacy/sessions.py): a resource update
  goes to every session subscribed in the store, appended to its GET stream's event log wherever
  that stream is held; a list change goes out as the `broadcast` signal below, and each replica
  writes it to the sessions whose GET stream is open there, so a session hears it once.
- Listen streams (endpoint/modern/listeners.py) hear of it on every replica: the change is offered to the ones
  here at once and published on the store's bus as a `broadcast` signal, which every other
  replica offers to its own. The PostgreSQL bus writes such a signal to its `signals` table before
  waking the others, so a replica whose listener connection dropped reads it after reconnecting;
  the SQLite engine serves one replica, which has nobody to tell. A replica ignores its own
  signals, so each listener hears of a change once.

- A task's status change (SEP-2663 task status notifications) is reported by the replica running
  the task (endpoint/modern/tasks_extension.py `on_status`), or, for a task a plugin maps (an
  execution), by the replica that changed it (`TaskStatusReporter`), and travels the same way, as a
  `broadcast` of `notifications/tasks` naming the task and its owner: only the owner's listen
  streams that asked for that task hear of it, and each reads the task from the store to write it.

A change that cannot be published (the store is failing) still reaches the listeners here; it is
logged, never raised into the tool that made it.
"""

from __future__ import annotations

import orjson
import structlog

from aql_mcp.endpoint.legacy.sessions import SessionManager
from aql_mcp.endpoint.modern.listeners import Listeners
from aql_mcp.endpoint.modern.subscription import FLAGS, RESOURCE_UPDATED, TASK_STATUS, Change
from aql_mcp.endpoint.modern.tasks_extension import StatusChange
from aql_mcp.exceptions import StoreError
from aql_mcp.store.base import Bus, Signal

log = structlog.get_logger("aql_mcp.notifier")
# What a legacy session's GET stream is told of from a `broadcast` signal.
LIST_CHANGES = frozenset(FLAGS.values())


class Notifier:
    """The `ResourceHub` of both eras, and the bus handler of this replica."""

    def __init__(self, *, sessions: SessionManager, listeners: Listeners, bus: Bus) -> None:
        self._sessions = sessions
        self._listeners = listeners
        self._bus = bus

    async def resource_updated(self, uri: str) -> None:
        """Resource `uri` changed: tell the sessions subscribed to it and the streams listening for it."""
        await self._sessions.resource_updated(uri)
        await self._announce(Change(RESOURCE_UPDATED, uri))

    async def list_changed(self, method: str) -> None:
        """A list changed (`method` is its `notifications/*/list_changed`)."""
        await self._sessions.broadcast(method)
        await self._announce(Change(method))

    async def task_status(self, change: StatusChange) -> None:
        """A task's status changed (the runner's `on_status`): tell its owner's streams that asked."""
        await self.task_changed(change.task_id, change.owner)

    async def task_changed(self, task_id: str, owner: str) -> None:
        """Task `task_id` of `owner` changed status: the runner's, or a plugin's mapped task
        (protocol/task_mapping.py `TaskStatusReporter`)."""
        await self._announce(Change(TASK_STATUS, task_id, owner))

    async def on_signal(self, signal: Signal) -> None:
        """A signal from another replica: a broadcast for the listen streams here (and, for a list
        change, for the GET streams of the sessions here), anything else for the sessions."""
        if signal.kind != "broadcast":
            await self._sessions.on_signal(signal)
            return
        change = _change(signal)
        self._listeners.deliver(change)
        if change.method in LIST_CHANGES:
            # A resource update reached the subscribed sessions through their event logs already.
            await self._sessions.broadcast(change.method)

    async def _announce(self, change: Change) -> None:
        self._listeners.deliver(change)
        if change.method == TASK_STATUS:
            payload = orjson.dumps({"taskId": change.uri, "owner": change.owner})
        else:
            payload = change.uri.encode("utf-8")
        try:
            await self._bus.publish(Signal("broadcast", target=change.method, payload=payload))
        except StoreError:
            log.warning("change_not_published", method=change.method)


def _change(signal: Signal) -> Change:
    """The change a `broadcast` signal carries (`_announce` wrote it)."""
    if signal.target != TASK_STATUS:
        return Change(signal.target, signal.payload.decode("utf-8", "replace"))
    task = orjson.loads(signal.payload)
    return Change(TASK_STATUS, str(task["taskId"]), str(task["owner"]))
