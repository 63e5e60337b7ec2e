"""The plain argument check of a tool: a shortcut past jsonschema for flat object schemas.

Compiled once per tool at registration, beside its jsonschema validator; `RegisteredTool.first_error`
tries it first and asks jsonschema only when it cannot prove the arguments valid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator, Draft202012Validator
from jsonschema.protocols import Validator

ArgumentCheck = Callable[[dict[str, Any]], bool]
ValueCheck = Callable[[Any], bool]
# Drafts in which `type`, `properties`, `required`, `additionalProperties` and `enum` mean the same
# thing (draft 3 puts `required` inside each property).
PLAIN_DRAFTS = (Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator, Draft202012Validator)
# Keywords that never make an instance invalid; `format` only while no format checker is set.
ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"}
)
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


def compile_check(validator: Validator) -> ArgumentCheck | None:
    """A plain-Python check for a flat object schema, or None when the schema needs jsonschema.

    Most tools declare `{"type": "object", "properties": {name: {"type": ...}}, "required": [...]}`;
    jsonschema spends ~13 µs per call walking that. The check answers True only when jsonschema
    would find no error, so a False (or no check) falls back to jsonschema, which words the error:
    what a caller sees is the same either way. Exact Python types are compared, so `True` is never
    an integer and `1.0` (an integer to jsonschema) takes the jsonschema path.
    """
    schema = validator.schema
    if not isinstance(validator, PLAIN_DRAFTS) or not isinstance(schema, Mapping):
        return None
    annotations = ANNOTATIONS | ({"format"} if getattr(validator, "format_checker", None) is None else frozenset())
    if not set(schema) <= annotations | {"type", "properties", "required", "additionalProperties"}:
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if schema.get("type", "object") != "object" or not isinstance(properties, Mapping) or not isinstance(extra, bool):
        return None
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return None
    checks = {}
    for name, subschema in properties.items():
        check = _value_check(subschema, annotations)
        if check is None:
            return None
        checks[name] = check
    return _object_check(checks, tuple(required), closed=not extra)


def _value_check(schema: Any, annotations: frozenset[str]) -> ValueCheck | None:
    if schema is True or schema == {}:
        return lambda _value: True
    if not isinstance(schema, Mapping) or not set(schema) <= annotations | {"type", "enum"}:
        return None
    names = schema.get("type", list(JSON_TYPES))
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not all(isinstance(n, str) and n in JSON_TYPES for n in names):
        return None
    types = frozenset(t for n in names for t in JSON_TYPES[n])
    enum = schema.get("enum")
    if enum is None:
        return lambda value: type(value) in types
    if not isinstance(enum, list) or not all(isinstance(v, str) for v in enum):
        return None
    allowed = frozenset(enum)
    return lambda value: type(value) is str and str in types and value in allowed


def _object_check(checks: dict[str, ValueCheck], required: tuple[str, ...], *, closed: bool) -> ArgumentCheck:
    def check(arguments: dict[str, Any]) -> bool:
        for name in required:
            if name not in arguments:
                return False
        for name, value in arguments.items():
            value_check = checks.get(name)
            if value_check is None:
                if closed:
                    return False
            elif not value_check(value):
                return False
        return True

    return check
