"""Plugins that fail in their own code at startup with a secret setting in the message (issue 15):
the service must report the step and the exception's type, never the message
(`tests.support.leaky:plugin`, `tests.support.leaky:operations_plugin`).

`fail_in` names the step that raises: `configure`, `register` or `register_operations`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, SecretStr

from aql_mcp.plugin import PluginOperations, Registry, TrustLevel


class LeakySettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    token: SecretStr = SecretStr("")
    fail_in: str = ""


class _Leaky:
    settings_model = LeakySettings

    def __init__(self) -> None:
        self.settings = LeakySettings()

    def configure(self, settings: LeakySettings) -> None:
        self.settings = settings
        self._fail("configure")

    def _fail(self, step: str) -> None:
        if self.settings.fail_in == step:
            raise RuntimeError(f"cannot reach the backend with {self.settings.token.get_secret_value()}")


class Leaky(_Leaky):
    name = "leaky"

    def register(self, registry: Registry) -> None:
        self._fail("register")


class LeakyOperations(_Leaky):
    name = "leaky_ops"
    trust: TrustLevel = "validated"

    def register_operations(self, operations: PluginOperations) -> None:
        self._fail("register_operations")


plugin = Leaky()
operations_plugin = LeakyOperations()
