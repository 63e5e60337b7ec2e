"""A schema migration and the rule that lets an older release run on a newer schema.

Each engine numbers its migrations from 1. With every migration it applies, a store records the
oldest release that can still run on the schema it leaves, as the number of migrations that
release must know (`compatible_from`). An additive migration (new tables, nullable or defaulted
columns, indexes) leaves the previous release working, so it keeps the value before it; a breaking
one (a dropped, renamed or retyped column, rows rewritten, a column given a new meaning) sets it to
its own number. A release that knows K migrations starts on any store whose `compatible_from` is at
most K, so a rolling update and a `helm rollback` over additive migrations keep working
(docs/store.md, "Writing a migration"; docs/operations.md, "Rollback").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from aql_mcp.exceptions import ConfigError


class SchemaTooNew(ConfigError):
    """The store was migrated by a newer release, and one of its migrations was breaking.

    A release runs on a newer schema as long as every migration it does not know is additive
    (store/migration.py); past a breaking one it cannot know what changed, so it refuses to start
    rather than read and write a schema it does not understand (docs/operations.md).
    """

    def __init__(self, *, found: int, needs: int, known: int, part: str = "the store's schema") -> None:
        super().__init__(
            f"{part} is at version {found} and needs a release that knows at least {needs} "
            f"migrations; this release knows {known}: it was migrated by a newer release; run that release "
            "(or restore a backup taken before the upgrade)"
        )
        self.found = found
        self.needs = needs
        self.known = known


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered step of an engine's schema; `additive` when the release before it still runs on
    the schema it leaves. A plugin's migration sets `legacy_core` to the core migration that did the
    same step before plugins had tables of their own (0.2.0), so a store written then is adopted, not
    migrated twice (store/plugin_tables.py, docs/store.md "A plugin's own tables")."""

    script: str
    additive: bool
    legacy_core: int | None = None


def compatible_from(migrations: Sequence[Migration], version: int) -> int:
    """The number of migrations a release must know to run on the schema after `version` of them."""
    oldest = 0
    for number, migration in enumerate(migrations[:version], start=1):
        if not migration.additive:
            oldest = number
    return oldest


def check_compatible(*, found: int, needs: int | None, known: int, part: str = "the store's schema") -> None:
    """Refuse a store this release cannot run on, with `SchemaTooNew`.

    `needs` is the store's recorded `compatible_from`; None (a row written before the column existed,
    or by a release that did not say) is read as `found`: only a known schema is taken on trust.
    `part` names what is versioned in the message: the core schema, or one plugin's tables.
    """
    if found <= known:
        return
    required = found if needs is None else needs
    if required > known:
        raise SchemaTooNew(found=found, needs=required, known=known, part=part)


class PluginSchema(Protocol):
    """What an engine migrates of a plugin's tables (`Tables` in store/plugin_tables.py, which the
    plugin declares): its name and its migrations per engine. Declared here so the engines need
    nothing above this module."""

    @property
    def name(self) -> str: ...
    @property
    def sqlite(self) -> Sequence[Migration]: ...
    @property
    def postgres(self) -> Sequence[Migration]: ...


def adopted(migrations: Sequence[Migration], legacy: int) -> int:
    """How many of a plugin's first migrations a store at core version `legacy` of release 0.2.0
    already applied (their `legacy_core` is at most `legacy`): the plugin starts after them."""
    count = 0
    for migration in migrations:
        if migration.legacy_core is None or migration.legacy_core > legacy:
            break
        count += 1
    return count
