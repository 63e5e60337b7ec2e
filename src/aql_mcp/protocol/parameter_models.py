"""Parameter models: the strict pydantic models a tool's or an operation's arguments are checked with.

Both the typed tools of protocol/signatures.py and the MCP-AQL operations (operations/parameters.py)
validate JSON arguments against such a model, so the model's base and its JSON validation live in
the protocol layer, below the operations that build on them (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar, get_args

import orjson
from pydantic import BaseModel, ConfigDict
from pydantic_core.core_schema import ErrorType

ModelT = TypeVar("ModelT", bound=BaseModel)
# Pydantic's own error messages never quote the input; a validator's own (and a custom error type) may.
BUILTIN_ERRORS = frozenset(get_args(ErrorType)) - {"value_error", "assertion_error"}


class Params(BaseModel):
    """Base of every operation's parameter model: strict types, no unknown fields.

    `parameter_aliases` maps a deprecated spelling to the parameter's published (snake_case) name: an MCP-AQL
    call may still use it, with a warning naming the parameter to use (MCP-AQL ADR-003; docs/aql.md,
    "Parameter names").
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    parameter_aliases: ClassVar[Mapping[str, str]] = {}


def validate_json_values(model: type[ModelT], values: Any) -> ModelT:
    """`values` (decoded from a JSON request) validated as the JSON text they came from.

    Pydantic's JSON mode is what strict models mean for JSON input: a date, datetime, UUID or enum
    given as its JSON string, a tuple as an array, is accepted, while a number in a string or a float
    for an integer is still refused. Python mode would refuse `"2026-02-03"` for a `date` ("should be
    an instance of ...", naming a Python class) although a JSON caller has no other way to send it.
    """
    return model.model_validate_json(orjson.dumps(values))
