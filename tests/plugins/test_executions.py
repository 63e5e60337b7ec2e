"""The `executions` plugin's checks of an import payload (MCP-AQL §4.7.4) and its wiring."""

from __future__ import annotations

import base64

import pytest

from aql_mcp.operations.results import OperationError
from aql_mcp.plugins.executions import ExecutionsPlugin, _decoded, plugin
from aql_mcp.settings import Settings


def test_a_standard_base64_payload_with_padding_is_decoded() -> None:
    assert _decoded(base64.b64encode(b'{"a": 1}\n').decode(), 1024) == b'{"a": 1}\n'


@pytest.mark.parametrize("content", ["eyJhIjogMX0", "eyJh IjogMX0=", "eyJhIjo-MX0_", "ééé", "===="])
def test_anything_but_strict_standard_base64_is_an_encoding_error(content: str) -> None:
    with pytest.raises(OperationError) as caught:
        _decoded(content, 1024)
    assert caught.value.code == "VALIDATION_INVALID_ENCODING"
    assert caught.value.details == {"param_name": "file_content", "expected_encoding": "base64"}


@pytest.mark.parametrize("size", [1025, 4096])
def test_a_payload_over_the_cap_is_refused_whether_or_not_it_is_decoded_first(size: int) -> None:
    with pytest.raises(OperationError) as caught:
        _decoded(base64.b64encode(b"x" * size).decode(), 1024)
    assert caught.value.code == "VALIDATION_PAYLOAD_TOO_LARGE"
    assert caught.value.details == {"param_name": "file_content", "max_bytes": 1024}


def test_every_service_gets_a_plugin_of_its_own() -> None:
    settings = Settings()
    first, second = plugin(settings), plugin(settings)
    assert isinstance(first, ExecutionsPlugin)
    assert first is not second
    assert first.legacy_methods(lambda p, c: None, lambda p, c: None) == {}  # type: ignore[arg-type,return-value]
