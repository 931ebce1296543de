"""GROUP BY COALESCE of constants and keys with a public domain
(``rewriter.passes.group_keys``): Looker's ``COALESCE(CASE … END, 'Unknown')`` has the
public domain of its parts' values, NULL only where every part may be NULL, so it is
released without δ. Over the dense table of test_where_cells (every department and stay,
a person per row), the released groups are PostgreSQL's groups within that domain, with
PostgreSQL's counts."""

from __future__ import annotations

import duckdb
import psycopg
import pytest

from rewriter import PlanRequest, Rejected, plan
from rewriter.passes.group_keys import domain_cells
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import catalog
from tests.rewriter.test_where_cells import dense_duckdb, postgres

__all__ = ["dense_duckdb", "postgres"]  # the fixtures, used by name

#: (key, its public domain)
KEYS = [
    (
        "COALESCE(CASE WHEN stay > 3 THEN 'long' END, 'Unknown')",
        {"long", "Unknown"},
    ),
    ("coalesce(department, 'none')", {"A", "B", "C", "none"}),
    (
        "COALESCE(CASE WHEN cost > 30 THEN 1 END, CASE WHEN stay > 5 THEN 2 END, 0)",
        {1, 2, 0},
    ),
    (
        "COALESCE(CASE WHEN cost > 30 THEN 1 END, CASE WHEN stay > 5 THEN 2 END)",
        {1, 2, None},
    ),
    ("COALESCE(stay > 3, false)", {True, False}),
    # A column's domain leaves out its NULLs (and other values), as the column's key does.
    ("COALESCE(NULL, department)", {"A", "B", "C"}),
]


@pytest.mark.parametrize(("key", "domain"), KEYS, ids=[k for k, _ in KEYS])
def test_the_domain_is_its_parts_and_the_groups_are_postgresql_s(
    key: str,
    domain: set[object],
    postgres: psycopg.Connection[tuple[object, ...]],
    dense_duckdb: duckdb.DuckDBPyConnection,
) -> None:
    sql = f"SELECT {key} AS k, COUNT(*) FROM visits GROUP BY 1"
    made = plan(sql, catalog("main"), PlanRequest(1.0))  # δ = 0: a public domain only
    assert {cell[0] for cell in domain_cells(made.keys)} == domain
    rows = made.release(dense_duckdb.execute(made.sql).fetchall(), ZeroNoise()).rows
    released = {row[0]: row[1] for row in rows}
    own = {row[0]: row[1] for row in postgres.execute(sql.encode()).fetchall()}
    assert set(released) == domain
    assert {k: n for k, n in released.items() if n} == {k: n for k, n in own.items() if k in domain}


@pytest.mark.parametrize(
    "key",
    [
        "COALESCE(department, 0)",  # parts of two types
        "COALESCE(cost, 0)",  # a part with no public domain
        "COALESCE(CASE WHEN stay > 3 THEN 1 END, 0.5)",
    ],
)
def test_without_a_domain_of_one_type_it_is_refused_without_delta(key: str) -> None:
    with pytest.raises(Rejected, match="no public domain|different types"):
        plan(f"SELECT COUNT(*) FROM visits GROUP BY {key}", catalog("main"), PlanRequest(1.0))
