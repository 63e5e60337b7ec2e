"""The MCP-AQL execution safety loop: evaluation, out-of-band verification and the operator desk."""
