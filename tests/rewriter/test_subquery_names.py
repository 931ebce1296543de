"""Unqualified column names in a query with an inlined row-level subquery (or CTE), resolved
as PostgreSQL resolves them.

A row-level subquery is inlined: the outer query reads its tables under its alias. An
unqualified name that the subquery and another table of the query both provide was read
as the subquery's column (``FROM visits v JOIN (SELECT patient_id, sex FROM patients) s ON
… WHERE patient_id > 3``), where PostgreSQL says ``column reference "patient_id" is
ambiguous``; and a column of the subquery's tables that it does not select was visible:
``WHERE patient_id > 3`` with ``(SELECT patient_id AS pid, sex FROM patients) s`` was
refused as ambiguous though only ``v`` has it, and ``WHERE birth_year > 3`` read
patients.birth_year, which PostgreSQL says does not exist. Now each name is resolved once
every FROM item's names are known: 42702 and 42703 exactly where PostgreSQL raises them,
checked here against PostgreSQL itself.
"""

from __future__ import annotations

import psycopg
import pytest
import sqlglot
from sqlglot import exp

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.tables import SAMPLE_ROWS, catalog, duckdb_with, load_postgres

# PostgreSQL: column reference "…" is ambiguous.
AMBIGUOUS = [
    "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id, sex FROM patients) s "
    "ON v.patient_id = s.patient_id WHERE patient_id > 3",
    "SELECT COUNT(*) FROM (SELECT patient_id, sex FROM patients) s JOIN visits v "
    "ON v.patient_id = s.patient_id WHERE patient_id > 3",
    "SELECT COUNT(*) FROM visits v JOIN (SELECT * FROM patients) s "
    "ON v.patient_id = s.patient_id WHERE patient_id > 3",
    "WITH s AS (SELECT patient_id, sex FROM patients) SELECT COUNT(*) FROM visits v JOIN s "
    "ON v.patient_id = s.patient_id WHERE patient_id > 3",
    "SELECT COUNT(*) FROM (SELECT patient_id, cost FROM visits) a JOIN "
    "(SELECT patient_id FROM patients) b ON a.patient_id = b.patient_id WHERE patient_id > 3",
    "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id, sex FROM patients) s "
    "ON patient_id = v.patient_id",
    "SELECT patient_id, COUNT(*) FROM visits v JOIN (SELECT patient_id, sex FROM patients) s "
    "ON v.patient_id = s.patient_id GROUP BY patient_id",
    "SELECT COUNT(*) FILTER (WHERE patient_id > 1) FROM visits v "
    "JOIN (SELECT patient_id, sex FROM patients) s ON v.patient_id = s.patient_id",
    "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id, sex FROM patients) s "
    "ON v.patient_id = s.patient_id HAVING COUNT(patient_id) > 0",
    # A per-person subquery and a row-level one.
    "SELECT COUNT(*) FROM (SELECT patient_id, sex FROM patients) s JOIN "
    "(SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) g "
    "ON s.patient_id = g.patient_id WHERE patient_id > 1",
    # Two columns of the subquery itself have that name.
    "SELECT COUNT(*) FROM (SELECT v.patient_id, v.stay, p.* FROM visits v JOIN patients p "
    "ON v.patient_id = p.patient_id) s WHERE patient_id > 1",
]

# PostgreSQL: column "…" does not exist (the subquery does not select it).
MISSING = [
    "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id AS pid, sex FROM patients) s "
    "ON v.patient_id = s.pid WHERE birth_year > 1950",
    "SELECT COUNT(*) FROM (SELECT patient_id AS pid FROM visits) a WHERE visit_id > 3",
    "SELECT COUNT(*) FROM (SELECT * FROM (SELECT patient_id AS pid FROM visits) a) s "
    "WHERE s.visit_id > 3",
    "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id AS pid, sex FROM patients) s "
    "ON v.patient_id = s.pid WHERE EXISTS (SELECT 1 FROM departments d WHERE d.floor = birth_year)",
]

# PostgreSQL answers these: a name only one FROM item provides.
ANSWERED = [
    "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id AS pid, sex FROM patients) s "
    "ON v.patient_id = s.pid WHERE patient_id > 3",
    "SELECT sex, COUNT(*) FROM visits v JOIN (SELECT patient_id AS pid, sex FROM patients) s "
    "ON v.patient_id = s.pid GROUP BY sex ORDER BY sex",
    "SELECT COUNT(*) FROM (SELECT patient_id, cost FROM visits) a JOIN "
    "(SELECT patient_id AS pid, sex FROM patients) b ON a.patient_id = b.pid "
    "WHERE patient_id > 3 AND sex = 'F'",
    "SELECT COUNT(*) FROM visits v JOIN (SELECT * FROM (SELECT patient_id AS pid, sex "
    "FROM patients) a) s ON v.patient_id = s.pid WHERE patient_id > 1 AND pid < 4",
    # USING merges the column: the left one's.
    "SELECT COUNT(*) FROM (SELECT patient_id, sex FROM patients) s JOIN visits v "
    "USING (patient_id) WHERE patient_id > 3",
    # The ON of a join sees the FROM items up to its own: pid is s's there.
    "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id AS pid, sex FROM patients) s "
    "ON v.patient_id = pid JOIN (SELECT patient_id AS pid FROM patients) t "
    "ON t.pid = v.patient_id",
    # ORDER BY an output name; GROUP BY an alias no FROM item provides as a column.
    "SELECT sex AS patient_id, COUNT(*) FROM visits v JOIN "
    "(SELECT patient_id AS pid, sex FROM patients) s ON v.patient_id = s.pid "
    "GROUP BY sex ORDER BY patient_id",
    "SELECT v.department AS birth_year, COUNT(*) FROM visits v JOIN "
    "(SELECT patient_id AS pid, sex FROM patients) s ON v.patient_id = s.pid "
    "GROUP BY birth_year",
    # A subquery in WHERE sees the outer query's names.
    "SELECT COUNT(*) FROM visits v WHERE EXISTS (SELECT 1 FROM "
    "(SELECT name AS n FROM departments) d WHERE d.n = department)",
]


