"""The `notifications` filter of `subscriptions/listen` (MCP 2026-07-28 basic/patterns/subscriptions,
"Notification Filter"; schema `SubscriptionFilter`)."""

from __future__ import annotations

from typing import Any

import pytest

from aql_mcp.endpoint.modern.subscription import (
    PROMPTS_CHANGED,
    RESOURCE_UPDATED,
    RESOURCES_CHANGED,
    TASK_STATUS,
    TOOLS_CHANGED,
    Change,
    SubscriptionFilter,
    parse_filter,
)
from aql_mcp.exceptions import InvalidParams


def parsed(notifications: Any, max_uris: int = 10) -> SubscriptionFilter:
    return parse_filter({"notifications": notifications}, max_uris=max_uris)


def test_every_field_is_optional_and_an_empty_filter_wants_nothing() -> None:
    wanted = parsed({})

    assert wanted.to_wire() == {}
    assert not any(wanted.wants(Change(method)) for method in (TOOLS_CHANGED, PROMPTS_CHANGED, RESOURCES_CHANGED))
    assert not wanted.wants(Change(RESOURCE_UPDATED, "test://a"))


def test_each_flag_opts_in_to_its_own_list_change_only() -> None:
    wanted = parsed({"toolsListChanged": True, "promptsListChanged": False})

    assert wanted.wants(Change(TOOLS_CHANGED))
    assert not wanted.wants(Change(PROMPTS_CHANGED))
    assert not wanted.wants(Change(RESOURCES_CHANGED))


def test_resource_updates_are_wanted_only_for_the_listed_uris() -> None:
    wanted = parsed({"resourceSubscriptions": ["test://a"]})

    assert wanted.wants(Change(RESOURCE_UPDATED, "test://a"))
    assert not wanted.wants(Change(RESOURCE_UPDATED, "test://b"))
    assert not wanted.wants(Change(RESOURCES_CHANGED))


def test_the_acknowledgement_lists_what_is_honoured_as_the_client_spelled_it() -> None:
    """Subscriptions, "Acknowledgment": the subset honoured; unknown and false fields are left out."""
    wanted = parsed(
        {
            "resourcesListChanged": True,
            "promptsListChanged": False,
            "resourceSubscriptions": ["test://b", "test://a", "test://b"],
            "somethingNew": True,
        }
    )

    assert wanted.to_wire() == {"resourcesListChanged": True, "resourceSubscriptions": ["test://b", "test://a"]}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "notifications"),
        ({"notifications": None}, "notifications"),
        ({"notifications": ["toolsListChanged"]}, "notifications"),
        ({"notifications": {"toolsListChanged": "true"}}, "notifications.toolsListChanged"),
        ({"notifications": {"promptsListChanged": 0}}, "notifications.promptsListChanged"),
        ({"notifications": {"resourcesListChanged": None}}, "notifications.resourcesListChanged"),
        ({"notifications": {"resourceSubscriptions": "test://a"}}, "notifications.resourceSubscriptions"),
        ({"notifications": {"resourceSubscriptions": [None]}}, "notifications.resourceSubscriptions"),
        ({"notifications": {"resourceSubscriptions": ["test://\u0007"]}}, "notifications.resourceSubscriptions"),
    ],
)
def test_a_malformed_filter_names_the_field_at_fault(params: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidParams) as refused:
        parse_filter(params, max_uris=10)
    assert refused.value.data["field"] == field


def test_more_uris_than_allowed_are_refused_after_duplicates_are_merged() -> None:
    assert parsed({"resourceSubscriptions": ["test://a", "test://a", "test://b"]}, max_uris=2).uris == (
        "test://a",
        "test://b",
    )
    with pytest.raises(InvalidParams) as refused:
        parsed({"resourceSubscriptions": ["test://a", "test://b", "test://c"]}, max_uris=2)
    assert refused.value.data["reason"] == "too_many"


def test_a_list_change_has_no_params_and_an_update_names_its_uri() -> None:
    assert Change(TOOLS_CHANGED).params() == {}
    assert Change(RESOURCE_UPDATED, "test://a").params() == {"uri": "test://a"}


def test_task_ids_opt_in_to_the_status_of_those_tasks_and_are_acknowledged() -> None:
    """SEP-2663 "Task Status Notifications": `taskIds` in the filter and in its acknowledgement."""
    wanted = parsed({"taskIds": ["t1", "t2", "t1"]})

    assert wanted.task_ids == ("t1", "t2")
    assert wanted.wants(Change(TASK_STATUS, "t2", "owner"))
    assert not wanted.wants(Change(TASK_STATUS, "t3", "owner"))
    assert not parsed({"toolsListChanged": True}).wants(Change(TASK_STATUS, "t1", "owner"))
    assert wanted.to_wire() == {"taskIds": ["t1", "t2"]}


@pytest.mark.parametrize("task_ids", ["t1", [None], [""], ["t" * 257], [7]])
def test_malformed_task_ids_name_the_field(task_ids: Any) -> None:
    with pytest.raises(InvalidParams) as refused:
        parse_filter({"notifications": {"taskIds": task_ids}}, max_uris=10)
    assert refused.value.data["field"] == "notifications.taskIds"


def test_more_task_ids_than_resource_uris_allowed_are_refused() -> None:
    with pytest.raises(InvalidParams) as refused:
        parsed({"taskIds": ["a", "b", "c"]}, max_uris=2)
    assert refused.value.data == {"field": "notifications.taskIds", "reason": "too_many", "max": 2}
