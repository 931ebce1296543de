"""The bias warning: an average released at (near) a declared bound is flagged."""

from __future__ import annotations

from rewriter import PlanRequest, plan
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import catalog, duckdb_with

SQL = "SELECT department, AVG(cost), COUNT(*) FROM visits GROUP BY department"


def release(rows: list) -> tuple[str, ...]:
    query_plan = plan(SQL, catalog("main"), PlanRequest(1.0))
    exact = duckdb_with(rows).execute(query_plan.sql).fetchall()
    return query_plan.release(exact, ZeroNoise()).warnings


def test_average_at_the_upper_bound_is_flagged() -> None:
    rows = [(i, i, "A", 500.0, 1) for i in range(1, 20)]  # all clamped to 100
    rows += [(100 + i, 100 + i, "B", 50.0, 1) for i in range(20)]
    (warning,) = release(rows)
    assert warning.startswith("AVG(cost) is within 5% of its declared bounds [0, 100]")
    # A (all clamped to 100). C has no rows: without noise its average is the centre of
    # the range, 50 (measurements: averages are centred sums), so it is not flagged.
    assert "in 1 of 3 row(s)" in warning


def test_average_in_the_middle_is_not_flagged() -> None:
    rows = [(i, i, d, 40.0 + i % 20, 1) for i in range(1, 60) for d in ("A", "B", "C")]
    assert release(rows) == ()
