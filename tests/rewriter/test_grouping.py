"""GROUP BY: public domains, per-unit group bounding, and its privacy map."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter import Catalog, ColumnPolicy, PlanRequest, TablePolicy, build_catalog, plan
from tests.rewriter import reference
from tests.rewriter.coupling import in_key_order
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import (
    COLUMNS,
    PATIENT_COLUMNS,
    PATIENT_POLICY,
    POLICY,
    Row,
    catalog,
    duckdb_with,
)


def catalog_with_groups(max_groups: int) -> Catalog:
    policy = TablePolicy(
        privacy_unit="patient_id",
        max_rows_per_unit=3,
        max_groups_per_unit=max_groups,
        columns={
            "cost": ColumnPolicy(lower=0, upper=100),
            "stay": ColumnPolicy(lower=1, upper=10),
            "department": ColumnPolicy(domain=["A", "B", "C"]),
        },
    )
    return build_catalog({"visits": COLUMNS}, {"visits": policy}, schema="main")


def test_every_domain_value_is_released_and_nothing_else() -> None:
    query_plan = plan(
        "SELECT department, COUNT(*) FROM visits GROUP BY department",
        catalog("main"),
        PlanRequest(1.0),
    )
    rows: list[Row] = [(1, 1, "A", 1.0, 1), (2, 2, "Z", 1.0, 1)]  # Z is not in the domain
    exact = duckdb_with(rows).execute(query_plan.sql).fetchall()
    assert exact == [("A", 1)]  # the database drops values outside the domain
    released = query_plan.release(exact, ZeroNoise())
    assert released.rows == (("A", 1), ("B", 0), ("C", 0))  # empty groups too


def test_group_bounding_keeps_at_most_max_groups_per_unit() -> None:
    """A patient in three departments counts in only one when max_groups_per_unit = 1."""
    query_plan = plan(
        "SELECT department, COUNT(DISTINCT patient_id) FROM visits GROUP BY department",
        catalog_with_groups(1),
        PlanRequest(1.0),
    )
    rows: list[Row] = [
        (i, p, d, 1.0, 1)
        for i, (p, d) in enumerate([(1, "A"), (1, "B"), (1, "C"), (2, "A"), (2, "B"), (3, "C")])
    ]
    conn = duckdb_with(rows)
    chosen = set()
    for _ in range(40):
        totals = dict(conn.execute(query_plan.sql).fetchall())
        assert sum(totals.values()) == 3  # each of the 3 patients counted exactly once
        chosen.add(tuple(sorted(totals.items())))
    assert len(chosen) > 1, "the groups kept should be chosen at random"


def test_one_group_per_unit_needs_no_running_count_of_rows() -> None:
    """With one group per unit, the group it keeps is its first, whose rows count as at most
    max_rows_per_unit: the bounded query ranks the groups without counting rows so far."""
    one, two = (
        plan(
            "SELECT department, COUNT(*), SUM(stay) FROM visits GROUP BY department",
            catalog_with_groups(groups),
            PlanRequest(1.0),
        )
        for groups in (1, 2)
    )
    assert "rows_so_far" not in one.sql and '"group_rank" <= 1' in one.sql
    assert "rows_so_far" in two.sql and '"group_rank" <= 2' in two.sql


@pytest.mark.parametrize(("max_groups", "expected"), [(1, 1), (2, 2), (5, 3)])
def test_sensitivity_scales_with_groups(max_groups: int, expected: int) -> None:
    query_plan = plan(
        "SELECT department, COUNT(*) FROM visits GROUP BY department",
        catalog_with_groups(max_groups),
        PlanRequest(0.5),
    )
    (count,) = query_plan.measurements
    # At most min(max_groups, 3 rows, 3 departments) groups; their rows add up to 3 at most.
    assert query_plan.max_groups_per_unit == expected
    assert count.mechanism.sensitivity == 3
    assert count.mechanism.scale == pytest.approx(3 / 0.5)
    assert count.mechanism.epsilon() <= 0.5


rows_strategy = st.lists(
    st.tuples(
        st.integers(1, 6),
        st.sampled_from(["A", "B", "C", "D"]),
        st.one_of(st.none(), st.integers(-80, 800).map(lambda k: k / 4)),
        st.one_of(st.none(), st.integers(-3, 14)),
    ),
    max_size=50,
)


@pytest.mark.parametrize("max_groups", [1, 3])
@settings(max_examples=40, deadline=None)
@given(rows_strategy)
def test_grouped_answer_equals_independent_python(
    max_groups: int, data: list[tuple[int, str, float | None, int | None]]
) -> None:
    rows: list[Row] = [(i, p, d, c, s) for i, (p, d, c, s) in enumerate(data)]
    query_plan = plan(
        "SELECT department, COUNT(*), SUM(stay), SUM(cost) FROM visits "
        "WHERE stay IS NULL OR stay <> 5 GROUP BY department",
        catalog_with_groups(max_groups),
        PlanRequest(1.0),
    )
    exact = duckdb_with(rows).execute(in_key_order(query_plan)).fetchall()
    got = sorted([str(k), *(int(v) for v in vs)] for k, *vs in exact)
    # The departments each patient keeps, in key order: at most max_groups, within its
    # 3 rows (the first one kept whatever its rows: they count as 3 at most).
    rows = reference.kept(
        rows,
        lambda r: r[2],
        lambda r: r[2] in ("A", "B", "C") and (r[4] is None or r[4] != 5),
        groups=max_groups,
    )

    def keep(dept: str) -> reference.Callable[[Row], bool]:
        return lambda r: r[2] == dept and (r[4] is None or r[4] != 5)

    expected = [
        [
            d,
            reference.count_rows(rows, keep(d)),
            reference.sum_stay(rows, keep(d)),
            reference.sum_cost_steps(rows, keep(d)),
        ]
        for d in ("A", "B", "C")
        if reference.per_unit(rows, keep(d))
    ]
    assert got == expected


def test_released_groups_match_on_both_orders() -> None:
    """Keys come back as database values (dates, numbers) and are matched to the domain."""
    conn = duckdb.connect()
    conn.execute(
        "CREATE TABLE visits (visit_id BIGINT, patient_id BIGINT, department VARCHAR,"
        " cost DOUBLE, stay INTEGER)"
    )
    conn.execute("INSERT INTO visits VALUES (1, 1, 'B', 1, 2), (2, 2, 'A', 1, 2)")
    query_plan = plan(
        "SELECT department AS d, COUNT(*) AS n FROM visits GROUP BY d ORDER BY n DESC, d",
        catalog("main"),
        PlanRequest(1.0),
    )
    released = query_plan.release(conn.execute(query_plan.sql).fetchall(), ZeroNoise())
    assert released.rows == (("A", 1), ("B", 1), ("C", 0))


def test_a_person_with_only_null_values_adds_nothing_to_a_sum() -> None:
    """SUM(stay * 2 - cost) ranges over [-98, 20]: a patient whose values are all NULL
    must add 0, not the lower clamp of its partial (GREATEST and LEAST skip NULL)."""
    query_plan = plan(
        "SELECT department, SUM(stay * 2 - cost) FROM visits GROUP BY department",
        catalog("main"),
        PlanRequest(1.0),
    )
    rows: list[Row] = [(1, 1, "A", None, None), (2, 2, "A", 1.0, 3)]
    exact = dict(duckdb_with(rows).execute(in_key_order(query_plan)).fetchall())
    (total,) = query_plan.measurements
    step = total.spec.grid.step if total.spec.grid else 1.0
    assert exact == {"A": round((3 * 2 - 1.0) / step)}


def test_a_person_keeps_groups_within_its_rows_chosen_at_random() -> None:
    """max_rows_per_unit = 3 rows in all: a patient with 3 visits in A and 2 in B keeps one
    of the two departments, drawn at random; one with 1 in A and 2 in B keeps both."""
    query_plan = plan(
        "SELECT department, COUNT(*) FROM visits GROUP BY department",
        catalog_with_groups(2),
        PlanRequest(1.0),
    )
    visits = [(1, "A"), (1, "A"), (1, "A"), (1, "B"), (1, "B"), (2, "A"), (2, "B"), (2, "B")]
    rows: list[Row] = [(i, p, d, 1.0, 1) for i, (p, d) in enumerate(visits)]
    conn = duckdb_with(rows)
    seen = set()
    for _ in range(40):
        totals = dict(conn.execute(query_plan.sql).fetchall())
        # Patient 2 adds A: 1, B: 2; patient 1 adds A: 3 or B: 2, never both.
        assert totals in ({"A": 4, "B": 2}, {"A": 1, "B": 4}), totals
        seen.add(tuple(sorted(totals.items())))
    assert len(seen) == 2, "the group kept should be drawn at random"


def test_whole_number_keys_beyond_2_53_stay_separate_cells() -> None:
    """As floats, 2^60 and 2^60 + 1 would be one released cell, in which one person could
    count twice (a Gaussian count of units is calibrated to one count per cell)."""
    made = plan(
        "SELECT stay, COUNT(DISTINCT patient_id) FROM visits GROUP BY stay",
        catalog("main"),
        PlanRequest(1.0, delta=1e-6),
    )
    rows = [(2**60, 500, 500), (2**60 + 1, 500, 500), (1.0, 500, 500), (Decimal(2), 500, 500)]
    released = made.release(rows, ZeroNoise())
    assert sorted(r[0] for r in released.rows) == [1, 2, 2**60, 2**60 + 1]


@pytest.mark.parametrize(
    ("patients_groups", "expected"),
    [
        (None, 2),  # patients leaves it unset: visits' cap (2) holds for the join
        (1, 1),  # set on both: the smaller
        (5, 2),
    ],
)
def test_a_joined_table_without_a_group_cap_does_not_lower_the_other(
    patients_groups: int | None, expected: int
) -> None:
    written = PATIENT_POLICY.model_dump(exclude_unset=True)
    if patients_groups is not None:
        written["max_groups_per_unit"] = patients_groups
    built = build_catalog(
        {"visits": COLUMNS, "patients": PATIENT_COLUMNS},
        {"visits": POLICY, "patients": TablePolicy.model_validate(written)},
        schema="main",
    )
    made = plan(
        "SELECT p.sex, COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
        "GROUP BY p.sex",
        built,
        PlanRequest(1.0),
    )
    assert made.max_groups_per_unit == expected
    assert f'"group_rank" <= {expected}' in made.sql
