"""The bus of the one SQLite replica: every session, stream and request is in this process, so
there is nobody to signal and the replica count is always one."""

from __future__ import annotations

from aql_mcp.store.base import Signal, SignalHandler


class LocalBus:
    def listen(self, handler: SignalHandler) -> None:
        return None

    async def publish(self, signal: Signal) -> None:
        return None

    async def gone(self, replica: str) -> bool:
        return False

    async def heartbeat(self, now: float) -> int:
        return 1
