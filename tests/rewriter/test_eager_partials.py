"""Partials summed per unit before the joins that hang off the unit
(rewriter.passes.eager_partials): the bounded query gives exactly the totals of the
per-unit query that joins every row first, on random data, and is used only where that
holds."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter import PlanRequest, plan
from rewriter.passes import bound_per_unit
from tests.rewriter.coupling import in_key_order
from tests.rewriter.scratch import fresh_duckdb, insert
from tests.rewriter.test_neighbours import CATALOG, SCHEMA

# Joins off the unit only: the partials are summed before patients (and what hangs off it).
EAGER = [
    "SELECT p.sex, COUNT(*), SUM(v.stay) FROM visits v JOIN patients p "
    "ON v.patient_id = p.patient_id GROUP BY p.sex",
    "SELECT p.sex, v.department, COUNT(*), AVG(v.cost), COUNT(DISTINCT v.patient_id) "
    "FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
    "WHERE p.birth_year > 1951 AND v.stay < 20 GROUP BY p.sex, v.department",
    "SELECT COUNT(*), SUM(v.cost), VAR_POP(v.stay) FROM visits v JOIN patients p "
    "ON p.patient_id = v.patient_id WHERE p.sex = 'F'",
    # A public table joined to the upper one: upper too.
    "SELECT d.floor, COUNT(*) FILTER (WHERE v.stay > 3), SUM(v.stay) FROM visits v "
    "JOIN patients p ON v.patient_id = p.patient_id JOIN departments d "
    "ON d.name = CASE WHEN p.sex = 'F' THEN 'A' ELSE 'B' END GROUP BY d.floor",
    # A LEFT JOIN of the lower tables stays below.
    "SELECT d.floor, p.sex, COUNT(*), SUM(v.stay) FROM visits v JOIN patients p "
    "ON v.patient_id = p.patient_id LEFT JOIN departments d ON v.department = d.name "
    "GROUP BY d.floor, p.sex",
    # The unit reached through visits: prescriptions' partials, then patients.
    "SELECT p.sex, COUNT(*), SUM(rx.dose) FROM prescriptions rx JOIN visits v "
    "ON rx.visit_id = v.visit_id JOIN patients p ON v.patient_id = p.patient_id "
    "GROUP BY p.sex",
]

# Every row must meet the upper rows first: written as before.
PLAIN = [
    # A measurement reads patients.
    "SELECT p.sex, COUNT(*), AVG(p.birth_year) FROM visits v JOIN patients p "
    "ON v.patient_id = p.patient_id GROUP BY p.sex",
    # A key reads both sides.
    "SELECT CASE WHEN p.sex = 'F' AND v.department = 'A' THEN 'x' ELSE 'y' END, COUNT(*) "
    "FROM visits v "
    "JOIN patients p ON v.patient_id = p.patient_id GROUP BY 1",
    # A condition reads both sides.
    "SELECT p.sex, COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
    "WHERE p.birth_year > v.stay GROUP BY p.sex",
    # The ON reads another column of the lower table.
    "SELECT p.sex, COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
    "AND p.birth_year > v.stay GROUP BY p.sex",
    # A COUNT(DISTINCT unit) filtered on the upper table.
    "SELECT COUNT(DISTINCT v.patient_id) FILTER (WHERE p.sex = 'F'), COUNT(*) FROM visits v "
    "JOIN patients p ON v.patient_id = p.patient_id",
    # No join at all.
    "SELECT department, COUNT(*) FROM visits GROUP BY department",
]


def _plain(monkeypatch: pytest.MonkeyPatch, sql: str) -> str:
    """The bounded SQL of ``sql`` without summing before the joins."""
    with monkeypatch.context() as patched:
        patched.setattr(bound_per_unit, "eager_partials", lambda *a, **k: None)
        return in_key_order(plan(sql, CATALOG, PlanRequest(1.0)))


@pytest.mark.parametrize("sql", EAGER)
def test_sums_before_the_joins_off_the_unit(sql: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made = plan(sql, CATALOG, PlanRequest(1.0))
    assert 'AS "e"' in made.sql
    assert 'AS "e"' not in _plain(monkeypatch, sql)


@pytest.mark.parametrize("sql", PLAIN)
def test_joins_every_row_first_otherwise(sql: str) -> None:
    assert 'AS "e"' not in plan(sql, CATALOG, PlanRequest(1.0)).sql


visit = st.tuples(
    st.integers(1, 5),
    st.sampled_from(["A", "B", "C"]),
    st.one_of(st.none(), st.floats(-50, 500, allow_nan=False), st.just(float("nan"))),
    st.one_of(st.none(), st.integers(-2, 30)),
)
# Patients rows: none, one or several per patient (a join can multiply a visit's rows).
person = st.tuples(
    st.integers(1, 6), st.sampled_from(["F", "M", "X", None]), st.integers(1940, 1960)
)


@functools.cache
def planned(sql: str) -> tuple[str, str]:
    """The bounded SQL of ``sql``, and the same without summing before the joins, both in
    key order. Planning is deterministic: once per query, not once per example."""
    made = plan(sql, CATALOG, PlanRequest(1.0))
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(bound_per_unit, "eager_partials", lambda *a, **k: None)
        plain = in_key_order(plan(sql, CATALOG, PlanRequest(1.0)))
    return in_key_order(made), plain


@pytest.mark.parametrize("sql", EAGER)
@settings(max_examples=30, deadline=None)
@given(
    visits=st.lists(visit, max_size=30),
    people=st.lists(person, max_size=8),
    doses=st.lists(st.tuples(st.integers(1, 30), st.integers(-1, 12)), max_size=20),
)
def test_same_totals_as_joining_every_row(
    sql: str,
    visits: list[tuple[int, str, float | None, int | None]],
    people: list[tuple[int, str | None, int]],
    doses: list[tuple[int, int]],
) -> None:
    conn = fresh_duckdb()  # a database of its own (tests.rewriter.scratch)
    conn.execute(SCHEMA)
    insert(conn, "main.visits", [(i + 1, p, d, c, s) for i, (p, d, c, s) in enumerate(visits)])
    insert(conn, "main.patients", people)
    insert(conn, "main.prescriptions", [(i, v, d) for i, (v, d) in enumerate(doses)])
    eager, plain = planned(sql)
    assert sorted(conn.execute(eager).fetchall(), key=repr) == sorted(
        conn.execute(plain).fetchall(), key=repr
    )
