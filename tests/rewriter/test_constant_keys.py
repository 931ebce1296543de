"""Constant keys (rewriter.passes.group_keys._constant): a constant of the select list
grouped by its position or name is one group, its value public, as in PostgreSQL; a CASE
key's constants must be numbers a double holds (PostgreSQL compares numerics exactly)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.driver_sql import Engines, catalog, engines


@pytest.fixture(scope="module")
def notes(pg_dsn: str) -> Iterator[Engines]:
    with engines(pg_dsn) as found:
        yield found


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 'x' AS k, COUNT(*) FROM notes GROUP BY 1",
        "SELECT 'x' AS k, COUNT(*) FROM notes GROUP BY k",
        "SELECT 7 AS k, code, COUNT(*) FROM notes GROUP BY 1, 2",
        "SELECT 'x' AS k, SUM(stay) FROM notes WHERE stay > 0 GROUP BY 1",
    ],
)
def test_a_constant_grouped_by_position_is_one_group(sql: str, notes: Engines) -> None:
    on_duck, on_pg = notes.released(sql, delta=0.0)  # a public domain: the constant
    assert on_duck == on_pg
    # A domain's empty cells are released too; its NULL cell is not (docs/sql.md).
    assert {r for r in on_duck if r[-1]} == {r for r in notes.native(sql) if None not in r}


def test_a_case_key_of_decimals_a_double_holds_is_answered(notes: Engines) -> None:
    sql = "SELECT CASE WHEN stay > 2 THEN 0.1 ELSE 2 END AS c, COUNT(*) FROM notes GROUP BY 1"
    on_duck, on_pg = notes.released(sql, delta=0.0)
    assert on_duck == on_pg
    assert {(float(c), n) for c, n in on_duck if n} == {(float(c), n) for c, n in notes.native(sql)}


def test_a_case_key_of_more_digits_than_a_double_is_refused() -> None:
    """Its cell would be written as the double (0.12345) and hold no row on PostgreSQL."""
    with pytest.raises(Rejected, match="more digits than a double"):
        plan(
            "SELECT CASE WHEN stay > 5 THEN 0.1234500000000000001 ELSE 2 END AS c, COUNT(*) "
            "FROM notes GROUP BY 1",
            catalog("main"),
            PlanRequest(1.0),
        )


def test_a_bare_constant_in_group_by_is_refused_as_in_postgresql() -> None:
    with pytest.raises(Rejected, match="non-integer constant in GROUP BY"):
        plan("SELECT COUNT(*) FROM notes GROUP BY 'x'", catalog("main"), PlanRequest(1.0))
