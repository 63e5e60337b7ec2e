"""A connect flood against a real `aql-mcp serve` (issue 27, N3): bare TCP connects, no bytes and
no token, opened faster than one a second per slot, kept every slot of the connection table younger
than the eviction floor, and 17 of 24 `/health` probes got 503.

The flood here is bounded (a thread opening connections on 127.0.0.1 for as long as the probes
run) against a small `http.max_connections`, so each slot is taken many times over while the
probes ask. The probes must get their answers: on the service port, because a flood now evicts its
own never-served connections whatever their age, and on `probes.port`, which no flood on the
service port reaches (docs/connections.md, "Connect floods").
"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.flood import connect_flood
from tests.support.server import free_port, start_server

SLOTS = 32
PROBES = 24
# The flood keeps four times the cap open: the server evicts the rest as new ones arrive.
HELD = 4 * SLOTS
# The finding turned 1,024 slots over every 0.2 s (5,000 connects a second); this turns 32 over
# every 0.16 s, each slot far younger than the 1 s floor. Unpaced, the flood would also measure how
# long this busy test machine takes between a probe's connect and its head: a client has
# slots / rate seconds to send one (docs/connections.md).
RATE = 200.0


def probe(base: str, path: str = "/health") -> int:
    try:
        return httpx.get(f"{base}{path}", timeout=10.0).status_code
    except httpx.TransportError:
        return 0


def test_health_answers_on_the_service_port_while_a_connect_flood_keeps_every_slot_young(tmp_path: Path) -> None:
    with start_server(tmp_path, env={"AQL_MCP_HTTP__MAX_CONNECTIONS": str(SLOTS)}) as server:
        with connect_flood(server.port, hold=HELD, rate=RATE) as flood:
            statuses = [probe(server.base) for _ in range(PROBES)]
        assert statuses == [200] * PROBES
        assert flood.opened > HELD + PROBES  # the flood ran all along


def test_health_and_ready_answer_on_the_probes_port_while_an_unpaced_flood_fills_the_service_port(
    tmp_path: Path,
) -> None:
    """The probes port has a connection table of its own: however fast the flood on the service
    port, and however long its clients take to send a head, it never reaches the probes."""
    probes_port = free_port()
    env = {"AQL_MCP_HTTP__MAX_CONNECTIONS": str(SLOTS), "AQL_MCP_PROBES__PORT": str(probes_port)}
    with start_server(tmp_path, env=env) as server:
        own = f"http://127.0.0.1:{probes_port}"
        with connect_flood(server.port, hold=HELD) as flood:
            health = [probe(own) for _ in range(PROBES)]
            ready = [probe(own, "/ready") for _ in range(PROBES)]
        assert health == ready == [200] * PROBES
        assert flood.opened > HELD + 2 * PROBES
        assert httpx.get(f"{own}/mcp", timeout=10.0).status_code == 404  # probes only


def test_a_per_source_cap_keeps_an_unpaced_flood_from_one_address_off_everyone_elses_slots(tmp_path: Path) -> None:
    """`http.max_connections_per_source`: the flood (from 127.0.0.2) holds at most its share of the
    table and its connections past it are refused, so the probes (from 127.0.0.1) always find a
    free slot, however fast the flood."""
    env = {"AQL_MCP_HTTP__MAX_CONNECTIONS": str(SLOTS), "AQL_MCP_HTTP__MAX_CONNECTIONS_PER_SOURCE": "8"}
    with start_server(tmp_path, env=env) as server:
        with connect_flood(server.port, hold=HELD, source="127.0.0.2") as flood:
            statuses = [probe(server.base) for _ in range(PROBES)]
        assert statuses == [200] * PROBES
        assert flood.opened > HELD + PROBES
        metrics = httpx.get(f"{server.base}/metrics", timeout=10.0).text
        counter = 'aql_mcp_limit_events_total{kind="connections_per_source"} '
        (refused,) = (line for line in metrics.splitlines() if line.startswith(counter))
        assert float(refused.split()[-1]) > 0
