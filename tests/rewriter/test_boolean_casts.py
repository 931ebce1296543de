"""A boolean cast to integer (``AVG((stay > 0)::int)``, ``SUM(CAST(x IS NULL AS INTEGER))``):
1, 0 or NULL, never an error, so accepted wherever a row-level expression is (inside
aggregates, bounded to [0, 1]; in FILTER, WHERE and as a GROUP BY key with the public
domain 1, 0, NULL), and answered as PostgreSQL answers it on both engines. PostgreSQL
casts a boolean to integer only: to bigint, smallint or a real it refuses, and so does
dpproxy, before the charge."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import psycopg
import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.driver_sql import Engines, catalog, engines


@pytest.fixture(scope="module")
def notes(pg_dsn: str) -> Iterator[Engines]:
    with engines(pg_dsn) as found:
        yield found


AGGREGATES = [
    "SUM((stay > 0)::int)",
    "SUM(CAST(cost IS NULL AS INTEGER))",
    "SUM(flag::int)",
    "SUM((name LIKE 'A%')::int4)",
    "SUM((code = ANY('{A,B}'))::int * 2 - 1)",
    "SUM(CASE WHEN flag THEN (stay > 1)::int END)",
    "SUM(TRUE::int)",
    "COUNT((stay > 2)::int)",
    "COUNT(*) FILTER (WHERE (stay > 2)::int = 1)",
    "SUM(stay) FILTER (WHERE flag::int = 0)",
]


@pytest.mark.parametrize("aggregate", AGGREGATES)
def test_aggregates_are_postgresql_s_own(aggregate: str, notes: Engines) -> None:
    sql = f"SELECT {aggregate} FROM notes"
    on_duck, on_pg = notes.released(sql, delta=0.0)
    assert on_duck == on_pg == notes.native(sql)


def test_an_average_of_a_condition_is_its_share(notes: Engines) -> None:
    sql = "SELECT AVG((stay > 0)::int), AVG(CAST(day IS NULL AS INTEGER)) FROM notes"
    on_duck, on_pg = notes.released(sql, delta=0.0)
    (truth,) = notes.native(sql)
    for released in (on_duck, on_pg):
        assert released[0] == pytest.approx([float(v) for v in truth])


@pytest.mark.parametrize(
    "predicate",
    [
        "(stay > 2)::int = 1",
        "flag::int = 0",
        "CAST(code IS NULL AS INTEGER) = 1",
        "(stay > 2)::int IS NULL",
    ],
)
def test_where_is_what_postgresql_computes(predicate: str, notes: Engines) -> None:
    sql = f"SELECT COUNT(*) FROM notes WHERE {predicate}"
    on_duck, on_pg = notes.released(sql, delta=0.0)
    assert on_duck == on_pg == notes.native(sql)


@pytest.mark.parametrize(
    "key", ["(stay > 2)::int", "flag::int", "CAST(name LIKE '%a%' AS integer)"]
)
def test_a_key_has_the_public_domain_1_0_null(key: str, notes: Engines) -> None:
    sql = f"SELECT {key}, COUNT(*) FROM notes GROUP BY 1"
    made = plan(sql, catalog("main"), PlanRequest(1.0))  # δ = 0
    assert made.keys[0].domain == (1, 0, None)
    described = notes.postgres.execute(sql.encode()).description or []
    assert f'"k0" AS "{described[0].name}"' in made.post_sql  # PostgreSQL's name for it
    on_duck, on_pg = notes.released(sql, delta=0.0)
    assert on_duck == on_pg
    assert {k: n for k, n in on_duck if n} == dict(notes.native(sql))


def test_inside_an_aggregate_the_bounds_are_0_and_1() -> None:
    made = plan("SELECT SUM((stay > 0)::int) FROM notes", catalog("main"), PlanRequest(1.0))
    bounds = made.measurements[0].spec.bounds
    assert bounds is not None and (bounds.lower, bounds.upper, bounds.integer) == (0, 1, True)


@pytest.mark.parametrize("target", ["bigint", "smallint", "int8", "double precision", "numeric"])
def test_other_number_types_are_refused_as_postgresql_refuses_them(target: str) -> None:
    with pytest.raises(Rejected, match="cannot cast type boolean to") as caught:
        plan(f"SELECT SUM((stay > 0)::{target}) FROM notes", catalog("main"), PlanRequest(1.0))
    assert caught.value.sqlstate == "42846"


def test_nested_casts_that_would_grow_too_large_are_refused() -> None:
    nested = "stay > 0"
    for _ in range(14):
        nested = f"({nested})::int > 0"
    with pytest.raises(Rejected, match="too large") as caught:
        plan(f"SELECT COUNT(*) FROM notes WHERE {nested}", catalog("main"), PlanRequest(1.0))
    assert caught.value.sqlstate == "54001"


@pytest.mark.postgres
def test_the_engines_cast_a_boolean_to_integer_alike(pg_dsn: str) -> None:
    sql = "SELECT CAST(b AS INTEGER) FROM (VALUES (TRUE), (FALSE), (NULL)) AS v(b)"
    with psycopg.connect(pg_dsn) as conn:
        on_pg = conn.execute(sql).fetchall()
    assert duckdb.sql(sql).fetchall() == on_pg == [(1,), (0,), (None,)]
