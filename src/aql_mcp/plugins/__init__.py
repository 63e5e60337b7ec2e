"""The built-in plugins, one package each. They use the public plugin API (`aql_mcp.plugin`) as an
outside plugin does; the core never imports them (docs/architecture.md)."""
