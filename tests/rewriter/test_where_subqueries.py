"""Subqueries in WHERE and joins inside subqueries: what is accepted and rejected, the rows
bound per person, SQL's NULL semantics on both engines, and the sensitivity on neighbouring
databases (with NULL persons and NULL keys, where a careless rewrite would leak)."""

from __future__ import annotations

import functools
import math

import duckdb
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter import (
    Catalog,
    ColumnType,
    Plan,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from tests.rewriter import reference, tables
from tests.rewriter.coupling import in_key_order, sensitivity
from tests.rewriter.scratch import insert
from tests.rewriter.tables import SAMPLE_ROWS, catalog, duckdb_with, load_postgres, scratch_with

CATALOG = catalog("main")


def rejected(sql: str) -> Rejected:
    with pytest.raises(Rejected) as caught:
        plan(sql, CATALOG, PlanRequest(1.0))
    return caught.value


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        # A value computed over everyone.
        (
            "SELECT COUNT(*) FROM visits WHERE cost > (SELECT AVG(cost) FROM visits)",
            "used as a value",
        ),
        # A value that could carry a row's raw value (review finding): refused, like any
        # scalar subquery, so no arithmetic or cast on it can fail for particular values.
        (
            "SELECT COUNT(*) FROM visits v WHERE v.patient_id = 3 AND "
            "(SELECT MAX(COALESCE(v.stay, d.floor)) FROM departments d) * 1000000000 > 0",
            "used as a value",
        ),
        (
            "SELECT COUNT(*) FROM visits v WHERE CAST((SELECT MIN('abc') FROM departments d "
            "WHERE d.floor = v.stay AND d.floor = 2) AS INT) > 0",
            "used as a value",
        ),
        # A quoted value that DuckDB could read otherwise, only on rows reaching it ('abc'
        # for an integer is refused as PostgreSQL refuses it, 22P02).
        (
            "SELECT COUNT(*) FROM visits v WHERE v.patient_id = 3 AND v.cost = 'Infinity'",
            "does not read",
        ),
        ("SELECT COUNT(*) FROM visits WHERE 'NaN' IN (1.5, 2)", "does not read"),
        # Matches on something other than the person.
        (
            "SELECT COUNT(*) FROM visits WHERE department IN "
            "(SELECT department FROM visits WHERE cost > 100)",
            "must match the outer row on the same person",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT visit_id FROM visits)",
            "same person",
        ),
        # A match on another value needs the subquery's WHERE to tie it to the person, as
        # one of the conditions ANDed at its top: not under OR or NOT, not in a join's ON,
        # not on another column.
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department "
            "FROM visits v2 WHERE v2.patient_id = v.patient_id OR v2.cost > 100)",
            "same person",
        ),
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department "
            "FROM visits v2 WHERE (v2.patient_id = v.patient_id AND v2.cost > 1) OR FALSE)",
            "same person",
        ),
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department "
            "FROM visits v2 WHERE NOT (v2.patient_id <> v.patient_id))",
            "same person",
        ),
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department "
            "FROM visits v2 WHERE NOT NOT v2.patient_id = v.patient_id)",
            "same person",
        ),
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department "
            "FROM visits v2 JOIN patients p ON p.patient_id = v2.patient_id "
            "AND p.patient_id = v.patient_id)",
            "same person",
        ),
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department "
            "FROM visits v2 LEFT JOIN departments d ON d.name = v2.department "
            "AND v2.patient_id = v.patient_id)",
            "same person",
        ),
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department "
            "FROM visits v2 WHERE v2.stay = v.stay)",
            "same person",
        ),
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department "
            "FROM visits v2 WHERE v2.visit_id = v.visit_id AND v2.patient_id = v.stay)",
            "same person",
        ),
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department "
            "FROM visits v2 WHERE CASE WHEN v2.patient_id = v.patient_id THEN TRUE END)",
            "same person",
        ),
        # A subquery inside a subquery: refused whatever it reads (each level runs for
        # every row of the one above: a run time that grows with the depth).
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT d.name FROM "
            "departments d WHERE d.name IN (SELECT v3.department FROM visits v3 "
            "WHERE v3.cost > 1) AND d.floor = v.stay)",
            "inside a subquery",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE visit_id IN (SELECT patient_id FROM patients)",
            "same person",
        ),
        (
            "SELECT COUNT(*) FROM prescriptions WHERE rx_id IN (SELECT visit_id FROM visits)",
            "same person",
        ),
        (
            "SELECT COUNT(*) FROM visits v WHERE EXISTS "
            "(SELECT 1 FROM visits w WHERE w.department = v.department)",
            "same person",
        ),
        ("SELECT COUNT(*) FROM visits WHERE EXISTS (SELECT 1 FROM patients)", "same person"),
        # The person link must hold for every row the subquery finds (a top-level AND).
        (
            "SELECT COUNT(*) FROM visits v WHERE EXISTS (SELECT 1 FROM visits w "
            "WHERE w.patient_id = v.patient_id OR w.cost > 1)",
            "same person",
        ),
        # A protected subquery inside a public one: no subquery inside a subquery.
        (
            "SELECT COUNT(*) FROM visits v WHERE department IN (SELECT d.name FROM "
            "departments d WHERE EXISTS (SELECT 1 FROM visits x WHERE x.department = d.name))",
            "inside a subquery",
        ),
        # A subquery or CTE named like the foreign-key parent is not the parent.
        (
            "SELECT COUNT(*) FROM prescriptions WHERE visit_id IN (SELECT visit_id FROM "
            "(SELECT patient_id AS visit_id, COUNT(*) AS n FROM visits GROUP BY patient_id) s)",
            "inside a subquery",
        ),
        (
            "WITH visits AS (SELECT patient_id AS visit_id FROM visits) "
            "SELECT COUNT(*) FROM prescriptions WHERE visit_id IN (SELECT visit_id FROM visits)",
            "same person",
        ),
        # Protected tables inside the subquery join along the person too.
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT p.patient_id FROM "
            "patients p JOIN visits x ON x.stay = p.birth_year)",
            "must be joined on its privacy unit",
        ),
        # The allowlist applies at every depth.
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "(SELECT patient_id FROM patients WHERE birth_year > random())",
            "not allowed",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE department IN (SELECT name FROM departments "
            "WHERE pg_sleep(1) IS NULL AND floor > 1)",
            "pg_sleep",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE department IN (SELECT lower(name) FROM "
            "departments d JOIN departments e ON pg_read_file('x') = e.name)",
            "pg_read_file",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "(SELECT patient_id FROM read_csv('/etc/passwd'))",
            "FROM must name a table",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE department IN "
            "(SELECT CAST(floor AS INTERVAL) FROM departments)",
            "casting",
        ),
        # Shapes.
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "(SELECT patient_id FROM patients LIMIT 1)",
            "LIMIT inside a subquery in WHERE",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "(SELECT patient_id FROM visits GROUP BY patient_id)",
            "GROUP BY inside a subquery in WHERE",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "(SELECT patient_id FROM patients UNION SELECT patient_id FROM visits)",
            "one SELECT",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE stay > (SELECT floor FROM departments)",
            "used as a value",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "(SELECT patient_id, sex FROM patients)",
            "exactly one column",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE department IN (SELECT floor FROM departments)",
            "different types",
        ),
        ("SELECT COUNT(*) FROM visits WHERE stay = ANY (SELECT floor FROM departments)", "ANY"),
        # Joins inside FROM subqueries.
        (
            "SELECT COUNT(*) FROM (SELECT v.stay FROM visits v JOIN visits w "
            "ON v.visit_id = w.visit_id) s",
            "must be joined on its privacy unit",
        ),
        (
            "SELECT COUNT(*) FROM visits v LEFT JOIN (SELECT d.name FROM departments d "
            "JOIN departments e ON d.name = e.name) s ON s.name = v.department",
            "joins of its own",
        ),
        (
            "SELECT AVG(n) FROM (SELECT visit_id, COUNT(*) AS n FROM prescriptions "
            "GROUP BY visit_id) s",
            'must join "visits"',
        ),
        (
            "SELECT AVG(n) FROM (SELECT v.patient_id, COUNT(*) AS n FROM visits v JOIN "
            "patients p ON v.patient_id = p.patient_id GROUP BY p.patient_id) s",
            "its GROUP BY key",
        ),
    ],
)
def test_rejections_say_why(sql: str, words: str) -> None:
    error = rejected(sql)
    assert error.sqlstate == "0A000"
    assert words in error.message, error.message
    assert error.hint


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department FROM "
            "departments d LEFT JOIN visits v2 ON v2.department = d.name "
            "WHERE v2.patient_id = v.patient_id)",
            "LEFT JOIN is supported only with a public lookup table",
        ),
        (
            "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department FROM "
            "visits v2 JOIN visits v3 ON v3.department = v2.department "
            "WHERE v2.patient_id = v.patient_id)",
            'protected table "visits" must be joined on its privacy unit',
        ),
    ],
)
def test_a_tie_cannot_make_up_for_a_join_off_the_person(sql: str, words: str) -> None:
    """The tie holds for the table it names; the subquery's other protected tables must be
    joined to it along the person (never LEFT JOINed), as everywhere."""
    error = rejected(sql)
    assert error.sqlstate == "0A000"
    assert words in error.message, error.message


