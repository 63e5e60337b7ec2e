"""The operation registry: every operation by name, with the plugin that added it and its trust level
(the level in force, `operations/trust.py`, and the one the plugin declared).

A duplicate name fails at startup naming both plugins; the names MCP-AQL §8.5.4 reserves for the
protocol are refused unless the operation is the protocol's own (`reserved=True`) and sits in the
category the specification gives it. A parameter name that is not snake_case (§4.3) fails at startup
too, naming the plugin, the operation and the parameter: another spelling may only be a declared
alias of a published parameter (the parameter model's `parameter_aliases`, docs/aql.md "Parameter names").
A declared cost outside 1..100 fails at startup too (operations/cost.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping

from aql_mcp.exceptions import ConfigError
from aql_mcp.operations.cost import check_cost
from aql_mcp.operations.models import Category, Operation, TrustLevel, TypeDef

OPERATION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")  # MCP-AQL §8.5.2
PARAMETER_NAME = re.compile(r"^[a-z][a-z0-9_]*$")  # MCP-AQL §4.3
RESERVED: Mapping[str, Category] = {
    "introspect": "READ",
    "execute_agent": "EXECUTE",
    "record_execution_step": "CREATE",
    "complete_execution": "EXECUTE",
    "abort_execution": "EXECUTE",
    "confirm_operation": "EXECUTE",
    "verify_challenge": "CREATE",
}


class OperationRegistry:
    """Operations and adapter types by name; listeners hear about every addition."""

    def __init__(self) -> None:
        self._operations: dict[str, Operation] = {}
        self._owners: dict[str, str] = {}
        self._trust: dict[str, TrustLevel] = {}
        self._declared: dict[str, TrustLevel] = {}
        self._types: dict[str, TypeDef] = {}
        self._type_owners: dict[str, str] = {}
        self._listeners: list[Callable[[], None]] = []

    def add(self, operation: Operation, *, plugin: str, trust: TrustLevel, declared: TrustLevel | None = None) -> None:
        name = operation.name
        if not OPERATION_NAME.fullmatch(name):
            raise ConfigError(f"plugin {plugin}: operation name {name!r} must match {OPERATION_NAME.pattern}")
        owner = self._owners.get(name)
        if owner is not None:
            raise ConfigError(f"operation {name!r} is registered by plugin {owner} and again by plugin {plugin}")
        reserved = RESERVED.get(name)
        if reserved is not None and not (operation.reserved and operation.category == reserved):
            raise ConfigError(
                f"plugin {plugin}: operation name {name!r} is reserved by MCP-AQL §8.5.4 "
                f"(category {reserved}); choose another name"
            )
        check_parameter_names(operation, plugin)
        check_cost(operation, plugin)
        self._operations[name] = operation
        self._owners[name] = plugin
        self._trust[name] = trust
        self._declared[name] = declared or trust
        self._changed()

    def add_type(self, type_def: TypeDef, *, plugin: str) -> None:
        owner = self._type_owners.get(type_def.name)
        if owner is not None:
            raise ConfigError(f"type {type_def.name!r} is registered by plugin {owner} and again by plugin {plugin}")
        self._types[type_def.name] = type_def
        self._type_owners[type_def.name] = plugin

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def get(self, name: str) -> Operation | None:
        return self._operations.get(name)

    def operations(self) -> Iterator[Operation]:
        return iter(self._operations.values())

    def trust(self, name: str) -> TrustLevel:
        """The trust level the operation is gated with."""
        return self._trust[name]

    def declared_trust(self, name: str) -> TrustLevel:
        return self._declared[name]

    def types(self) -> Iterator[TypeDef]:
        return iter(self._types.values())

    def type(self, name: str) -> TypeDef | None:
        return self._types.get(name)

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()


def check_parameter_names(operation: Operation, plugin: str) -> None:
    """Every published parameter name is snake_case; every alias names a published parameter."""
    fields = operation.params.model_fields
    for field_name, info in fields.items():
        for published in {field_name, *(a for a in (info.alias, info.validation_alias) if isinstance(a, str))}:
            if not PARAMETER_NAME.fullmatch(published):
                raise ConfigError(
                    f"plugin {plugin}: operation {operation.name!r} publishes parameter {published!r}, which is not "
                    f"snake_case (MCP-AQL §4.3: {PARAMETER_NAME.pattern}); publish a snake_case name and declare "
                    f"{published!r} in the parameter model's parameter_aliases if callers still send it"
                )
    for alias, target in operation.params.parameter_aliases.items():
        if target not in fields or alias in fields:
            raise ConfigError(
                f"plugin {plugin}: operation {operation.name!r} declares the alias {alias!r} of parameter "
                f"{target!r}, which is not one of its parameters or is itself a parameter's name"
            )
