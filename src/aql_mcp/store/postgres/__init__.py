"""The PostgreSQL engine (`store.url=postgresql://...`): any number of replicas share it."""

from aql_mcp.store.postgres.engine import PostgresOptions
from aql_mcp.store.postgres.store import PostgresStore

__all__ = ["PostgresOptions", "PostgresStore"]
