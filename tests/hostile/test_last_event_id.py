"""Malformed `Last-Event-ID` values sent to a real `aql-mcp serve` (issue 12): a sequence above 2^63
or one holding a non-ASCII digit (`str.isdigit` takes a superscript two, `int` does not) answered
500. Every malformed id is a 400 with -32600; a well-formed id of a stream that never existed is a
410."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.support.aql import session as aql_session
from tests.support.server import ServerProcess

LEAKS = ("Traceback", 'File "', ".py")


@pytest.fixture(scope="module")
def session(server: ServerProcess) -> Iterator[dict[str, str]]:
    with aql_session(server) as opened:
        yield opened.headers


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b"g-9223372036854775808", id="2^63"),
        pytest.param(b"g-" + b"9" * 400, id="400-digits"),
        pytest.param("g-\u00b2".encode(), id="superscript-two"),
        pytest.param("g-\u0663".encode(), id="arabic-indic-three"),
        pytest.param(b"g-\xb2", id="latin-1-byte"),
        pytest.param(b"no sequence here", id="no-sequence"),
        pytest.param(b"0123456789abcdef-+5", id="signed"),
    ],
)
def test_a_malformed_last_event_id_is_400_invalid_request(
    server: ServerProcess, session: dict[str, str], value: bytes
) -> None:
    response = httpx.get(server.url, headers={**session, "last-event-id": value}, timeout=10)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600
    assert not any(leak in response.text for leak in LEAKS)


def test_an_id_of_a_stream_that_never_existed_is_refused_without_a_500(
    server: ServerProcess, session: dict[str, str]
) -> None:
    """The largest sequence that fits, on a request stream this session never had: 410, so the client
    stops polling it (404 would tell it the session is gone)."""
    largest = b"0123456789abcdef-9223372036854775807"
    response = httpx.get(server.url, headers={**session, "last-event-id": largest}, timeout=10)

    assert response.status_code == 410
    assert response.json()["error"]["code"] == -32600
