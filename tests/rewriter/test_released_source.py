"""A query around a DP subquery (BI tools' wrappers, WITH queries): the subquery is planned
as the query, charged as it, and the query around it is post-processing of its released
rows (rewriter.passes.released_source), computed as PostgreSQL computes it over them."""

from __future__ import annotations

import re

import psycopg
import pytest

from rewriter import PlanRequest, plan
from rewriter.errors import Rejected
from tests.rewriter.post import post_named
from tests.rewriter.tables import catalog

CATALOG = catalog("main")
INNER = "SELECT department, COUNT(*) AS n, AVG(cost) AS a FROM visits GROUP BY department"
#: Released rows of INNER: (department, n, a).
RELEASED = [("A", 10, 1.5), ("B", 30, 2.5), ("C", 20, 0.5)]
#: Queries around INNER, written with {inner}; the same over a VALUES table on PostgreSQL.
WRAPPERS = [
    "SELECT * FROM ({inner}) s WHERE n > 15 ORDER BY n DESC",
    'SELECT "source"."department" AS "department", "source"."n" AS "n" '
    'FROM ({inner}) "source" ORDER BY 1 LIMIT 1048575',
    'SELECT "Custom SQL Query"."department" AS "department", '
    'SUM("Custom SQL Query"."n") AS "sum:n:ok" FROM ({inner}) "Custom SQL Query" '
    "GROUP BY 1 ORDER BY 2 DESC",
    "SELECT SUM(n) AS total, COUNT(*) AS groups, MAX(a), MIN(s.a), AVG(n) FROM ({inner}) s",
    "SELECT department, n, rank() OVER (ORDER BY n DESC) AS r FROM ({inner}) s ORDER BY r",
    "SELECT upper(department) AS d, round(a * 2) AS twice FROM ({inner}) s ORDER BY d",
    "SELECT n > 15 AS big, COUNT(*) FROM ({inner}) s GROUP BY n > 15 HAVING COUNT(*) > 0 "
    "ORDER BY 1",
    "SELECT SUM(n) FROM (SELECT * FROM ({inner}) a WHERE n < 25) b",
    "WITH t AS ({inner}) SELECT department FROM t WHERE a > 1 ORDER BY department DESC",
    "SELECT DISTINCT n > 15 AS big FROM ({inner}) s ORDER BY 1",
    # Superset's and Power BI's qualified star (was: column "s.*" does not exist).
    "SELECT s.* FROM ({inner}) s ORDER BY n",
    'SELECT "source".* FROM ({inner}) "source" ORDER BY 1 LIMIT 1048575',
    "SELECT s.*, n * 2 AS twice, s.a FROM ({inner}) s WHERE n > 15 ORDER BY 1",
    "WITH t AS ({inner}) SELECT t.* FROM t ORDER BY department DESC",
    "SELECT * FROM (SELECT s.* FROM ({inner}) s) w ORDER BY n",
]


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_the_charge_is_the_subquery_s(wrapper: str) -> None:
    """The same bounded SQL, measurements and cost as the subquery alone: the query around
    it is free."""
    alone = plan(INNER, CATALOG, PlanRequest(1.0))
    wrapped = plan(wrapper.format(inner=INNER), CATALOG, PlanRequest(1.0))
    assert wrapped.sql == alone.sql
    assert wrapped.measurements == alone.measurements
    assert (wrapped.epsilon, wrapped.rho) == (alone.epsilon, alone.rho)
    assert wrapped.post_sql != alone.post_sql


