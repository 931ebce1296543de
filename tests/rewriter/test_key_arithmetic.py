"""GROUP BY arithmetic on an EXTRACT key (rewriter.passes.numeric_keys' parts):
``CAST(extract(dow FROM d) AS integer) + 1`` (a weekday numbered from 1) was refused as
"CAST(EXTRACT(DOW FROM d) AS INT) … could fail on some values", though that cast alone is
a key and the `+ 1` was what dpproxy did not compute. Each key runs on DuckDB and
PostgreSQL and gives PostgreSQL's own groups."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import psycopg
import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.postgres_schema import scratch_schema
from tests.rewriter.scratch import insert
from tests.rewriter.test_date_cast_keys import CREATE, FIRST, LAST, catalog, rows


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    conn = duckdb.connect(":memory:")
    conn.execute(CREATE.format(schema="main"))
    insert(conn, "main.calendar", rows())
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(CREATE.format(schema=f'"{schema}"'))
        with (
            conn.cursor() as cur,
            cur.copy(f'COPY "{schema}".calendar FROM STDIN') as copy,
        ):
            for row in rows():
                copy.write_row(row)
        yield conn, schema


#: (key, released type)
KEYS = [
    ("CAST(extract(dow FROM d) AS integer) + 1", "BIGINT"),
    ("1 + date_part('dow', d)::int", "BIGINT"),
    ("(CAST(EXTRACT(isodow FROM ts) AS INT) + 5) / 7", "BIGINT"),
    ("CAST(EXTRACT(month FROM d) AS integer) * 100 - 1", "BIGINT"),
    ("EXTRACT(dow FROM d) + 1", "DOUBLE"),
    ("EXTRACT(year FROM d) * 100 + EXTRACT(month FROM ts)", "DOUBLE"),
    ("floor(EXTRACT(doy FROM d) / 7)", "DOUBLE"),
]


@pytest.mark.postgres
@pytest.mark.parametrize(("key", "sql_type"), KEYS, ids=[k for k, _ in KEYS])
def test_arithmetic_on_an_extract_key_is_postgresql_s_own(
    key: str,
    sql_type: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
    pg_dsn: str,
) -> None:
    sql = f"SELECT {key} AS k, COUNT(*) FROM calendar GROUP BY 1"
    conn, schema = postgres
    answers: dict[str, dict[object, object]] = {}
    for dialect in ("duckdb", "postgres"):
        made = plan(
            sql,
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, delta=1e-6),
        )
        assert made.released_columns[0] == ("k0", sql_type)
        found = (duck if dialect == "duckdb" else conn).execute(made.sql).fetchall()
        answers[dialect] = {row[0]: row[1] for row in found}
    assert answers["duckdb"] == answers["postgres"]
    assert sum(n for n in answers["duckdb"].values() if isinstance(n, int)) == (
        (LAST - FIRST).days + 1
    )
    with psycopg.connect(pg_dsn, autocommit=True) as direct:
        direct.execute(f'SET search_path TO "{schema}"')
        own = {row[0]: row[1] for row in direct.execute(sql.encode()).fetchall()}
    if sql_type == "DOUBLE":
        own = {float(k): n for k, n in own.items()}
    assert answers["duckdb"] == own


def test_the_part_is_the_key_s_own_sql() -> None:
    """The EXTRACT key's SQL (within the years 1 to 9999) is written as often as for the
    key alone, not once per use in the arithmetic."""
    request = PlanRequest(1.0, delta=1e-6)
    alone = plan(
        "SELECT CAST(extract(dow FROM d) AS integer), COUNT(*) FROM calendar GROUP BY 1",
        catalog("main"),
        request,
    )
    added = plan(
        "SELECT CAST(extract(dow FROM d) AS integer) * 2 + 1, COUNT(*) FROM calendar GROUP BY 1",
        catalog("main"),
        request,
    )
    assert added.sql.count("EXTRACT(") == alone.sql.count("EXTRACT(")


@pytest.mark.parametrize(
    ("key", "words"),
    [
        # A cast of a real value to an integer stays refused, saying so.
        ("CAST(EXTRACT(dow FROM d) / 2 AS integer) + 1", "needs a whole number"),
        # A timestamp plus a number is no timestamp in PostgreSQL (a date plus days is a
        # date: tests/rewriter/test_key_mod_trunc_days.py).
        ("CAST(d AS TIMESTAMP) + 1", "adds a whole number of days to a date only"),
    ],
)
def test_what_is_not_a_number_key_is_refused(key: str, words: str) -> None:
    with pytest.raises(Rejected, match=words):
        plan(
            f"SELECT {key} AS k, COUNT(*) FROM calendar GROUP BY 1",
            catalog("main"),
            PlanRequest(1.0, delta=1e-6),
        )
