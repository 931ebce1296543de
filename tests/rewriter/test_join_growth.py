"""Joins may not multiply one person's rows without limit: how long a query runs is not
protected by the noise, and a reviewer read a patient's income in 8 queries at ε=0.001 from
``WHERE p.patient_id = 42 AND p.income >= x`` with nine public tables joined ``ON TRUE``
(3 s when it held, 0.2 s when not), and a patient's number of visits from five self-joins
of visits (49 s against 0.3 s). rewriter.passes.check_joins now refuses both shapes."""

from __future__ import annotations

import pytest

from rewriter import PlanRequest, Rejected, plan
from rewriter.passes.check_joins import MAX_MULTIPLYING_TABLES, MAX_PUBLIC_TABLES
from tests.rewriter.tables import catalog

CATALOG = catalog("main")


def _planned(sql: str) -> None:
    plan(sql, CATALOG, PlanRequest(1.0))


def _cross_joins(count: int) -> str:
    return "SELECT COUNT(*) FROM patients p " + " ".join(
        f"JOIN departments d{i} ON TRUE" for i in range(count)
    )


@pytest.mark.parametrize(
    "sql",
    [
        _cross_joins(1),
        "SELECT COUNT(*) FROM patients p JOIN departments d ON d.floor = 1",
        "SELECT COUNT(*) FROM patients p JOIN departments d ON d.floor = d.floor",
        "SELECT COUNT(*) FROM patients p JOIN departments d ON d.floor < p.birth_year",
        "SELECT COUNT(*) FROM patients p LEFT JOIN departments d ON p.sex = 'F'",
        # The equality of a LEFT JOIN's ON does not restrict the table before it.
        "SELECT COUNT(*) FROM departments d JOIN visits v ON TRUE "
        "LEFT JOIN departments e ON e.name = d.name",
        "SELECT COUNT(*) FROM departments d JOIN visits v ON d.floor = 2",
    ],
)
def test_a_public_table_needs_an_equality_with_another_table(sql: str) -> None:
    with pytest.raises(Rejected) as rejected:
        _planned(sql)
    assert rejected.value.message.startswith('public table "departments" must be joined with')
    assert rejected.value.hint is not None
    assert "e.g. JOIN departments d" in rejected.value.hint and " ON d" in rejected.value.hint


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM visits v JOIN departments d ON d.name = v.department",
        "SELECT COUNT(*) FROM visits v JOIN departments d ON v.department = d.name AND d.floor = 1",
        "SELECT COUNT(*) FROM visits v LEFT JOIN departments d ON d.name = v.department",
        "SELECT COUNT(*) FROM departments d JOIN visits v ON v.department = d.name",
        "SELECT COUNT(*) FROM visits v JOIN departments d ON d.name = v.department "
        "JOIN departments e ON e.floor = d.floor",
        "SELECT COUNT(*) FROM visits v JOIN departments d ON lower(d.name) = v.department",
    ],
)
def test_lookups_on_an_equality_are_planned(sql: str) -> None:
    _planned(sql)


def test_at_most_three_public_tables() -> None:
    joins = [f"JOIN departments d{i} ON d{i}.name = v.department" for i in range(4)]
    _planned(f"SELECT COUNT(*) FROM visits v {' '.join(joins[:MAX_PUBLIC_TABLES])}")
    with pytest.raises(Rejected) as rejected:
        _planned(f"SELECT COUNT(*) FROM visits v {' '.join(joins)}")
    assert rejected.value.message == (
        "a query may join at most 3 public lookup tables (this one joins 4)"
    )


def test_at_most_two_protected_tables_multiply_a_persons_rows() -> None:
    two = "SELECT COUNT(*) FROM visits v1 JOIN visits v2 ON v1.patient_id = v2.patient_id"
    _planned(two)
    # patients (one row per person) and a foreign-key parent multiply nothing.
    _planned(f"{two} JOIN patients p ON p.patient_id = v1.patient_id")
    _planned(
        "SELECT COUNT(*) FROM prescriptions rx JOIN visits v ON rx.visit_id = v.visit_id "
        "JOIN visits w ON w.patient_id = v.patient_id"
    )
    assert MAX_MULTIPLYING_TABLES == 2
    # v1 is the foreign-key parent of rx: the rows of v2 and rx multiply.
    _planned(f"{two} JOIN prescriptions rx ON rx.visit_id = v1.visit_id")
    for third in (
        "JOIN visits v3 ON v3.patient_id = v1.patient_id",
        "JOIN prescriptions rx ON rx.visit_id = v1.visit_id "
        "JOIN prescriptions rx2 ON rx2.visit_id = rx.visit_id",
    ):
        with pytest.raises(Rejected) as rejected:
            _planned(f"{two} {third}")
        assert rejected.value.message.startswith(
            "a query may join at most 2 protected tables with several rows per person "
        )