def test_scalar_over_protected_suggests_a_separate_query() -> None:
    error = rejected("SELECT COUNT(*) FROM visits WHERE cost > (SELECT AVG(cost) FROM visits)")
    assert error.hint is not None and "paste the noisy value" in error.hint


@pytest.mark.parametrize(
    ("sql", "rows"),
    [
        # Inlined: the outer query's join rules bound the rows per person.
        (
            "SELECT COUNT(*) FROM (SELECT a.stay FROM visits a JOIN visits b USING (patient_id)) s",
            9,
        ),
        (
            "SELECT COUNT(*) FROM (SELECT a.patient_id FROM visits a JOIN visits b "
            "ON a.patient_id = b.patient_id) s JOIN patients w ON w.patient_id = s.patient_id",
            9,
        ),
        (
            "SELECT COUNT(*) FROM patients p JOIN (SELECT v.patient_id, d.floor FROM visits v "
            "JOIN departments d ON v.department = d.name) s ON s.patient_id = p.patient_id",
            3,
        ),
        # Subqueries in WHERE never add rows.
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT a.patient_id FROM "
            "visits a JOIN patients b ON a.patient_id = b.patient_id)",
            3,
        ),
    ],
)
def test_rows_per_person_of_inlined_joins(sql: str, rows: int) -> None:
    assert plan(sql, CATALOG, PlanRequest(1.0)).max_rows_per_unit == rows


