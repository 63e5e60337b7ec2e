"""`endpoint/statuses.py`: the per-era HTTP status of an error answering a dispatched request."""

from __future__ import annotations

import pytest

from aql_mcp.endpoint.statuses import dispatched_status, wire_code
from aql_mcp.exceptions import (
    HeaderMismatch,
    InternalError,
    InvalidParams,
    MethodNotFound,
    RateLimited,
    ResourceNotFound,
    ToolTimeout,
    UnsupportedModernVersion,
    WireError,
)
from aql_mcp.protocol.versions import Era


@pytest.mark.parametrize("error", [InvalidParams(), MethodNotFound(), InternalError(), ResourceNotFound()])
def test_legacy_errors_of_a_dispatched_request_travel_with_200(error: WireError) -> None:
    assert dispatched_status(Era.LEGACY, error, error.code) == 200


@pytest.mark.parametrize("era", [Era.LEGACY, Era.MODERN])
@pytest.mark.parametrize("error", [ToolTimeout(), RateLimited(retry_after=1)])
def test_errors_whose_status_is_the_signal_keep_it_in_both_eras(era: Era, error: WireError) -> None:
    assert dispatched_status(era, error, error.code) == error.status


@pytest.mark.parametrize(
    ("error", "status"),
    [(InvalidParams(), 400), (HeaderMismatch(), 400), (UnsupportedModernVersion(), 400), (MethodNotFound(), 404)],
)
def test_modern_protocol_errors_keep_the_status_the_http_binding_names(error: WireError, status: int) -> None:
    """MCP 2026-07-28 Streamable HTTP, "Protocol Version Header" and "Server Validation"."""
    assert dispatched_status(Era.MODERN, error, error.code) == status


def test_a_modern_internal_error_travels_with_200() -> None:
    assert dispatched_status(Era.MODERN, InternalError(), InternalError.code) == 200


def test_resource_not_found_is_invalid_params_only_in_the_modern_era() -> None:
    """MCP 2026-07-28 basic, "Error Codes": -32002 MUST NOT be emitted; -32602 replaces it."""
    assert wire_code(Era.MODERN, ResourceNotFound.code) == InvalidParams.code
    assert wire_code(Era.LEGACY, ResourceNotFound.code) == ResourceNotFound.code
