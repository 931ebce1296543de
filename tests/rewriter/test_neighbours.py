"""Sensitivity on neighbouring databases: removing all rows of one person changes each
measurement's exact bounded totals (L1, over all groups) by no more than the sensitivity
the noise is calibrated to. Checked for every query shape the rewriter supports, on random
data, by running the rewritten SQL on DuckDB for D and for D minus one person."""

from __future__ import annotations

import functools

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter import Catalog, Plan, PlanRequest, build_catalog, plan
from tests.rewriter import tables
from tests.rewriter.coupling import in_key_order, sensitivity
from tests.rewriter.scratch import fresh_duckdb, insert

QUERIES = [
    "SELECT COUNT(*), SUM(cost), AVG(stay) FROM visits",
    "SELECT department, COUNT(*), SUM(stay * 2 - cost), COUNT(DISTINCT patient_id) "
    "FROM visits GROUP BY department",
    "SELECT CASE WHEN cost > 50 THEN 'hi' ELSE 'lo' END, VAR_POP(stay), "
    "COUNT(*) FILTER (WHERE stay > 3) FROM visits GROUP BY 1",
    "SELECT p.sex, COUNT(*), SUM(v.stay) FROM visits v JOIN patients p "
    "ON v.patient_id = p.patient_id GROUP BY p.sex",
    "SELECT COUNT(*), SUM(dose) FROM prescriptions",
    "SELECT v.department, SUM(rx.dose) FROM prescriptions rx JOIN visits v "
    "ON rx.visit_id = v.visit_id GROUP BY v.department",
    # Two prescriptions of one visit: the same parent row, the same person.
    "SELECT COUNT(*), SUM(rx.dose * rx2.dose) FROM prescriptions rx JOIN prescriptions rx2 "
    "ON rx.visit_id = rx2.visit_id",
    "SELECT v.department, COUNT(*) FROM prescriptions rx JOIN prescriptions rx2 "
    "ON rx2.visit_id = rx.visit_id JOIN visits v ON rx2.visit_id = v.visit_id "
    "GROUP BY v.department",
    "SELECT AVG(n), SUM(total) FROM (SELECT patient_id, COUNT(*) AS n, SUM(cost) AS total "
    "FROM visits GROUP BY patient_id) s",
    "SELECT d.floor, COUNT(*) FROM visits v JOIN departments d ON v.department = d.name "
    "GROUP BY d.floor",
    # A LEFT JOIN of a public table after the link (a link in its ON is refused).
    "SELECT d.floor, COUNT(*), SUM(v.stay) FROM visits v JOIN patients p "
    "ON v.patient_id = p.patient_id LEFT JOIN departments d ON v.department = d.name "
    "GROUP BY d.floor",
    # round(x, d) with d < 0: whole multiples of 10^-d.
    "SELECT department, SUM(round(cost, -1)), AVG(round(cost - 50, -2)), "
    "SUM(round(stay * 25, -2)) FROM visits GROUP BY department",
    # An unqualified name only the table has (the inlined subquery calls its own pid).
    "SELECT COUNT(*), SUM(v.stay) FROM visits v JOIN (SELECT patient_id AS pid, sex "
    "FROM patients) s ON v.patient_id = s.pid WHERE patient_id > 1 AND sex = 'F'",
    # A match on another value, tied to the person (or the visit) in the subquery's WHERE.
    "SELECT COUNT(*), SUM(stay) FROM visits v WHERE v.department IN (SELECT v2.department "
    "FROM visits v2 WHERE v2.patient_id = v.patient_id AND v2.cost > 100)",
    "SELECT department, COUNT(*), SUM(cost) FROM visits v WHERE v.department NOT IN "
    "(SELECT v2.department FROM visits v2 WHERE v.patient_id = v2.patient_id "
    "AND v2.cost > 100) GROUP BY department",
    "SELECT COUNT(*), SUM(cost) FROM visits v WHERE EXISTS (SELECT 1 FROM visits v2 "
    "WHERE v2.patient_id = v.patient_id AND v2.department = v.department AND v2.cost > 100)",
    "SELECT COUNT(*), SUM(dose) FROM prescriptions rx WHERE rx.dose IN "
    "(SELECT v.stay FROM visits v WHERE v.visit_id = rx.visit_id)",
    "SELECT COUNT(*) FROM visits v WHERE v.stay NOT IN (SELECT rx.dose FROM prescriptions rx "
    "WHERE rx.visit_id = v.visit_id)",
    # nullif, left and concat (rewriter.passes.row_functions): nullif(x, c) has x's range.
    "SELECT nullif(department, 'A'), COUNT(*), SUM(nullif(cost, 0)), AVG(nullif(stay, 2)) "
    "FROM visits WHERE concat(department, stay) <> 'B1' AND left(department, 1) <> 'C' "
    "GROUP BY 1",
]


