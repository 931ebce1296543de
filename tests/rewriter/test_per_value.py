"""A person with more values than max_rows_per_unit counts in an average or a variance as
that many values at its own mean (``per_value_rows``): its centred sums are scaled, not
clamped. Clamped, a person with 10 visits of cost 10 (bounds [0, 100], 3 rows per person)
counted as 3 visits of cost 0 and pulled the average of everyone towards 0."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import duckdb
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter import ColumnPolicy, ColumnType, PlanRequest, TablePolicy, build_catalog, plan
from rewriter.plan import Plan
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import Row, catalog, duckdb_with, load_postgres, scratch_with

HEAVY: list[Row] = [(i, 1, "A", 10.0, 2) for i in range(10)]  # patient 1: 10 visits
LIGHT: list[Row] = [(10 + p, p, "A", 90.0, 9) for p in range(2, 6)]  # 4 patients, 1 each
SQL = "SELECT AVG(cost), SUM(cost), VAR_POP(cost), STDDEV_POP(cost), AVG(stay) FROM visits"
#: What the query answers without noise: patient 1 as 3 visits of cost 10 and stay 2.
COSTS = [10.0] * 3 + [90.0] * 4
EXPECTED = (
    statistics.mean(COSTS),
    sum(COSTS),
    statistics.pvariance(COSTS),
    statistics.pstdev(COSTS),
    statistics.mean([2] * 3 + [9] * 4),
)


def _released(made: Plan, exact: Sequence[Sequence[object]]) -> tuple[object, ...]:
    (row,) = made.release(exact, ZeroNoise()).rows
    return tuple(row)


def test_a_person_with_more_values_counts_as_that_many_at_its_mean() -> None:
    made = plan(SQL, catalog("main"), PlanRequest(1.0))
    exact = duckdb_with(HEAVY + LIGHT).execute(made.sql).fetchall()
    assert _released(made, exact) == pytest.approx(EXPECTED)


@pytest.mark.postgres
def test_postgres_scales_alike(pg_dsn: str, pg_schema: str) -> None:
    load_postgres(pg_dsn, pg_schema, HEAVY + LIGHT)
    made = plan(SQL, catalog(pg_schema), PlanRequest(1.0, "postgres"))
    with psycopg.connect(pg_dsn) as conn:
        exact = conn.execute(made.sql).fetchall()
    on_duckdb = plan(SQL, catalog("main"), PlanRequest(1.0))
    assert _released(made, exact) == pytest.approx(EXPECTED)
    assert [int(v) for v in exact[0]] == list(
        duckdb_with(HEAVY + LIGHT).execute(on_duckdb.sql).fetchone() or ()
    )


def test_grouped_the_same() -> None:
    """By department (each person's groups ranked, ``bound_per_unit._ranked``): group A
    holds the visits above, B one visit of patient 6."""
    rows = [*HEAVY, *LIGHT, (20, 6, "B", 30.0, 4)]
    made = plan(
        "SELECT department, AVG(cost), VAR_POP(cost) FROM visits GROUP BY department",
        catalog("main"),
        PlanRequest(1.0),
    )
    exact = duckdb_with(rows).execute(made.sql).fetchall()
    released = {row[0]: row[1:] for row in made.release(exact, ZeroNoise()).rows}
    assert released["A"] == pytest.approx((EXPECTED[0], EXPECTED[2]))
    assert released["B"] == pytest.approx((30.0, 0.0))


def test_plain_sums_stay_clamped() -> None:
    """SUM(cost) alone keeps a person's whole sum up to 3 visits' worth (10 x 10 = 100 of at
    most 300): scaled, it would lose 70 of it."""
    made = plan("SELECT SUM(cost) FROM visits", catalog("main"), PlanRequest(1.0))
    (spec,) = (m.spec for m in made.measurements)
    assert spec.per_value_rows == 0
    exact = duckdb_with(HEAVY + LIGHT).execute(made.sql).fetchall()
    assert _released(made, exact) == pytest.approx((100.0 + 360.0,))


def test_the_scaled_sums_count_their_values_with_the_average_s_count() -> None:
    made = plan(
        "SELECT AVG(cost) FILTER (WHERE stay > 1), VAR_SAMP(cost) FROM visits",
        catalog("main"),
        PlanRequest(1.0),
    )
    specs = {m.spec.key: m.spec for m in made.measurements}
    scaled = [s for s in specs.values() if s.per_value_rows]
    assert len(scaled) == 3  # two centred sums (filtered or not) and one sum of squares
    for spec in scaled:
        count = specs[spec.values]
        assert spec.per_value_rows == 3 and count.argument is not None
        assert count.filter == spec.filter
    filtered = next(s for s in scaled if s.filter is not None)
    assert specs[filtered.values].filter is not None


ANY_COST = st.one_of(
    st.none(),
    st.integers(-800, 1600).map(lambda k: k / 8),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e300, -1e300, 5e-324]),
)
ANY_STAY = st.one_of(st.none(), st.integers(-5, 40))
OTHERS: list[Row] = [*LIGHT, (30, 6, "B", 30.0, 4), (31, 6, "C", 70.0, 1)]
QUERIES = [
    "SELECT AVG(cost), VAR_POP(cost), STDDEV_SAMP(stay), SUM(cost), COUNT(cost) FROM visits",
    "SELECT department, AVG(cost), VAR_SAMP(stay), SUM(stay), COUNT(stay) FROM visits "
    "GROUP BY department",
]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["A", "B", "C"]), ANY_COST, ANY_STAY), max_size=14),
    st.sampled_from(QUERIES),
)
def test_one_person_moves_each_total_by_its_bound_at_most(
    visits: list[tuple[str, float | None, int | None]], sql: str
) -> None:
    """Neighbouring databases: patient 1's visits (any number, any values) or none. Each
    measurement's totals over all groups move by at most its bound (L1), the scaled ones
    included."""
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    keys = len(made.keys)
    person = [(100 + i, 1, d, c, s) for i, (d, c, s) in enumerate(visits)]
    totals = []
    for rows in (OTHERS, OTHERS + person):
        by_group = {
            tuple(r[:keys]): r[keys:] for r in scratch_with(rows).execute(made.sql).fetchall()
        }
        totals.append(by_group)
    groups = set(totals[0]) | set(totals[1])
    absent = (0,) * len(made.measurements)
    for index, measurement in enumerate(made.measurements):
        moved = sum(
            abs(int(totals[1].get(g, absent)[index]) - int(totals[0].get(g, absent)[index]))
            for g in groups
        )
        assert moved <= measurement.spec.unit_bound, measurement.spec.key


def test_limits_beyond_what_a_double_holds_are_clamped_not_scaled() -> None:
    """The scaled partial is clamped in DOUBLE: with limits of 2^53 or more (999,999 rows of
    values up to 2^40), a clamp in DOUBLE could pass the limit by its rounding (63 here); such a
    sum is clamped in BIGINT as a plain one is (a second reader's finding)."""
    policy = TablePolicy(
        privacy_unit="pid",
        max_rows_per_unit=999_999,
        columns={"y": ColumnPolicy(lower=-(2**40), upper=2**40 - 3)},
    )
    wide = build_catalog(
        {"t": {"pid": ColumnType.INTEGER, "y": ColumnType.INTEGER}}, {"t": policy}, schema="main"
    )
    made = plan("SELECT AVG(y) FROM t", wide, PlanRequest(1.0))
    centred = made.measurements[0].spec
    assert centred.centre != 0 and centred.per_value_rows == 0
    conn = duckdb.connect()
    conn.execute(
        "CREATE TABLE t AS SELECT 1::BIGINT AS pid, (2^40 - 3)::BIGINT AS y FROM range(999999)"
    )
    total = conn.execute(made.sql).fetchone()
    assert total is not None and int(total[0]) <= centred.unit_bound
