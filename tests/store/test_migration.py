"""The compatibility rule of migrations (store/migration.py), apart from any engine."""

from __future__ import annotations

import pytest

from aql_mcp.store.migration import Migration, SchemaTooNew, check_compatible, compatible_from

BASE, ADD, BREAK = Migration("base", additive=False), Migration("add", additive=True), Migration("b", additive=False)


def test_an_additive_migration_keeps_the_oldest_release_and_a_breaking_one_moves_it() -> None:
    migrations = (BASE, ADD, ADD, BREAK, ADD)
    assert [compatible_from(migrations, v) for v in range(6)] == [0, 1, 1, 1, 4, 4]


def test_a_release_runs_on_a_newer_schema_it_is_compatible_with() -> None:
    check_compatible(found=7, needs=5, known=5)
    check_compatible(found=3, needs=None, known=5)


@pytest.mark.parametrize(("found", "needs"), [(7, 6), (6, None)])
def test_a_schema_needing_a_newer_release_is_refused(found: int, needs: int | None) -> None:
    with pytest.raises(SchemaTooNew) as refused:
        check_compatible(found=found, needs=needs, known=5)
    assert (refused.value.found, refused.value.needs, refused.value.known) == (found, needs or found, 5)
