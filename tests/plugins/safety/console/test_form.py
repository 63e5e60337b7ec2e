"""Reading a console form (docs/console.md, "Forms")."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from aql_mcp.exceptions import InvalidRequest, PayloadTooLarge, UnsupportedMediaType, WireError
from aql_mcp.plugins.safety.console.form import MAX_FORM_BYTES, read_form, required


def posted(body: bytes, content_type: str = "application/x-www-form-urlencoded") -> Request:
    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [(b"content-type", content_type.encode())]}
    return Request(scope, receive)


@pytest.mark.anyio
async def test_an_urlencoded_form_is_read_field_by_field() -> None:
    form = await read_form(posted(b"challenge_id=abc&code=x%2By&csrf="))
    assert form == {"challenge_id": "abc", "code": "x+y", "csrf": ""}
    assert required(form, "code") == "x+y"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "content_type", "error"),
    [
        (b'{"a": 1}', "application/json", UnsupportedMediaType),
        (b"a=1&a=2", "application/x-www-form-urlencoded", InvalidRequest),
        (b"a=" + b"x" * 600, "application/x-www-form-urlencoded", InvalidRequest),
        (b"a=" + b"x" * MAX_FORM_BYTES, "application/x-www-form-urlencoded", PayloadTooLarge),
        (b"a=%ff", "application/x-www-form-urlencoded", None),
    ],
)
async def test_other_media_types_repeated_long_or_oversized_fields_are_refused(
    body: bytes, content_type: str, error: type[WireError] | None
) -> None:
    if error is None:
        assert (await read_form(posted(body, content_type)))["a"] == "\ufffd"
        return
    with pytest.raises(error):
        await read_form(posted(body, content_type))


def test_a_missing_or_blank_field_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidRequest) as refused:
        required({"code": "  "}, "code")
    assert refused.value.data == {"field": "code"}
