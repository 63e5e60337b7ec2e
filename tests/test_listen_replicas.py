"""`subscriptions/listen` across three `aql-mcp serve` replicas sharing one PostgreSQL (issue 13).

A modern client's requests land on any replica: the change a call makes on one must reach the
listen streams held by the others, once each, and only those that asked for it (endpoint/notifier.py,
docs/eras.md "Subscriptions in the modern era").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.support.listen import DEADLINE, SUBSCRIPTION_ID, call_tool, open_listen
from tests.support.replicas import Replicas, start_replicas, wait_for_replica_count

pytestmark = pytest.mark.anyio

WATCHED = "test://watched-resource"
ACK = "notifications/subscriptions/acknowledged"


@pytest.fixture(scope="module")
def replicas(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    env = {"AQL_MCP_MCP__MODERN_ERA": "true"}
    with start_replicas(tmp_path_factory.mktemp("listen-replicas"), database, env=env) as started:
        wait_for_replica_count(started, 3)
        yield started


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=DEADLINE) as client:
        yield client


async def test_a_change_made_on_one_replica_reaches_listen_streams_held_by_the_others(
    replicas: Replicas, http: httpx.AsyncClient
) -> None:
    token = replicas.token("listener")
    urls = [server.url for server in replicas.servers]
    wanted = {"toolsListChanged": True, "resourceSubscriptions": [WATCHED]}
    async with (
        open_listen(http, urls[1], token, wanted, message_id=11) as on_second,
        open_listen(http, urls[2], token, wanted, message_id=12) as on_third,
    ):
        assert (await on_second.next())["method"] == ACK
        assert (await on_third.next())["method"] == ACK

        assert (await call_tool(http, urls[0], token, "test_update_watched_resource")).status_code == 200
        assert (await call_tool(http, urls[0], token, "test_trigger_tool_change")).status_code == 200
        second = [await on_second.next(), await on_second.next()]
        third = [await on_third.next(), await on_third.next()]

    for messages, subscription in ((second, 11), (third, 12)):
        assert [message["method"] for message in messages] == [
            "notifications/resources/updated",
            "notifications/tools/list_changed",
        ]
        assert messages[0]["params"] == {"_meta": {SUBSCRIPTION_ID: subscription}, "uri": WATCHED}
        assert messages[1]["params"] == {"_meta": {SUBSCRIPTION_ID: subscription}}


async def test_a_stream_on_another_replica_hears_only_what_it_asked_for(
    replicas: Replicas, http: httpx.AsyncClient
) -> None:
    """The tool change and the resource update, made on replica 0, must not reach a stream on
    replica 2 that asked for prompt changes only: the prompt change made after them comes first."""
    token = replicas.token("narrow")
    urls = [server.url for server in replicas.servers]
    async with open_listen(http, urls[2], token, {"promptsListChanged": True}) as narrow:
        assert (await narrow.next())["method"] == ACK
        await call_tool(http, urls[0], token, "test_trigger_tool_change")
        await call_tool(http, urls[0], token, "test_update_watched_resource")
        await call_tool(http, urls[0], token, "test_trigger_prompt_change")
        first = await narrow.next()

    assert first["method"] == "notifications/prompts/list_changed"


async def test_each_change_reaches_a_stream_once_wherever_it_was_made(
    replicas: Replicas, http: httpx.AsyncClient
) -> None:
    """Alternating kinds and replicas: an echo of a change (its replica hearing its own signal, or
    a signal read twice) would break the alternation."""
    token = replicas.token("once")
    urls = [server.url for server in replicas.servers]
    wanted = {"promptsListChanged": True, "toolsListChanged": True}
    changes = [(2, "test_trigger_prompt_change"), (0, "test_trigger_tool_change"), (1, "test_trigger_prompt_change")]
    changes += [(2, "test_trigger_tool_change"), (0, "test_trigger_prompt_change")]
    heard = []
    async with open_listen(http, urls[2], token, wanted) as stream:
        assert (await stream.next())["method"] == ACK
        for replica, trigger in changes:
            await call_tool(http, urls[replica], token, trigger)
            heard.append((await stream.next())["method"])

    assert heard == [
        "notifications/prompts/list_changed",
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
    ]
