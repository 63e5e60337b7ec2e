"""Executions (MCP-AQL §8.4): long imports and exports run in the background of the replica that
accepted them, their state kept in the store (docs/executions.md)."""