def catalog() -> Catalog:
    """The test tables, with enough groups per person that no group is dropped at random."""
    policies = {
        "visits": tables.POLICY.model_copy(update={"max_groups_per_unit": 3}),
        "patients": tables.PATIENT_POLICY,
        "departments": tables.DEPARTMENT_POLICY,
        "prescriptions": tables.RX_POLICY.model_copy(update={"max_groups_per_unit": 3}),
    }
    return build_catalog(
        {
            "visits": tables.COLUMNS,
            "patients": tables.PATIENT_COLUMNS,
            "departments": tables.DEPARTMENT_COLUMNS,
            "prescriptions": tables.RX_COLUMNS,
        },
        policies,
        schema="main",
        unique=tables.UNIQUE,
    )


CATALOG = catalog()

visit = st.tuples(
    st.integers(1, 5),
    st.sampled_from(["A", "B", "C"]),
    st.one_of(st.none(), st.floats(-50, 500, allow_nan=False), st.just(float("nan"))),
    st.one_of(st.none(), st.integers(-2, 30)),
)


#: The tables, and the departments (public): one statement.
SCHEMA = ";\n".join(
    [
        tables.CREATE.format(schema="main"),
        "CREATE TABLE main.patients (patient_id BIGINT, sex VARCHAR, birth_year INTEGER)",
        "CREATE TABLE main.departments (name VARCHAR, floor INTEGER)",
        "INSERT INTO main.departments VALUES ('A', 1), ('B', 2), ('B', 2)",
        "CREATE TABLE main.prescriptions (rx_id BIGINT, visit_id BIGINT, dose INTEGER)",
    ]
)


def database(
    visits: list[tuple[int, str, float | None, int | None]],
    doses: list[tuple[int, int]],
    removed: int | None,
) -> duckdb.DuckDBPyConnection:
    """A database of its own (tests.rewriter.scratch); with ``removed``, without that
    person's visits, patients row and the prescriptions of their visits."""
    rows = [(i + 1, p, d, c, s) for i, (p, d, c, s) in enumerate(visits)]
    conn = fresh_duckdb()
    conn.execute(SCHEMA)
    kept = [r for r in rows if r[1] != removed]
    insert(conn, "main.visits", kept)
    people = [(p, "F" if p % 2 else "M", 1950 + p) for p in range(1, 6) if p != removed]
    insert(conn, "main.patients", people)
    kept_visits = {r[0] for r in kept}
    prescriptions = [(i, v, d) for i, (v, d) in enumerate(doses) if v in kept_visits]
    insert(conn, "main.prescriptions", prescriptions)
    return conn


@functools.cache
def planned(query: str) -> tuple[Plan, str]:
    """The plan of ``query`` and its SQL with the groups in key order. Planning is
    deterministic: once per query, not once per example."""
    made = plan(query, CATALOG, PlanRequest(1.0))
    return made, in_key_order(made)  # every other person keeps the same groups in both


def totals(
    conn: duckdb.DuckDBPyConnection, sql: str, keys: int
) -> dict[tuple[object, ...], list[int]]:
    return {tuple(row[:keys]): [int(v) for v in row[keys:]] for row in conn.execute(sql).fetchall()}


@pytest.mark.parametrize("query", QUERIES)
@settings(max_examples=25, deadline=None)
@given(
    visits=st.lists(visit, max_size=25),
    doses=st.lists(st.tuples(st.integers(1, 25), st.integers(-1, 12)), max_size=20),
    removed=st.integers(1, 5),
)
def test_one_person_moves_totals_within_the_sensitivity(
    query: str,
    visits: list[tuple[int, str, float | None, int | None]],
    doses: list[tuple[int, int]],
    removed: int,
) -> None:
    made, sql = planned(query)
    keys = len(made.keys)
    with_person = totals(database(visits, doses, None), sql, keys)
    without = totals(database(visits, doses, removed), sql, keys)
    for index, measurement in enumerate(made.measurements):
        change = sum(
            abs(
                with_person.get(cell, [0] * len(made.measurements))[index]
                - without.get(cell, [0] * len(made.measurements))[index]
            )
            for cell in set(with_person) | set(without)
        )
        bound = sensitivity(made, measurement)
        assert change <= bound, (query, measurement.spec.key, change, bound)
        # ...and the noise is calibrated to exactly that sensitivity.
        assert measurement.mechanism.sensitivity == bound
