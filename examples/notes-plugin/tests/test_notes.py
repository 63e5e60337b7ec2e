"""The example plugin through the real app in process (`aql_mcp.testing.client`), on the embedded
SQLite store. The service loading it from the installed package over HTTP, on SQLite and on
PostgreSQL, is the main repository's tests/plugin_host/test_entry_points.py."""

from __future__ import annotations

import pytest
from notes_plugin import NotesPlugin

from aql_mcp.testing.client import PluginClient, plugin_client

pytestmark = pytest.mark.anyio


async def delete(client: PluginClient, note_id: str) -> dict[str, object]:
    """A DELETE runs behind a confirmation token (the gatekeeper, MCP-AQL danger levels): the first
    call answers CONFIRMATION_REQUIRED with the token, the second presents it."""
    held = await client.operation("delete_note", {"id": note_id})
    assert held["error"]["code"] == "CONFIRMATION_REQUIRED"
    token = held["error"]["details"]["confirmation_token"]
    return await client.operation("delete_note", {"id": note_id, "confirmation_token": token})


async def test_a_note_is_kept_listed_newest_first_and_deleted() -> None:
    async with plugin_client(NotesPlugin()) as client:
        first = await client.operation("add_note", {"text": "buy milk"})
        second = await client.operation("add_note", {"text": "call Ada"})
        listed = await client.operation("list_notes", {})
        deleted = await delete(client, first["data"]["id"])
        after = await client.operation("list_notes", {})
    assert [note["text"] for note in listed["data"]["notes"]] == ["call Ada", "buy milk"]
    assert deleted == {"success": True, "data": {"deleted": first["data"]["id"]}}
    assert [note["id"] for note in after["data"]["notes"]] == [second["data"]["id"]]


async def test_another_caller_sees_none_of_the_notes_and_cannot_delete_them() -> None:
    async with plugin_client(NotesPlugin()) as client:
        note = await client.operation("add_note", {"text": "mine"})
        other = await client.as_user("someone-else")
        listed = await other.operation("list_notes", {})
        refused = await delete(other, note["data"]["id"])
    assert listed == {"success": True, "data": {"notes": []}}
    assert refused["error"]["code"] == "NOT_FOUND_RESOURCE"


async def test_an_empty_note_is_refused_as_invalid() -> None:
    async with plugin_client(NotesPlugin()) as client:
        envelope = await client.operation("add_note", {"text": ""})
    assert envelope["error"]["code"].startswith("VALIDATION_")
