"""The legacy edge of `/mcp` (MCP 2025-11-25): the Streamable HTTP transport with `initialize`,
sessions, GET streams, `Last-Event-ID` resumption and the event log behind it."""