@pytest.mark.parametrize(
    "sql",
    [
        # Correlated or not, the subquery may run for each row of the query (PostgreSQL
        # runs a correlated one so): its rows per person multiply the query's.
        "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT a.patient_id FROM "
        "visits a JOIN visits b ON a.patient_id = b.patient_id)",
        "SELECT COUNT(*) FROM visits v WHERE EXISTS (SELECT 1 FROM visits a JOIN visits b "
        "ON a.patient_id = b.patient_id WHERE a.patient_id = v.patient_id AND a.cost <> v.cost)",
        "SELECT COUNT(*) FROM visits v JOIN visits w ON w.patient_id = v.patient_id "
        "WHERE EXISTS (SELECT 1 FROM visits a WHERE a.patient_id = v.patient_id)",
    ],
)
def test_a_where_subquery_counts_towards_the_querys_multiplying_tables(sql: str) -> None:
    with pytest.raises(Rejected, match="may read at most 2 protected tables with several rows"):
        plan(sql, CATALOG, PlanRequest(1.0))


def test_no_subquery_inside_a_where_subquery() -> None:
    """The red team's query, two levels deep: each level runs for every row of the one
    above, so nine levels over an 8-row lookup took 3 s when one person's row met the outer
    condition and 0.05 s when not."""
    sql = (
        "SELECT COUNT(*) FROM visits v JOIN patients p ON p.patient_id = v.patient_id "
        "WHERE v.patient_id = 3 AND p.birth_year > 1960 AND EXISTS (SELECT 1 FROM "
        "departments d1 WHERE d1.name <> v.department AND EXISTS (SELECT 1 FROM departments "
        "d2 WHERE d2.name <> v.department AND d2.name <> d1.name))"
    )
    with pytest.raises(Rejected, match="inside a subquery in WHERE is not supported"):
        plan(sql, CATALOG, PlanRequest(1.0))
    one_level = sql.rsplit(" AND EXISTS (SELECT 1 FROM departments d2", 1)[0] + ")"
    assert plan(one_level, CATALOG, PlanRequest(1.0)).max_rows_per_unit == 3


