"""MCP-AQL 1.0.0-draft: operations from plugins behind a few semantic endpoint tools."""
