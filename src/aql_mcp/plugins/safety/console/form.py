"""Reading a console form: `application/x-www-form-urlencoded` only, small, each field once.

The body has already passed the service's body limit (middleware/limits.py); a console form is a
handful of short fields, so anything longer than `MAX_FORM_BYTES`, any other media type, or a field
given twice is refused before the operator desk sees it.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.requests import Request

from aql_mcp.plugin import InvalidRequest, PayloadTooLarge, UnsupportedMediaType

MAX_FORM_BYTES = 4096
MAX_FIELD_CHARS = 512
FORM_TYPE = "application/x-www-form-urlencoded"


async def read_form(request: Request) -> dict[str, str]:
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != FORM_TYPE:
        raise UnsupportedMediaType("Unsupported media type: a console form is application/x-www-form-urlencoded")
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise PayloadTooLarge(data={"limit": "console_form", "maxBytes": MAX_FORM_BYTES})
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError as exc:
        raise InvalidRequest("Invalid request: the form is not UTF-8") from exc
    form: dict[str, str] = {}
    for name, value in pairs:
        if name in form or len(value) > MAX_FIELD_CHARS:
            raise InvalidRequest("Invalid request: a form field is repeated or too long")
        form[name] = value
    return form


def required(form: dict[str, str], name: str) -> str:
    value = form.get(name, "").strip()
    if not value:
        raise InvalidRequest(f"Invalid request: the form needs '{name}'", data={"field": name})
    return value
