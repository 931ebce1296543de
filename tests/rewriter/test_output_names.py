"""A DP query's output columns carry the names PostgreSQL gives them (rewriter.output_names):
a client reads ``df["total"]`` for ``COUNT(*) AS Total`` as it would from PostgreSQL, and
``substr``, ``var_samp``, ``date_trunc`` for the calls so written. Each select list is run on
PostgreSQL itself, over the test tables, and its column names compared with dpproxy's."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
import sqlglot
from sqlglot import exp

from rewriter import PlanRequest, Rejected, plan
from tests.postgres_schema import scratch_schema
from tests.rewriter.tables import CREATE, SAMPLE_ROWS, SETUP, catalog

#: Select lists over visits (GROUP BY department unless the list says otherwise).
SELECTS = [
    'COUNT(*) AS Total, department AS Dept, DEPARTMENT, "department"',
    'COUNT(*) AS "MixedCase", COUNT(*) AS lower_case, COUNT(*) AS "with space"',
    "COUNT(*), count(cost), Count(DISTINCT patient_id), SUM(stay), sum(cost) AS s",
    "AVG(cost), var_samp(cost), variance(cost), var_pop(cost), stddev(cost), stddev_samp(cost)",
    "stddev_pop(cost), percentile_cont(0.5) WITHIN GROUP (ORDER BY cost)",
    "COUNT(*) FILTER (WHERE stay > 2), SUM(stay) FILTER (WHERE cost > 1) AS f",
    "mod(COUNT(*), 7), div(COUNT(*), 7), pow(COUNT(*), 1), power(COUNT(*), 1)",
    "sqrt(COUNT(*)), ceiling(AVG(cost)), ceil(AVG(cost)), floor(AVG(cost)), abs(SUM(stay))",
    "log10(COUNT(*) + 1), ln(COUNT(*) + 1), exp(1), round(AVG(cost)), round(AVG(stay), 1)",
    "(COUNT(*)), (AVG(cost))::numeric(10, 2), COUNT(*)::float, CAST(COUNT(*) AS bigint)",
    "(SUM(cost) / COUNT(*))::numeric, (COUNT(*) + 1)::int, CAST(COUNT(*) + 1 AS double "
    "precision), CAST(COUNT(*) * 2 AS text)",
    "CASE WHEN COUNT(*) > 5 THEN 'many' ELSE 'few' END, CASE WHEN COUNT(*) > 5 THEN 1 END",
    "CASE WHEN COUNT(*) > 5 THEN 1 ELSE COUNT(*) END, coalesce(SUM(stay), 0)",
    "nullif(COUNT(*), 0), greatest(COUNT(*), 1), least(COUNT(*), 1)",
    "COUNT(*) + 1, -COUNT(*), 100.0 * COUNT(*) / SUM(COUNT(*)) OVER (), COUNT(*) > 1",
    "rank() OVER (ORDER BY COUNT(*)), SUM(COUNT(*)) OVER () AS all_visits",
    "upper(department), lower(department), length(department), COUNT(*)",
    # Operators sqlglot reads as it reads a call (^ and power, |/ and sqrt, AND): unnamed.
    "COUNT(*) ^ 2, |/ COUNT(*), ||/ COUNT(*), cbrt(COUNT(*)), POWER(COUNT(*), 2)",
    "COUNT(*) > 1 AND COUNT(*) < 1e6, COUNT(*) > 1 OR SUM(stay) > 2, NOT COUNT(*) > 1",
    # SQL syntax read as another function (position(a IN b) is sqlglot's StrPosition).
    "position('a' in department), POSITION('e' IN department), strpos(department, 'a'), "
    "position ('a' in department) + 1, position('a' in department) AS p, COUNT(*)",
    "left(department, 2), right(department, 2), replace(department, 'a', 'b'), "
    "initcap(department), lpad(department, 3), rpad(department, 3), repeat(department, 2), "
    "COUNT(*)",
    "concat_ws('-', department, 'x'), concat(department), department || 'x', COUNT(*)",
    "COUNT(*)::real, COUNT(*)::float4, COUNT(*)::real / 3, CAST(COUNT(*) AS real), "
    "COUNT(*)::real::text",
]
GROUPED = [
    ("substr(department, 1, 1)", "substr(department, 1, 1), COUNT(*)"),
    ("substring(department, 1, 1)", "substring(department from 1 for 1), COUNT(*)"),
    ("left(department, 1)", "left(department, 1), COUNT(*)"),
    ("trim(department)", "trim(department), COUNT(*)"),
    ("trim(leading 'A' from department)", "trim(leading 'A' from department), COUNT(*)"),
    ("btrim(department)", "btrim(department), COUNT(*)"),
    ("ltrim(department)", "ltrim(department), COUNT(*)"),
    ("floor(cost / 10) * 10", "floor(cost / 10) * 10 AS bin, COUNT(*)"),
    ("width_bucket(stay, 0, 10, 5)", "width_bucket(stay, 0, 10, 5), COUNT(*)"),
    ("concat(department, 'x')", "concat(department, 'x'), COUNT(*)"),
    ("stay > 2 OR cost > 1", "stay > 2 OR cost > 1, COUNT(*)"),
    ("stay > 2 AND cost > 1", "stay > 2 AND cost > 1, COUNT(*)"),
]


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    with scratch_schema(pg_dsn) as (conn, schema):
        for statement in (CREATE, *SETUP):
            conn.execute(statement.format(schema=f'"{schema}"').encode())
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".visits VALUES (%s, %s, %s, %s, %s)', SAMPLE_ROWS
            )
        conn.execute(f'SET search_path TO "{schema}"')
        yield conn, schema


def dpproxy_names(sql: str, schema: str) -> list[str]:
    made = plan(sql, catalog(schema), PlanRequest(1.0, "postgres", delta=1e-6))
    post = sqlglot.parse_one(made.post_sql, read="duckdb")
    select = post if isinstance(post, exp.Select) else post.find(exp.Select)
    if select is None:
        raise AssertionError(made.post_sql)
    return [item.alias_or_name for item in select.expressions]


def postgres_names(sql: str, conn: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    with conn.cursor() as cur:
        cur.execute(sql.encode())
        return [column.name for column in cur.description or []]


@pytest.mark.parametrize("items", SELECTS)
def test_names_of_the_select_list_are_postgresql_s(
    items: str, postgres: tuple[psycopg.Connection[tuple[object, ...]], str]
) -> None:
    conn, schema = postgres
    sql = f"SELECT {items} FROM visits GROUP BY department"
    if "department" not in items.lower():
        sql = f"SELECT {items} FROM visits"
    assert dpproxy_names(sql, schema) == postgres_names(sql, conn)


@pytest.mark.parametrize(("key", "items"), GROUPED, ids=[k for k, _ in GROUPED])
def test_names_of_keys_are_postgresql_s(
    key: str, items: str, postgres: tuple[psycopg.Connection[tuple[object, ...]], str]
) -> None:
    conn, schema = postgres
    sql = f"SELECT {items} FROM visits GROUP BY {key}"
    assert dpproxy_names(sql, schema) == postgres_names(sql, conn)


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        # strpos and position are allowed in WHERE now (Tableau's CONTAINS): functions
        # sqlglot reads as its own (StartsWith, SplitPart) are named as written.
        ("SELECT COUNT(*) FROM visits WHERE starts_with(department, 'A')", "starts_with()"),
        ("SELECT COUNT(*) FROM visits WHERE split_part(department, 'A', 1) = 'x'", "split_part()"),
        ("SELECT approx_count_distinct(department) FROM visits", "approx_count_distinct()"),
        ("SELECT COUNT(*) FROM visits GROUP BY random()", "function random()"),
        ("SELECT COUNT(*), to_char(COUNT(*), '999') FROM visits", "function to_char()"),
    ],
)
def test_refusals_name_the_function_as_written(sql: str, words: str) -> None:
    with pytest.raises(Rejected) as caught:
        plan(sql, catalog("main"), PlanRequest(1.0, delta=1e-6))
    assert words in caught.value.message