@pytest.mark.postgres
@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_post_processing_is_postgres_s_over_the_released_rows(pg_dsn: str, wrapper: str) -> None:
    made = plan(wrapper.format(inner=INNER), CATALOG, PlanRequest(1.0))
    named, ours = post_named(made, [tuple(r) for r in RELEASED])
    values = ", ".join(f"('{d}', {n}, {a}::float8)" for d, n, a in RELEASED)
    table = f"SELECT * FROM (VALUES {values}) AS v(department, n, a)"
    with psycopg.connect(pg_dsn) as conn:
        theirs = conn.execute(wrapper.format(inner=table)).fetchall()
        names = [d.name for d in conn.execute(wrapper.format(inner=table)).description or []]
    assert [tuple(float(v) if isinstance(v, int | float) else v for v in r) for r in ours] == [
        tuple(float(v) if isinstance(v, int | float) else v for v in r) for r in theirs
    ]
    assert named == names


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            f"SELECT s.n FROM ({INNER}) s JOIN departments d ON d.name = s.department",
            "reads it alone: joins are not supported",
        ),
        (f"SELECT n FROM ({INNER}) s WHERE n > (SELECT 1)", "subqueries in a query around"),
        (f"SELECT x FROM ({INNER}) s", 'column "x" does not exist'),
        (f"SELECT v.n FROM ({INNER}) s", 'missing FROM-clause entry for table "v"'),
        (f"SELECT v.* FROM ({INNER}) s", 'missing FROM-clause entry for table "v"'),
        (f"WITH t AS ({INNER}) SELECT t.* FROM t u", 'missing FROM-clause entry for table "t"'),
        (f"SELECT string_agg(department, ',') FROM ({INNER}) s", "STRING_AGG"),
        (f"SELECT pg_sleep(1), n FROM ({INNER}) s", "pg_sleep"),
        (f"SELECT n FROM ({INNER}) s QUALIFY n > 1", "QUALIFY"),
        # A second reader's: TABLESAMPLE was dropped, repeated names and output names in
        # WHERE answered where PostgreSQL refuses them.
        (f"SELECT n FROM ({INNER}) s TABLESAMPLE SYSTEM (0)", "TABLESAMPLE"),
        (f"WITH t AS ({INNER}) SELECT n FROM t TABLESAMPLE SYSTEM (0)", "TABLESAMPLE"),
        (
            "SELECT x FROM (SELECT department AS x, COUNT(*) AS x FROM visits "
            "GROUP BY department) s",
            'column reference "x" is ambiguous',
        ),
        (
            "SELECT * FROM (SELECT COUNT(*), COUNT(*) FROM visits) s",
            "several columns named count",
        ),
        (f"SELECT n * 2 AS m FROM ({INNER}) s WHERE m > 10", 'column "m" does not exist'),
    ],
)
def test_what_it_may_not_hold_is_refused_before_the_charge(sql: str, message: str) -> None:
    with pytest.raises(Rejected, match=message):
        plan(sql, CATALOG, PlanRequest(1.0))


def test_a_count_of_a_count_counts_its_one_row() -> None:
    """Refused before ("a grouped subquery must GROUP BY the privacy unit alone"); as in
    PostgreSQL, one row."""
    made = plan("SELECT COUNT(*) FROM (SELECT COUNT(*) FROM visits) s", CATALOG, PlanRequest(1.0))
    assert post_named(made, [(41,)]) == (["count"], [(1,)])


def test_grouped_by_the_person_by_position_is_a_per_person_table() -> None:
    """A second reader found GROUP BY 1 taken for a DP query (a per-person table before)."""
    inner = "SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY 1"
    made = plan(f"SELECT AVG(n) FROM ({inner}) s", CATALOG, PlanRequest(1.0))
    assert "dpproxy_source" not in made.post_sql


@pytest.mark.parametrize(
    ("inner", "message"),
    [
        (
            "SELECT patient_id AS pid, COUNT(*) AS n FROM visits GROUP BY pid",
            'column "pid" does not exist',
        ),
        (
            "SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY (patient_id)",
            "privacy unit (patient_id) alone",
        ),
        (
            "SELECT patient_id, department, COUNT(*) FROM visits GROUP BY patient_id, department",
            "privacy unit (patient_id) alone",
        ),
    ],
)
def test_grouped_by_the_person_otherwise_is_refused_as_before(inner: str, message: str) -> None:
    """Never a DP query grouped by persons (partition selection would release none): the
    per-person path refuses these, saying why, as it did."""
    with pytest.raises(Rejected, match=re.escape(message)):
        plan(f"SELECT AVG(n) FROM ({inner}) s", CATALOG, PlanRequest(1.0))


def test_a_per_person_subquery_is_not_a_released_one() -> None:
    """GROUP BY the privacy unit: the subquery is a per-person table, and the outer query's
    AVG a DP aggregate over it (rewriter.passes.subqueries), as before."""
    made = plan(
        "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id) s",
        CATALOG,
        PlanRequest(1.0),
    )
    assert "dpproxy_source" not in made.post_sql
    assert len(made.measurements) == 2  # the centred sum of n and its count