@pytest.mark.parametrize(
    "sql",
    [
        # The red team's: a per-person subquery (its self-join unseen by the limits) in an
        # EXISTS, run for each of the query's rows on PostgreSQL: 13.3 s vs 0.25 s.
        "SELECT COUNT(*) FROM patients p JOIN visits a ON a.patient_id = p.patient_id "
        "WHERE p.patient_id = 3 AND p.birth_year > 1960 AND EXISTS (SELECT 1 FROM "
        "(SELECT c.patient_id, COUNT(*) AS m FROM visits c JOIN visits d "
        "ON c.patient_id = d.patient_id GROUP BY c.patient_id) s "
        "WHERE s.patient_id = a.patient_id AND s.m > 0)",
        # Nested through per-person subqueries, which hid the nesting.
        "SELECT COUNT(*) FROM patients p WHERE EXISTS (SELECT 1 FROM (SELECT c.patient_id, "
        "COUNT(*) AS m FROM visits c WHERE EXISTS (SELECT 1 FROM (SELECT w.patient_id, "
        "COUNT(*) AS m FROM visits w GROUP BY w.patient_id) t WHERE t.patient_id = "
        "c.patient_id) GROUP BY c.patient_id) s WHERE s.patient_id = p.patient_id)",
    ],
)
def test_no_per_person_subquery_inside_a_where_subquery(sql: str) -> None:
    with pytest.raises(Rejected, match="per-person subquery .* inside a subquery in WHERE"):
        plan(sql, CATALOG, PlanRequest(1.0))


def test_an_inlined_join_counts_towards_the_outer_querys_tables() -> None:
    # Three tables of several rows per person once inlined (rewriter.passes.check_joins).
    with pytest.raises(Rejected, match="at most 2 protected tables with several rows"):
        plan(
            "SELECT COUNT(*) FROM (SELECT a.patient_id FROM visits a JOIN visits b "
            "ON a.patient_id = b.patient_id) s JOIN visits w ON w.patient_id = s.patient_id",
            CATALOG,
            PlanRequest(1.0),
        )


@pytest.mark.parametrize(
    ("sql", "bound"),
    [
        # A per-person count over a self-join: up to 3 x 3 rows.
        (
            "SELECT SUM(n) FROM (SELECT a.patient_id, COUNT(*) AS n FROM visits a "
            "JOIN visits b ON a.patient_id = b.patient_id GROUP BY a.patient_id) s",
            9,
        ),
        # Along the foreign-key path, the parent does not multiply: 2 rows x dose <= 8.
        (
            "SELECT SUM(d) FROM (SELECT v.patient_id, SUM(rx.dose) AS d FROM prescriptions rx "
            "JOIN visits v ON rx.visit_id = v.visit_id GROUP BY v.patient_id) s",
            16,
        ),
        # A public lookup can multiply rows without limit: each person's sum is clamped.
        (
            "SELECT SUM(f) FROM (SELECT v.patient_id, SUM(d.floor) AS f FROM visits v "
            "JOIN departments d ON v.department = d.name GROUP BY v.patient_id) s",
            27,
        ),
    ],
)
def test_per_person_subquery_bounds_follow_the_join(sql: str, bound: int) -> None:
    made = plan(sql, CATALOG, PlanRequest(1.0))
    assert [m.spec.unit_bound for m in made.measurements] == [bound]
    assert made.max_rows_per_unit == 1
    rows = duckdb_with(SAMPLE_ROWS).execute(made.sql).fetchall()
    assert 0 <= rows[0][0] <= bound * 5


def _cost_over_100(person: int) -> set[str]:
    """The departments of the person's visits costing over 100 (NaN too, as in SQL)."""
    return {
        r[2]
        for r in SAMPLE_ROWS
        if r[1] == person and r[3] is not None and (math.isnan(r[3]) or r[3] > 100)
    }


def _doses(visit: int) -> list[int]:
    return [dose for _, of, dose in tables.PRESCRIPTIONS if of == visit]


# A match on another value, tied to the person in the subquery's WHERE, and its answer on
# SAMPLE_ROWS (each person's rows bounded to 3).
TIED = [
    (
        "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT v2.department "
        "FROM visits v2 WHERE v2.patient_id = v.patient_id AND v2.cost > 100)",
        reference.count_rows(SAMPLE_ROWS, lambda r: r[2] in _cost_over_100(r[1])),
    ),
    (
        "SELECT COUNT(*) FROM visits v WHERE v.department NOT IN (SELECT v2.department "
        "FROM visits v2 WHERE v.patient_id = v2.patient_id AND v2.cost > 100)",
        reference.count_rows(SAMPLE_ROWS, lambda r: r[2] not in _cost_over_100(r[1])),
    ),
    (
        "SELECT COUNT(*) FROM visits v WHERE EXISTS (SELECT 1 FROM visits v2 "
        "WHERE v2.patient_id = v.patient_id AND v2.department = v.department "
        "AND v2.cost > 100)",
        reference.count_rows(SAMPLE_ROWS, lambda r: r[2] in _cost_over_100(r[1])),
    ),
    # Tied along the foreign-key path: the visit's own prescriptions. A NULL stay is in no
    # set; NOT IN an empty set is true.
    (
        "SELECT COUNT(*) FROM visits v WHERE v.stay NOT IN (SELECT rx.dose "
        "FROM prescriptions rx WHERE rx.visit_id = v.visit_id)",
        reference.count_rows(
            SAMPLE_ROWS,
            lambda r: not _doses(r[0]) or (r[4] is not None and r[4] not in _doses(r[0])),
        ),
    ),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("sql", "expected"), TIED)
