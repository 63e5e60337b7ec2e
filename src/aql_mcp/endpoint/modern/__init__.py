"""The modern edge of `/mcp` (MCP 2026-07-28): one request, one answer, no session; rounds of
`input_required`, `subscriptions/listen` and the Tasks extension."""