def _on_postgres(sql: str, dsn: str, schema: str) -> str | None:
    """The SQLSTATE PostgreSQL raises for the query as written, or None."""
    with psycopg.connect(dsn) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        try:
            conn.execute(sql.encode())
        except psycopg.Error as error:
            return error.sqlstate
    return None


def _on_dpproxy(sql: str) -> str | None:
    try:
        plan(sql, catalog("main"), PlanRequest(1.0))
    except Rejected as rejection:
        return rejection.sqlstate
    return None


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("sql", "sqlstate"),
    [*((q, "42702") for q in AMBIGUOUS), *((q, "42703") for q in MISSING)],
)
def test_names_are_refused_where_postgresql_refuses_them(
    sql: str, sqlstate: str, pg_dsn: str, pg_schema: str
) -> None:
    load_postgres(pg_dsn, pg_schema, SAMPLE_ROWS)
    assert _on_postgres(sql, pg_dsn, pg_schema) == sqlstate
    assert _on_dpproxy(sql) == sqlstate


@pytest.mark.postgres
@pytest.mark.parametrize("sql", ANSWERED)
def test_names_postgresql_resolves_are_planned_and_run(
    sql: str, pg_dsn: str, pg_schema: str
) -> None:
    load_postgres(pg_dsn, pg_schema, SAMPLE_ROWS)
    assert _on_postgres(sql, pg_dsn, pg_schema) is None
    duckdb_with(SAMPLE_ROWS).execute(plan(sql, catalog("main"), PlanRequest(1.0)).sql).fetchall()
    made = plan(sql, catalog(pg_schema), PlanRequest(1.0, "postgres"))
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(made.sql.encode()).fetchall()


def _sql(sql: str) -> str:
    """The SQL the rewriter runs, without parentheses around a lone column (an inlined
    subquery's column is parenthesized, as any of its expressions)."""
    made = sqlglot.parse_one(plan(sql, catalog("main"), PlanRequest(1.0)).sql, read="duckdb")

    def bare(node: exp.Expr) -> exp.Expr:
        return (
            node.this if isinstance(node, exp.Paren) and isinstance(node.this, exp.Column) else node
        )

    return made.transform(bare).sql(dialect="duckdb")


def test_the_column_of_the_one_item_that_has_it_is_read() -> None:
    """patient_id is v's (s calls its own pid); sex is s's (patients.sex)."""
    assert _sql(
        "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id AS pid, sex FROM patients) s "
        "ON v.patient_id = s.pid WHERE patient_id > 3 AND sex = 'F'"
    ) == _sql(
        "SELECT COUNT(*) FROM visits v JOIN patients s ON v.patient_id = s.patient_id "
        "WHERE v.patient_id > 3 AND s.sex = 'F'"
    )


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(DISTINCT s.pid) FROM (SELECT patient_id AS pid FROM visits) s",
        "WITH s AS (SELECT patient_id AS pid, cost FROM visits WHERE cost > 10) "
        "SELECT COUNT(DISTINCT pid), COUNT(*) FROM s",
    ],
)
def test_count_distinct_of_the_unit_under_a_subquery_name(sql: str) -> None:
    """The unit renamed in a row-level subquery is still the unit: counted as persons."""
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    assert made.measurements[0].spec.kind.value == "units"
    assert made.measurements[0].mechanism.sensitivity == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(DISTINCT s.d) FROM (SELECT department AS d FROM visits) s",
        "SELECT COUNT(DISTINCT s.pid) FROM (SELECT patient_id + 0 AS pid FROM visits) s",
    ],
)
def test_count_distinct_of_another_subquery_name_is_refused(sql: str) -> None:
    with pytest.raises(Rejected, match="only for the privacy unit"):
        plan(sql, catalog("main"), PlanRequest(1.0))


@pytest.mark.parametrize(
    ("sql", "labels"),
    [
        (
            "SELECT COUNT(DISTINCT s.pid), SUM(s.c) FROM "
            "(SELECT patient_id AS pid, cost AS c FROM visits) s",
            ["COUNT(DISTINCT s.pid)", "SUM(s.c)"],
        ),
        (
            "WITH s AS (SELECT stay * 2 AS d FROM visits) SELECT AVG(d + 1), COUNT(*) FROM s",
            ["AVG(d + 1)", "COUNT(*)"],
        ),
    ],
)
def test_accuracy_labels_name_the_subquerys_columns_as_written(sql: str, labels: list[str]) -> None:
    """Not the inlined expressions (it read COUNT(DISTINCT ("s"."patient_id")))."""
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    assert [a.label for a in made.accuracy()] == labels