def test_a_match_tied_to_the_person_answers_alike_on_both_engines(
    sql: str, expected: int, pg_dsn: str, pg_schema: str
) -> None:
    """Refused before ("must match the outer row on the same person"), though the set it
    matches holds only the outer row's person's values."""
    load_postgres(pg_dsn, pg_schema, SAMPLE_ROWS)
    on_duck = duckdb_with(SAMPLE_ROWS).execute(plan(sql, CATALOG, PlanRequest(1.0)).sql).fetchall()
    made = plan(sql, catalog(pg_schema), PlanRequest(1.0, "postgres"))
    with psycopg.connect(pg_dsn) as conn:
        on_pg = conn.execute(made.sql.encode()).fetchall()
    assert [int(v) for v in on_duck[0]] == [int(v) for v in on_pg[0]] == [expected]


NOT_IN_WITH_NULL = (
    "SELECT COUNT(*) FROM visits WHERE patient_id NOT IN (SELECT patient_id FROM patients)"
)


def test_not_in_keeps_sql_null_semantics_on_both_engines(pg_dsn: str, pg_schema: str) -> None:
    """NOT IN over a subquery holding a NULL is never true, as in SQL, on both engines."""
    load_postgres(pg_dsn, pg_schema, SAMPLE_ROWS)
    duck = duckdb_with(SAMPLE_ROWS)
    answers = {}
    for nulls in (False, True):
        if nulls:
            duck.execute("INSERT INTO main.patients VALUES (NULL, 'F', 1950)")
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute(f'INSERT INTO "{pg_schema}".patients VALUES (NULL, %s, 1950)', ["F"])
        on_duck = duck.execute(plan(NOT_IN_WITH_NULL, CATALOG, PlanRequest(1.0)).sql).fetchall()
        sql = plan(NOT_IN_WITH_NULL, catalog("public"), PlanRequest(1.0, "postgres")).sql
        with psycopg.connect(pg_dsn) as conn:
            on_pg = conn.execute(sql.replace('"public".', f'"{pg_schema}".')).fetchall()
        assert [int(v) for v in on_duck[0]] == [int(v) for v in on_pg[0]]
        answers[nulls] = int(on_duck[0][0])
    assert answers == {False: 1, True: 0}  # patient 4 has no patients row


# Neighbouring databases, with NULL persons and NULL keys.

SEMI_JOINS = [
    "SELECT COUNT(*), SUM(stay) FROM visits WHERE patient_id IN "
    "(SELECT patient_id FROM patients WHERE birth_year < 1953)",
    "SELECT COUNT(*) FROM visits WHERE patient_id NOT IN "
    "(SELECT patient_id FROM patients WHERE sex = 'F')",
    "SELECT department, COUNT(*) FROM visits v WHERE NOT EXISTS "
    "(SELECT 1 FROM visits w WHERE w.patient_id = v.patient_id AND w.cost > 200) "
    "GROUP BY department",
    "SELECT COUNT(*) FROM visits v WHERE patient_id NOT IN "
    "(SELECT w.patient_id FROM visits w WHERE w.stay > v.stay)",
    "SELECT COUNT(*), SUM(dose) FROM prescriptions WHERE visit_id NOT IN "
    "(SELECT visit_id FROM visits WHERE stay > 3)",
    "SELECT COUNT(*), SUM(dose) FROM prescriptions rx WHERE EXISTS "
    "(SELECT 1 FROM visits v WHERE v.visit_id = rx.visit_id AND v.department = 'A')",
    "SELECT COUNT(*) FROM visits v WHERE visit_id NOT IN "
    "(SELECT visit_id FROM prescriptions WHERE dose > 5)",
    "SELECT COUNT(*) FROM visits v WHERE NOT EXISTS "
    "(SELECT 1 FROM prescriptions rx WHERE rx.visit_id = v.visit_id)",
    "SELECT COUNT(*) FROM visits WHERE department NOT IN "
    "(SELECT name FROM departments WHERE floor = 2)",
    "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT p.patient_id FROM patients p "
    "JOIN visits x ON x.patient_id = p.patient_id WHERE x.department = 'C')",
    "SELECT AVG(n), SUM(f) FROM (SELECT v.patient_id, COUNT(*) AS n, SUM(d.floor) AS f "
    "FROM visits v JOIN departments d ON v.department = d.name GROUP BY v.patient_id) s",
    "SELECT AVG(n) FROM (SELECT a.patient_id, COUNT(*) AS n FROM visits a JOIN visits b "
    "ON a.patient_id = b.patient_id GROUP BY a.patient_id) s",
    "SELECT COUNT(*), SUM(birth_year) FROM (SELECT v.patient_id, p.birth_year FROM visits v "
    "JOIN patients p ON v.patient_id = p.patient_id) s",
    # A match on another value, tied to the person (or the visit) in the subquery's WHERE.
    "SELECT COUNT(*), SUM(stay) FROM visits v WHERE v.department IN (SELECT w.department "
    "FROM visits w WHERE w.patient_id = v.patient_id AND w.cost > 200)",
    "SELECT department, COUNT(*) FROM visits v WHERE v.stay NOT IN (SELECT w.stay "
    "FROM visits w WHERE v.patient_id = w.patient_id AND w.department = 'A') "
    "GROUP BY department",
    "SELECT COUNT(*) FROM visits v WHERE v.stay NOT IN (SELECT rx.dose FROM prescriptions rx "
    "WHERE rx.visit_id = v.visit_id AND rx.dose > 2)",
    "SELECT COUNT(*), SUM(dose) FROM prescriptions rx WHERE rx.dose NOT IN "
    "(SELECT v.stay FROM visits v WHERE v.visit_id = rx.visit_id)",
    "SELECT COUNT(*) FROM visits v WHERE v.department IN (SELECT d.name FROM visits w "
    "LEFT JOIN departments d ON d.name = w.department WHERE w.patient_id = v.patient_id "
    "AND w.stay > 3)",
]


