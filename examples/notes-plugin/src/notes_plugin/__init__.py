"""An example aql-mcp plugin with a table of its own: short notes, each caller's own.

Three MCP-AQL operations (`add_note`, `list_notes`, `delete_note`) over one table, `notes`, which the
plugin declares with its migrations once per engine (`tables.py`). The service creates the table
when its store opens, on SQLite or on PostgreSQL, and records the plugin's schema version apart from
the core's, so a later release of this package adds its own migrations without touching the
service's. It imports from `aql_mcp.plugin` only (docs/plugins.md, "A plugin's own tables").
"""

from __future__ import annotations

import secrets
import time

from pydantic import Field

from aql_mcp.plugin import (
    NOT_FOUND_RESOURCE,
    PERMISSION_DENIED,
    Call,
    NoParams,
    Operation,
    OperationError,
    Params,
    PluginOperations,
    TrustLevel,
)
from notes_plugin.tables import NOTES, Note, NoteStore


class AddNote(Params):
    text: str = Field(min_length=1, max_length=2000, description="What the note says")


class DeleteNote(Params):
    id: str = Field(min_length=1, max_length=64, description="The note's id, as add_note returned it")


def owner(call: Call) -> str:
    """Notes belong to the caller: the digest of its token's subject, never the subject itself."""
    if call.principal is None:
        raise OperationError(PERMISSION_DENIED, "Notes need an authenticated caller")
    return call.principal.digest


def wire(note: Note) -> dict[str, object]:
    return {"id": note.id, "text": note.text, "created_at": note.created_at}


class NotesPlugin:
    """Registers the operations over the facet its declaration binds to the service's store."""

    name = "notes"
    trust: TrustLevel = "validated"

    def register_operations(self, operations: PluginOperations) -> None:
        notes: NoteStore = operations.tables(NOTES)

        async def add_note(params: AddNote, call: Call) -> dict[str, object]:
            note = Note(id=f"note_{secrets.token_hex(8)}", text=params.text, created_at=time.time())
            await notes.add(owner(call), note)
            return wire(note)

        async def list_notes(params: NoParams, call: Call) -> dict[str, object]:
            return {"notes": [wire(note) for note in await notes.list(owner(call))]}

        async def delete_note(params: DeleteNote, call: Call) -> dict[str, object]:
            if not await notes.delete(owner(call), params.id):
                raise OperationError(NOT_FOUND_RESOURCE, f"No note {params.id}")
            return {"deleted": params.id}

        operations.add(Operation("add_note", "CREATE", "Keep a short note.", add_note, AddNote))
        operations.add(Operation("list_notes", "READ", "The caller's notes, newest first.", list_notes))
        operations.add(Operation("delete_note", "DELETE", "Delete one of the caller's notes.", delete_note, DeleteNote))


plugin = NotesPlugin()
