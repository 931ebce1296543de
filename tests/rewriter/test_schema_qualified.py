"""Schema-qualified column references (``"public"."visits"."cost"``), as Metabase's query
builder writes every column, resolve as in PostgreSQL: to the FROM item that is that table,
read without an alias. The bounded SQL is the same as for the unqualified query; the
refusals are PostgreSQL's (messages checked against PostgreSQL 15)."""

from __future__ import annotations

import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.tables import catalog

CATALOG = catalog("main")

# Metabase 0.50's question "Count of visits by department", as its driver sends it.
METABASE = (
    'SELECT "public"."visits"."department" AS "department", COUNT(*) AS "count" '
    'FROM "public"."visits" GROUP BY "public"."visits"."department" '
    'ORDER BY "public"."visits"."department" ASC'
)
PLAIN = (
    'SELECT department AS "department", COUNT(*) AS "count" FROM visits '
    "GROUP BY department ORDER BY visits.department ASC"
)


@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
@pytest.mark.parametrize(
    ("qualified", "plain"),
    [
        (METABASE, PLAIN),
        (
            "SELECT SUM(public.visits.cost) FROM visits WHERE main.visits.stay > 1",
            "SELECT SUM(cost) FROM visits WHERE stay > 1",
        ),
        (
            "SELECT COUNT(*) FROM public.visits JOIN public.patients "
            "ON public.visits.patient_id = public.patients.patient_id "
            "WHERE public.patients.sex = 'F'",
            "SELECT COUNT(*) FROM visits JOIN patients "
            "ON visits.patient_id = patients.patient_id WHERE patients.sex = 'F'",
        ),
    ],
)
def test_the_same_plan_as_unqualified(qualified: str, plain: str, dialect: str) -> None:
    request = PlanRequest(1.0, dialect, delta=1e-6)
    made, expected = plan(qualified, CATALOG, request), plan(plain, CATALOG, request)
    assert made.sql == expected.sql
    assert made.post_sql == expected.post_sql


@pytest.mark.parametrize(
    ("sql", "message", "hint"),
    [
        # PostgreSQL 15: an alias hides the table's own name.
        (
            "SELECT COUNT(*) FROM visits v WHERE public.visits.cost > 1",
            'invalid reference to FROM-clause entry for table "visits"',
            'Perhaps you meant to reference the table alias "v".',
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE other.visits.cost > 1",
            'invalid reference to FROM-clause entry for table "visits"',
            'There is an entry for table "visits", but it cannot be referenced from this '
            "part of the query.",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE public.patients.sex = 'F'",
            'missing FROM-clause entry for table "patients"',
            None,
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE public.visits.nothing > 1",
            'column "nothing" does not exist in table "visits"',
            None,
        ),
    ],
)
def test_refusals_say_what_postgresql_says(sql: str, message: str, hint: str | None) -> None:
    with pytest.raises(Rejected) as refused:
        plan(sql, CATALOG, PlanRequest(1.0, "duckdb"))
    assert refused.value.message == message
    if hint is not None:
        assert refused.value.hint == hint
    assert refused.value.sqlstate in ("42P01", "42703")


def test_a_database_qualified_column_is_refused_with_the_forms_to_write() -> None:
    with pytest.raises(Rejected) as refused:
        plan(
            "SELECT COUNT(*) FROM visits WHERE demo.public.visits.cost > 1",
            CATALOG,
            PlanRequest(1.0, "duckdb"),
        )
    assert "database-qualified column references are not supported" in refused.value.message
    assert '"public"."visits"."cost"' in (refused.value.hint or "")
