"""Test support: a real server process, an in-process ASGI client, MCP message helpers."""
