"""JOIN … USING (c): the column ``c`` on each side, as PostgreSQL reads it.

A row-level subquery (or CTE) is inlined: the outer query reads its tables under its alias.
``JOIN (SELECT birth_year AS patient_id FROM patients) s USING (patient_id)`` then joined on
patients.patient_id, not on birth_year: another question than the SQL asks. USING with such
a subquery on either side is now refused unless ``c`` is a column of that name of one of its
tables, selected as it is; then it plans as the JOIN … ON it means.

Between tables, ``USING (c)`` compared ``c`` of the table just before the join: after ``a
LEFT JOIN b USING (c)``, a further ``LEFT JOIN x USING (c)`` matched ``x.c`` with ``b.c``
(NULL where ``b`` has no row) instead of the merged ``c`` (``a.c``). Now the left side is
read as PostgreSQL reads it: the one column called ``c`` in any table on the left, a column
an earlier USING merged counting once, as the left one's.
"""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from rewriter import (
    ColumnPolicy,
    ColumnType,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from tests.rewriter.tables import COLUMNS, POLICY, catalog

CATALOG = catalog("main")


def _sql(sql: str) -> str:
    """The SQL the rewriter runs, without parentheses around a lone column (an inlined
    subquery's column written in ON is parenthesized, as any of its expressions)."""
    made = sqlglot.parse_one(plan(sql, CATALOG, PlanRequest(1.0, delta=0.4)).sql, read="duckdb")

    def bare(node: exp.Expr) -> exp.Expr:
        return (
            node.this if isinstance(node, exp.Paren) and isinstance(node.this, exp.Column) else node
        )

    return made.transform(bare).sql(dialect="duckdb")


def _rejected(sql: str) -> Rejected:
    with pytest.raises(Rejected) as caught:
        plan(sql, CATALOG, PlanRequest(1.0))
    return caught.value


@pytest.mark.parametrize(
    "sql",
    [
        # Renamed: joined on patients.patient_id, not on birth_year, before the fix.
        "SELECT COUNT(*) FROM visits v JOIN (SELECT birth_year AS patient_id FROM patients) s "
        "USING (patient_id)",
        "WITH s AS (SELECT birth_year AS patient_id FROM patients) "
        "SELECT COUNT(*) FROM visits v JOIN s USING (patient_id)",
        "SELECT COUNT(*) FROM (SELECT birth_year AS patient_id FROM patients) s "
        "JOIN visits v USING (patient_id)",
        "SELECT COUNT(*) FROM visits v LEFT JOIN (SELECT name AS department, floor "
        "FROM departments) s USING (department)",
        # Computed.
        "SELECT COUNT(*) FROM visits v JOIN (SELECT coalesce(birth_year, 0) AS patient_id "
        "FROM patients) s USING (patient_id)",
        # Not selected: PostgreSQL finds no patient_id on the left; the inlined table has one.
        "SELECT COUNT(*) FROM (SELECT birth_year FROM patients) s JOIN visits v USING (patient_id)",
        # Two of the subquery's tables have a patient_id.
        "SELECT COUNT(*) FROM (SELECT a.patient_id, a.stay FROM visits a JOIN patients b "
        "ON a.patient_id = b.patient_id) s JOIN patients p USING (patient_id)",
    ],
)
def test_using_a_column_a_subquery_renames_is_refused(sql: str) -> None:
    error = _rejected(sql)
    assert "in a join with subquery" in error.message, error.message
    assert error.sqlstate == "0A000"
    assert error.hint is not None and "JOIN … ON" in error.hint


@pytest.mark.parametrize(
    ("sql", "same_as"),
    [
        (
            "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id, sex FROM patients) s "
            "USING (patient_id)",
            "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id, sex FROM patients) s "
            "ON v.patient_id = s.patient_id",
        ),
        (
            "WITH s AS (SELECT p.patient_id, p.sex FROM patients p) "
            "SELECT s.sex, COUNT(*) FROM visits v JOIN s USING (patient_id) GROUP BY s.sex",
            "WITH s AS (SELECT p.patient_id, p.sex FROM patients p) "
            "SELECT s.sex, COUNT(*) FROM visits v JOIN s ON v.patient_id = s.patient_id "
            "GROUP BY s.sex",
        ),
        (
            "SELECT COUNT(*) FROM visits v JOIN (SELECT * FROM patients) s USING (patient_id)",
            "SELECT COUNT(*) FROM visits v JOIN (SELECT * FROM patients) s "
            "ON v.patient_id = s.patient_id",
        ),
        (
            "SELECT COUNT(*) FROM (SELECT patient_id, birth_year FROM patients) s "
            "JOIN visits v USING (patient_id) WHERE patient_id > 1",
            "SELECT COUNT(*) FROM (SELECT patient_id, birth_year FROM patients) s "
            "JOIN visits v ON s.patient_id = v.patient_id WHERE s.patient_id > 1",
        ),
        # On the left, from the subquery's second table (inlined as s__v).
        (
            "SELECT COUNT(*) FROM (SELECT d.floor, v.patient_id FROM departments d "
            "JOIN visits v ON v.department = d.name) s JOIN patients p USING (patient_id)",
            "SELECT COUNT(*) FROM (SELECT d.floor, v.patient_id FROM departments d "
            "JOIN visits v ON v.department = d.name) s JOIN patients p "
            "ON s.patient_id = p.patient_id",
        ),
        # A per-person subquery is a table of its selected columns.
        (
            "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id, COUNT(*) AS n FROM visits "
            "GROUP BY patient_id) s USING (patient_id)",
            "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id, COUNT(*) AS n FROM visits "
            "GROUP BY patient_id) s ON v.patient_id = s.patient_id",
        ),
        # Between tables, as before.
        (
            "SELECT p.sex, COUNT(*) FROM visits v JOIN patients p USING (patient_id) "
            "GROUP BY p.sex",
            "SELECT p.sex, COUNT(*) FROM visits v JOIN patients p "
            "ON v.patient_id = p.patient_id GROUP BY p.sex",
        ),
        # The left column is found in any table on the left (was: only in the one just
        # before the join, so this was refused).
        (
            "SELECT COUNT(*) FROM patients p JOIN departments d ON d.name = p.sex "
            "JOIN visits v USING (patient_id)",
            "SELECT COUNT(*) FROM patients p JOIN departments d ON d.name = p.sex "
            "JOIN visits v ON p.patient_id = v.patient_id",
        ),
    ],
)
def test_using_a_plain_column_plans_as_join_on(sql: str, same_as: str) -> None:
    assert _sql(sql) == _sql(same_as)


def test_an_unqualified_using_column_of_a_subquery_on_the_right_is_refused() -> None:
    """It means the left one (after a LEFT JOIN, also where the subquery has no row): the
    inlined subquery would have given its own."""
    error = _rejected(
        "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id FROM patients) s "
        "USING (patient_id) WHERE patient_id > 1"
    )
    assert error.sqlstate == "42702"
    assert "ambiguous" in error.message
    assert _sql(
        "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id FROM patients) s "
        "USING (patient_id) WHERE v.patient_id > 1"
    )


def test_natural_join_with_a_subquery_is_refused() -> None:
    error = _rejected(
        "SELECT COUNT(*) FROM visits v NATURAL JOIN (SELECT patient_id FROM patients) s"
    )
    assert "NATURAL JOIN is not supported" in error.message


# Two public lookups keyed by department (unique in each), as visits is.
LOOKUPS = build_catalog(
    {
        "visits": COLUMNS,
        "wards": {"department": ColumnType.TEXT, "floor": ColumnType.INTEGER},
        "heads": {"department": ColumnType.TEXT, "head": ColumnType.TEXT},
    },
    {
        "visits": POLICY,
        "wards": TablePolicy(public=True, columns={"floor": ColumnPolicy(domain=[1, 2])}),
        "heads": TablePolicy(public=True, columns={"head": ColumnPolicy(domain=["x", "y"])}),
    },
    schema="main",
    unique={"wards": ["department"], "heads": ["department"]},
)


def _lookups(sql: str) -> str:
    return plan(sql, LOOKUPS, PlanRequest(1.0)).sql


def test_a_merged_using_column_is_the_left_ones() -> None:
    """heads joins on visits.department (the merged column), not on wards.department,
    which is NULL for the departments wards does not list."""
    assert _lookups(
        "SELECT h.head, COUNT(*) FROM visits v LEFT JOIN wards w USING (department) "
        "LEFT JOIN heads h USING (department) GROUP BY h.head"
    ) == _lookups(
        "SELECT h.head, COUNT(*) FROM visits v LEFT JOIN wards w ON v.department = w.department "
        "LEFT JOIN heads h ON v.department = h.department GROUP BY h.head"
    )


@pytest.mark.parametrize(
    ("sql", "sqlstate", "words"),
    [
        (
            "SELECT COUNT(*) FROM visits v LEFT JOIN wards w ON w.floor = 1 "
            "LEFT JOIN heads h USING (department)",
            "42702",
            'common column name "department" appears more than once in left table',
        ),
        (
            "SELECT COUNT(*) FROM visits v LEFT JOIN wards w USING (floor)",
            "42703",
            'column "floor" specified in USING clause does not exist in left table',
        ),
        (
            "SELECT COUNT(*) FROM visits v LEFT JOIN wards w USING (stay)",
            "42703",
            'column "stay" specified in USING clause does not exist in right table',
        ),
        (
            "SELECT COUNT(*) FROM visits v LEFT JOIN wards w USING (department, department)",
            "42701",
            'column name "department" appears more than once in USING clause',
        ),
    ],
)
def test_using_columns_are_found_as_postgresql_finds_them(
    sql: str, sqlstate: str, words: str
) -> None:
    with pytest.raises(Rejected) as caught:
        plan(sql, LOOKUPS, PlanRequest(1.0))
    assert caught.value.sqlstate == sqlstate
    assert words in caught.value.message


def test_an_unqualified_merged_column_is_the_left_tables_as_in_postgresql() -> None:
    """After JOIN … USING (c), an unqualified c is the merged column (it was refused as
    ambiguous); a column both tables have that USING did not merge stays ambiguous."""
    assert _lookups(
        "SELECT department, COUNT(*) FROM visits v LEFT JOIN wards w USING (department) "
        "WHERE department <> 'B' GROUP BY department"
    ) == _lookups(
        "SELECT v.department, COUNT(*) FROM visits v LEFT JOIN wards w USING (department) "
        "WHERE v.department <> 'B' GROUP BY v.department"
    )
    with pytest.raises(Rejected, match='column reference "department" is ambiguous'):
        _lookups(
            "SELECT COUNT(*) FROM visits v LEFT JOIN wards w ON v.department = w.department "
            "WHERE department <> 'B'"
        )
