"""X-Request-Id: accepted when it is a safe token, minted otherwise, returned on every response.

The id is bound to the log context for the whole request (corporate §15.1); the context starts
empty for every request, so nothing of one request's context leaks into another's lines.
"""

from __future__ import annotations

import os
import random
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aql_mcp.observability.logging import end_log_context, start_log_context
from aql_mcp.scope import REQUEST_ID_KEY, header

REQUEST_ID_HEADER = b"x-request-id"
SAFE_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")


# A request id correlates log lines; it guards nothing, so it needs no system entropy per request
# (a `getrandom` call each cost more than the rest of this layer): a generator seeded from it once.
_ids = random.Random()  # noqa: S311 - not a secret, see above
# A forked worker draws its own ids, not a copy of its parent's sequence.
os.register_at_fork(after_in_child=_ids.seed)


def new_request_id() -> str:
    """32 random hex digits: the shape of `uuid4().hex`."""
    return f"{_ids.getrandbits(128):032x}"


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        offered = header(scope, REQUEST_ID_HEADER)
        request_id = offered if offered and SAFE_ID.fullmatch(offered) else new_request_id()
        scope[REQUEST_ID_KEY] = request_id
        raw_id = request_id.encode("ascii")

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (REQUEST_ID_HEADER, raw_id)]
            await send(message)

        token = start_log_context(request_id=request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            end_log_context(token)