def neighbour_catalog() -> Catalog:
    """The test tables, with enough groups per person that no group is dropped at random."""
    return build_catalog(
        {
            "visits": tables.COLUMNS,
            "patients": tables.PATIENT_COLUMNS,
            "departments": tables.DEPARTMENT_COLUMNS,
            "prescriptions": tables.RX_COLUMNS,
        },
        {
            "visits": tables.POLICY.model_copy(update={"max_groups_per_unit": 3}),
            "patients": tables.PATIENT_POLICY,
            "departments": tables.DEPARTMENT_POLICY,
            "prescriptions": tables.RX_POLICY.model_copy(update={"max_groups_per_unit": 3}),
        },
        schema="main",
        unique=tables.UNIQUE,
    )


NEIGHBOUR_CATALOG = neighbour_catalog()
Visit = tuple[int | None, bool, str, float | None, int | None]
person = st.one_of(st.none(), st.integers(1, 5))
visit = st.tuples(
    person,
    st.booleans(),  # True: the visit's key is NULL
    st.sampled_from(["A", "B", "C"]),
    st.one_of(st.none(), st.floats(-50, 500, allow_nan=False), st.just(math.nan)),
    st.one_of(st.none(), st.integers(-2, 12)),
)


def database(
    visits: list[Visit],
    people: list[tuple[int | None, str, int]],
    doses: list[tuple[int | None, int]],
    removed: int | None,
) -> duckdb.DuckDBPyConnection:
    """The tables; with ``removed``, without that person's visits, patients row and the
    prescriptions of their visits."""
    rows = [
        (None if null_key else i + 1, p, d, c, s)
        for i, (p, null_key, d, c, s) in enumerate(visits)
        if removed is None or p != removed
    ]
    gone = {i + 1 for i, v in enumerate(visits) if removed is not None and v[0] == removed}
    conn = scratch_with([])  # a database of its own (tests.rewriter.scratch)
    conn.execute("DELETE FROM main.patients; DELETE FROM main.prescriptions")
    insert(conn, "main.visits", rows)
    kept = [p for p in people if removed is None or p[0] != removed]
    insert(conn, "main.patients", kept)
    prescriptions = [(i, v, d) for i, (v, d) in enumerate(doses) if v not in gone]
    insert(conn, "main.prescriptions", prescriptions)
    return conn


@functools.cache
def planned(query: str) -> tuple[Plan, str]:
    """The plan of ``query`` and its SQL with the groups in key order. Planning is
    deterministic: once per query, not once per example."""
    made = plan(query, NEIGHBOUR_CATALOG, PlanRequest(1.0))
    return made, in_key_order(made)  # every other person keeps the same groups in both


