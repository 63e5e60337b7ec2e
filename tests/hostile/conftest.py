"""Attacks on a real `aql-mcp serve` (issue 12): each test reproduces what a hostile caller or a broken
environment did to a replica, and pins the limit or refusal that now answers it.

Tests here start their own server with `tests.support.server.start_server` when they need settings of
their own, or use the module-scoped `server` fixture from `tests/conftest.py`.
"""
