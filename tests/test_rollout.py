"""A rolling restart loses no call (issue 23, "Rollouts lose nothing"; docs/connections.md "Rolling
restarts").

Three replicas on one PostgreSQL behind nginx running the site example. Clients of both eras call
steadily through the gateway: official `mcp` clients in 2025-11-25 sessions and in 2026-07-28
stateless mode, writing, reading and listing tools, while a legacy GET stream and a modern
`subscriptions/listen` stream wait for resource updates. Each replica in turn gets SIGTERM, drains,
exits and is started again on its port with the same settings; calls that take seconds are in
flight when it stops.

The gateway follows readiness, as a deployment's does: the endpoints controller is modelled
(tests/support/rollout.py `follow_readiness`): nginx's upstreams are the replicas whose `/ready`
answers 200, as Kubernetes keeps a Service's endpoints, and the drain outlasts that reaction. The
controller applies a change by reloading nginx, and a reloading nginx closes its idle client
connections, racing a client's next request on one: a trait of reloading nginx, not of the service
(ingress-nginx applies endpoint changes without a reload), so the gateway keeps no client
connection alive here.

A gateway with only its passive failover (no controller) is not held to zero here: a connection
the kernel accepts in the last instant before the port closes is reset with its request, and nginx
never repeats a sent POST. Measured: one 502 in 6,548 calls of one such run, none in others
(docs/connections.md, "Rolling restarts"). What the service does for that case (`Connection: close`
in the drain, the accept queue answered, streams ended after the port closes) is shown step by step
in tests/server/test_drain.py and tests/server/test_backlog.py.

The clients count every call and every failure: none may fail, the listeners must hear updates
after the last restart, and each restarted replica must serve calls again (nginx's access log).
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import anyio
import pytest

from tests.support.nginx import Gateway, running_gateway
from tests.support.replicas import Replicas, start_replicas
from tests.support.rollout import (
    Heard,
    Tally,
    follow_readiness,
    legacy_listener,
    legacy_load,
    modern_listener,
    modern_load,
)
from tests.support.wait import eventually, until

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

DRAIN_SECONDS = 1.0
SETTINGS = {
    "AQL_MCP_MCP__MODERN_ERA": "true",
    "AQL_MCP_SHUTDOWN__DRAIN_SECONDS": str(DRAIN_SECONDS),
    "AQL_MCP_SHUTDOWN__GRACE_SECONDS": "10",
    # The load is the test's, not an abuse to limit.
    "AQL_MCP_LIMITS__RATE_PER_SECOND": "1000",
    "AQL_MCP_LIMITS__RATE_BURST": "1000",
}
CLIENTS_PER_ERA = 2
# Calls made while the replicas restart, at the least: a rollout of three replicas takes seconds.
MINIMUM_CALLS = 150


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    root = tmp_path_factory.mktemp("rollout")
    with start_replicas(root, database, env=SETTINGS, share_request_state_key=True) as started:
        yield started


@pytest.fixture
def gateway(replicas: Replicas, tmp_path: Path) -> Iterator[Gateway]:
    # No client keep-alive: the controller's reloads would close idle client connections (above).
    with running_gateway(tmp_path / "nginx", replicas.ports, http_extra="keepalive_timeout 0;") as running:
        yield running


def restart_in_turn(replicas: Replicas, gateway: Gateway) -> list[int]:
    """SIGTERM each replica, wait for its exit, start it again; wait until it serves through the
    gateway. The exit codes, in order."""
    codes = []
    for server in replicas.servers:
        server.process.send_signal(signal.SIGTERM)
        codes.append(server.process.wait(timeout=60))
        server.start_again()
        message = f"the restarted replica on {server.port} served no call through the gateway"
        until(partial(served_since, gateway, server.port, len(gateway.access_log())), message, seconds=30)
    return codes


def served_since(gateway: Gateway, port: int, mark: int) -> bool:
    """Whether the gateway logged a call answered by the replica on `port` after its first `mark` lines."""
    upstream = f"upstream=127.0.0.1:{port} upstream_status=200"
    return any(line.startswith("POST") and upstream in line for line in gateway.access_log()[mark:])


async def test_restarting_every_replica_in_turn_fails_no_call_in_either_era(
    replicas: Replicas, gateway: Gateway
) -> None:
    tally, legacy_heard, modern_heard = Tally(), Heard(), Heard()
    draining: set[int] = set()
    async with anyio.create_task_group() as group:
        group.start_soon(follow_readiness, replicas, gateway, tally, draining)
        for _ in range(CLIENTS_PER_ERA):
            group.start_soon(legacy_load, replicas, gateway, tally)
            group.start_soon(modern_load, replicas, gateway, tally)
        group.start_soon(partial(legacy_load, slow=True), replicas, gateway, tally)
        group.start_soon(partial(modern_load, slow=True), replicas, gateway, tally)
        group.start_soon(legacy_listener, replicas, gateway, tally, legacy_heard)
        group.start_soon(modern_listener, replicas, gateway, tally, modern_heard)
        heard = (legacy_heard, modern_heard)
        await eventually(lambda: all(h.notifications for h in heard), "the listeners heard nothing", seconds=30)
        before = tally.total()
        codes = await anyio.to_thread.run_sync(restart_in_turn, replicas, gateway)
        during = tally.total() - before
        after = [h.notifications for h in heard]
        await eventually(
            lambda: all(h.notifications > n for h, n in zip(heard, after, strict=True)),
            "a listener heard nothing after the last restart",
            seconds=30,
        )
        tally.running = False

    summary = {
        "model": "controller",
        "calls": tally.total(),
        "during_restarts": during,
        "failures": len(tally.failures),
        **tally.calls,
    }
    summary |= {"legacy_heard": legacy_heard.notifications, "modern_heard": modern_heard.notifications}
    summary |= {"modern_listen_streams": modern_heard.streams}
    print("rollout:", json.dumps(summary), file=sys.stderr)
    assert tally.failures == [], tally.failures[:20]
    assert codes == [0, 0, 0]
    # Readiness went false first: each replica was seen alive and draining.
    assert draining == set(replicas.ports)
    assert during >= MINIMUM_CALLS, summary
    # Each replica ended the modern listen stream it held, or none held it: at least one resumed.
    assert modern_heard.streams >= 2, summary
