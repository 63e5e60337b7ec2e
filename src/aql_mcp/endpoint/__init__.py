"""`/mcp`: the era router and what both eras' edges share (status codes, media types, SSE framing,
the notifier). `legacy/` is the 2025-11-25 edge, `modern/` the 2026-07-28 one (docs/eras.md)."""
