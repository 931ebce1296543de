"""Sensitivity of quantiles on neighbouring databases: removing all rows of one person
changes the scores of each group by at most Δ = max_rows_per_unit · max(p, q - p) (L∞), in at
most max_groups_per_unit groups, and the selection is calibrated to exactly that.

The rewritten SQL runs on DuckDB for D and for D minus one person. Its random draws (which
rows of a person count, which groups) are replaced by a hash of the row or of the person and
group, so that both runs draw the same for everyone else (a coupling: each person's
choice depends on their own rows only, as with independent random draws). Persons may have
more rows and more groups than the bounds allow."""

from __future__ import annotations

import functools

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter import Plan, PlanRequest, build_catalog, plan
from rewriter.quantile_selection import QuantileSelection, quantile_scores, score_sensitivity
from tests.rewriter import tables
from tests.rewriter.test_neighbours import database, visit

CATALOG = build_catalog(
    {
        "visits": tables.COLUMNS,
        "patients": tables.PATIENT_COLUMNS,
        "departments": tables.DEPARTMENT_COLUMNS,
        "prescriptions": tables.RX_COLUMNS,
    },
    {
        "visits": tables.POLICY,  # 3 rows, 2 groups per person
        "patients": tables.PATIENT_POLICY,
        "departments": tables.DEPARTMENT_POLICY,
        "prescriptions": tables.RX_POLICY,
    },
    schema="main",
    unique=tables.UNIQUE,
)

# (query, the column that identifies a row of the driving table t0)
QUERIES = [
    ("SELECT MEDIAN(cost) FROM visits", "visit_id"),
    (
        "SELECT department, COUNT(*), percentile_cont(0.9) WITHIN GROUP "
        "(ORDER BY stay * 2 - cost) FROM visits GROUP BY department",
        "visit_id",
    ),
    (
        "SELECT p.sex, quantile_cont(v.cost, 0.25) FILTER (WHERE v.stay > 3), MEDIAN(v.stay) "
        "FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.sex",
        "visit_id",
    ),
    (
        "SELECT CASE WHEN stay > 4 THEN 'long' ELSE 'short' END, quantile_disc(cost, 0.0), "
        "percentile_cont(1) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY 1",
        "visit_id",
    ),
    ("SELECT quantile_cont(dose, 0.7) FROM prescriptions", "rx_id"),
]


def coupled(sql: str, row_id: str) -> str:
    """The plan's SQL with its random draws replaced by hashes (see the module doc)."""
    row_draw = 'RANDOM() AS "row_draw"'
    group_draw = 'RANDOM() AS "group_draw"'
    assert row_draw in sql
    sql = sql.replace(row_draw, f'HASH("t0"."{row_id}") AS "row_draw"')
    # Per person and group: the person and the group's key, hashed (c0 is the person).
    return sql.replace(group_draw, 'HASH("p"."c0", ANY_VALUE("p"."c1")) AS "group_draw"')


@functools.cache
def planned(query: str, row_id: str) -> tuple[Plan, str]:
    """The plan of ``query`` and its coupled SQL. Planning is deterministic: once per
    query, not once per example."""
    made = plan(query, CATALOG, PlanRequest(1.0))
    return made, coupled(made.sql, row_id)


def counts(
    conn: duckdb.DuckDBPyConnection, sql: str, keys: int
) -> dict[tuple[object, ...], list[list[int]]]:
    """Per group, each measurement's counts per bin (other measurements: an empty list)."""
    return {
        tuple(row[:keys]): [
            [int(c) for c in value] if isinstance(value, list) else [] for value in row[keys:]
        ]
        for row in conn.execute(sql).fetchall()
    }


@pytest.mark.parametrize(("query", "row_id"), QUERIES)
@settings(max_examples=20, deadline=None)
@given(
    visits=st.lists(visit, max_size=25),
    doses=st.lists(st.tuples(st.integers(1, 25), st.integers(-1, 12)), max_size=20),
    removed=st.integers(1, 5),
)
def test_one_person_moves_scores_within_the_sensitivity(
    query: str,
    row_id: str,
    visits: list[tuple[int, str, float | None, int | None]],
    doses: list[tuple[int, int]],
    removed: int,
) -> None:
    made, sql = planned(query, row_id)
    keys = len(made.keys)
    with_person = counts(database(visits, doses, None), sql, keys)
    without = counts(database(visits, doses, removed), sql, keys)
    for index, measurement in enumerate(made.measurements):
        selection = measurement.mechanism
        if not isinstance(selection, QuantileSelection):
            continue
        alpha = measurement.spec.alpha
        bins = measurement.spec.bins
        assert alpha is not None and bins is not None
        empty = [0] * bins.count
        changed = 0
        for cell in set(with_person) | set(without):
            before = with_person[cell][index] if cell in with_person else empty
            after = without[cell][index] if cell in without else empty
            # The person's rows in this group: at most max_rows_per_unit of them.
            assert sum(abs(a - b) for a, b in zip(before, after, strict=True)) <= (
                made.max_rows_per_unit
            )
            moved = max(
                abs(a - b)
                for a, b in zip(
                    quantile_scores(before, alpha), quantile_scores(after, alpha), strict=True
                )
            )
            assert moved <= selection.sensitivity, (query, cell, moved)
            changed += before != after
        assert changed <= made.max_groups_per_unit
        # ...and the selection is calibrated to exactly that.
        assert selection.sensitivity == score_sensitivity(made.max_rows_per_unit, alpha)
        assert selection.groups == made.max_groups_per_unit
