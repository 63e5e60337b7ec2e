"""The audit trail: durable, tamper-evident records of every decision (docs/audit.md).

`record` is what one holds and how it is sealed into its chain, `writer` batches records into the
store, `verifier` walks the chains, `exporter` prints them as NDJSON, `commands` is `aql-mcp audit`.
"""
