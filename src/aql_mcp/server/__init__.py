"""The HTTP server under the app: connections and their limits, the connection table, the open
file limit, and graceful shutdown (docs/connections.md)."""