def change(
    sql: str,
    keys: int,
    measures: int,
    before: duckdb.DuckDBPyConnection,
    after: duckdb.DuckDBPyConnection,
) -> list[int]:
    """Per measurement, the L1 change of the totals over all groups."""
    first = {tuple(r[:keys]): [int(v) for v in r[keys:]] for r in before.execute(sql).fetchall()}
    second = {tuple(r[:keys]): [int(v) for v in r[keys:]] for r in after.execute(sql).fetchall()}
    zero = [0] * measures
    return [
        sum(
            abs(first.get(cell, zero)[i] - second.get(cell, zero)[i])
            for cell in set(first) | set(second)
        )
        for i in range(measures)
    ]


people_strategy = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(1, 5)),
        st.sampled_from(["F", "M"]),
        st.integers(1940, 1960),
    ),
    max_size=7,
)


@pytest.mark.parametrize("query", SEMI_JOINS)
@settings(max_examples=30, deadline=None)
@given(
    visits=st.lists(visit, max_size=20),
    people=people_strategy,
    doses=st.lists(
        st.tuples(st.one_of(st.none(), st.integers(1, 20)), st.integers(-1, 12)), max_size=15
    ),
    removed=st.integers(1, 5),
)
def test_one_person_moves_totals_within_the_sensitivity(
    query: str,
    visits: list[Visit],
    people: list[tuple[int | None, str, int]],
    doses: list[tuple[int | None, int]],
    removed: int,
) -> None:
    made, sql = planned(query)
    moved = change(
        sql,
        len(made.keys),
        len(made.measurements),
        database(visits, people, doses, None),
        database(visits, people, doses, removed),
    )
    for measurement, amount in zip(made.measurements, moved, strict=True):
        bound = sensitivity(made, measurement)
        assert amount <= bound, (query, measurement.spec.key, amount, bound)
        assert measurement.mechanism.sensitivity == bound


@pytest.mark.parametrize(
    ("sql", "guard"),
    [
        # The subquery's NULL key would make NOT IN NULL for everyone.
        (
            "SELECT COUNT(*) FROM prescriptions WHERE visit_id NOT IN "
            "(SELECT visit_id FROM visits WHERE stay > 3)",
            ' AND NOT "q1_0"."visit_id" IS NULL',
        ),
        # The outer NULL key's NOT IN would be true only while the subquery is empty.
        (
            "SELECT COUNT(*) FROM visits WHERE visit_id NOT IN "
            "(SELECT visit_id FROM prescriptions WHERE dose > 5)",
            None,
        ),
    ],
)
def test_null_key_guards_are_what_keeps_the_bound(sql: str, guard: str | None) -> None:
    """Without the rewriter's NULL handling along a foreign-key path, removing person 2 moves
    person 1's rows: the guards are needed, and the neighbour test above can see a leak."""
    visits: list[Visit] = [
        (1, False, "A", 1.0, 1),  # visit 1, person 1
        (1, True, "A", 1.0, 1),  # person 1's visit without a key
        (2, True, "A", 1.0, 9),  # person 2's visit without a key (stay > 3)
        (2, False, "A", 1.0, 1),  # visit 4, person 2
        (3, False, "A", 1.0, 1),  # visit 5, person 3
        (3, True, "A", 1.0, 1),
        (4, True, "A", 1.0, 1),
        (5, True, "A", 1.0, 1),
    ]
    doses: list[tuple[int | None, int]] = [(1, 1), (1, 1), (4, 9), (5, 1)]  # person 2: 9
    made = plan(sql, NEIGHBOUR_CATALOG, PlanRequest(1.0))
    bound = made.measurements[0].spec.unit_bound
    before, after = database(visits, [], doses, None), database(visits, [], doses, 2)
    assert change(made.sql, 0, 1, before, after)[0] <= bound
    if guard is not None:
        assert guard in made.sql
        unguarded = made.sql.replace(guard, "")
    else:
        case = '(CASE WHEN "t0"."visit_id" IS NULL THEN NULL ELSE '
        assert case in made.sql
        unguarded = made.sql.replace(case, "(").replace(" END)", ")", 1)
    assert change(unguarded, 0, 1, before, after)[0] > bound


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        # A CTE reading the CTE before it, read in a subquery in WHERE: persons with a stay
        # in (1, 5) are 2, 3 and 4.
        (
            "WITH a AS (SELECT patient_id, stay FROM visits WHERE stay > 1), "
            "b AS (SELECT patient_id FROM a WHERE stay < 5) "
            "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT patient_id FROM b)",
            reference.count_rows(SAMPLE_ROWS, lambda r: r[1] in (2, 3, 4)),
        ),
        # The same filter by a per-person subquery joined in FROM (one inside a subquery
        # in WHERE is refused): patient 1 has over 2 visits.
        (
            "SELECT COUNT(*) FROM visits v JOIN (SELECT patient_id, COUNT(*) AS n FROM visits "
            "GROUP BY patient_id) s ON s.patient_id = v.patient_id WHERE s.n > 2",
            reference.count_rows(SAMPLE_ROWS, lambda r: r[1] == 1),
        ),
        # An inlined subquery's renamed column, read from a correlated subquery.
        (
            "SELECT COUNT(*) FROM (SELECT patient_id, stay AS days FROM visits) s WHERE EXISTS "
            "(SELECT 1 FROM patients p WHERE p.patient_id = s.patient_id AND s.days > 3)",
            reference.count_rows(
                SAMPLE_ROWS, lambda r: r[1] in (1, 3) and r[4] is not None and r[4] > 3
            ),
        ),
    ],
)
def test_nested_forms_answer_as_sql_would(sql: str, expected: int) -> None:
    made = plan(sql, CATALOG, PlanRequest(1.0))
    assert duckdb_with(SAMPLE_ROWS).execute(made.sql).fetchall() == [(expected,)]


