"""The embedded SQLite engine (the default: `store.url` empty)."""

from aql_mcp.store.sqlite.schema import MIGRATIONS, migrate
from aql_mcp.store.sqlite.store import SqliteStore

__all__ = ["MIGRATIONS", "SqliteStore", "migrate"]