def test_ambiguous_column_in_a_correlated_subquery_must_be_qualified() -> None:
    error = rejected(
        "SELECT COUNT(*) FROM (SELECT patient_id, stay AS cost FROM visits) s WHERE EXISTS "
        "(SELECT 1 FROM patients p WHERE p.patient_id = s.patient_id AND cost > 3)"
    )
    assert error.sqlstate == "42702"
    assert "qualify it" in error.message


def test_a_timestamp_in_a_tied_subquerys_dates_is_refused() -> None:
    """e.ts IN (SELECT x.d …) made DuckDB convert each date to a timestamp, which fails
    on a date beyond year 294276: one person's row decided whether the query failed, after
    its charge (review). Refused, as check_types refuses d < ts."""
    kinds = {
        "id": ColumnType.INTEGER,
        "pid": ColumnType.INTEGER,
        "d": ColumnType.DATE,
        "ts": ColumnType.TIMESTAMP,
    }
    dated = build_catalog(
        {"e": kinds}, {"e": TablePolicy(privacy_unit="pid", max_rows_per_unit=2)}, schema="main"
    )
    sql = "SELECT COUNT(*) FROM e WHERE e.ts IN (SELECT x.d FROM e x WHERE x.pid = e.pid)"
    with pytest.raises(Rejected, match="compares a timestamp with a date that is not a"):
        plan(sql, dated, PlanRequest(1.0))
    # A computed date fails the same way on the rows that reach it (review): DuckDB's
    # conversion of DATE '9999-12-31' + 200000000 to a timestamp.
    computed = (
        "SELECT COUNT(*) FROM e WHERE e.ts IN (SELECT DATE '9999-12-31' + 200000000 FROM e x "
        "WHERE x.pid = e.pid)"
    )
    with pytest.raises(Rejected, match="compares a timestamp with a date that is not a"):
        plan(computed, dated, PlanRequest(1.0))
    # The same comparison with a date literal inside is fine.
    made = plan(
        "SELECT COUNT(*) FROM e WHERE e.ts IN (SELECT DATE '2020-01-01' FROM e x "
        "WHERE x.pid = e.pid)",
        dated,
        PlanRequest(1.0),
    )
    conn = duckdb.connect()
    conn.execute("CREATE TABLE e (id BIGINT, pid BIGINT, d DATE, ts TIMESTAMP)")
    conn.execute(
        "INSERT INTO e VALUES (1, 1, '2020-01-01', '2020-01-01'), "
        "(2, 2, '300000-01-01', '2020-01-01')"
    )
    conn.execute(made.sql).fetchall()


def test_inlining_that_doubles_per_level_is_refused() -> None:
    """Nested row-level subqueries that use a column twice double the statement per level
    when inlined: 14 levels took 15 s to plan (and 20 would take minutes), while other
    sessions waited. Refused at a fixed size instead."""
    inner = "SELECT department AS x, patient_id FROM visits"
    for i in range(16):
        inner = f"SELECT t{i}.x || t{i}.x AS x, t{i}.patient_id FROM ({inner}) t{i}"
    with pytest.raises(Rejected, match="too large once its subqueries are inlined") as error:
        plan(f"SELECT COUNT(*) FROM ({inner}) s WHERE s.x = 'a'", CATALOG, PlanRequest(1.0))
    assert error.value.sqlstate == "54001"
