"""A backslash in a LIKE or ILIKE pattern escapes the next character, as PostgreSQL reads
it (rewriter.passes.like_escapes): on DuckDB, which reads it as a backslash unless told
ESCAPE '\\', in the bounded query, in keys, in FILTER and in post-processing. Each count
is compared with PostgreSQL's own over texts holding %, _ and backslashes."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import psycopg
import pytest

from rewriter import Catalog, ColumnType, PlanRequest, TablePolicy, build_catalog, plan
from tests.postgres_schema import scratch_schema
from tests.rewriter.scratch import insert

COLUMNS = {"person": ColumnType.INTEGER, "code": ColumnType.TEXT}
POLICY = TablePolicy(privacy_unit="person", max_rows_per_unit=1, max_groups_per_unit=1)
CREATE = "CREATE TABLE {schema}.codes (person BIGINT, code VARCHAR)"
TEXTS = ["a%b", "ab", "a_b", "axb", "a\\b", "a\\\\b", "50%", "5000", "%", "_", "\\", "A%B", None]
PATTERNS = [
    "%\\%%",
    "a\\_b",
    "a\\\\b",
    "a\\\\\\\\b",
    "\\%",
    "\\_",
    "\\\\",
    "%0\\%",
    "a\\%b",
    "a\\b",  # \b is b: matches ab
    "%\\x%",
]


def rows() -> list[tuple[int, str | None]]:
    return [(i, text) for i, text in enumerate(TEXTS, start=1)]


def catalog(schema: str) -> Catalog:
    return build_catalog({"codes": COLUMNS}, {"codes": POLICY}, schema=schema)


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    conn = duckdb.connect(":memory:")
    conn.execute(CREATE.format(schema="main"))
    insert(conn, "main.codes", rows())
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(CREATE.format(schema=f'"{schema}"'))
        with conn.cursor() as cur:
            cur.executemany(f'INSERT INTO "{schema}".codes VALUES (%s, %s)', rows())
        yield conn, schema


def _quoted(pattern: str) -> str:
    return "'" + pattern.replace("'", "''") + "'"


def _counts(
    sql: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> tuple[object, object, object]:
    conn, schema = postgres
    found = []
    for dialect, engine in (("duckdb", duck), ("postgres", conn)):
        made = plan(
            sql,
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, delta=1e-6),
        )
        found.append(sorted(engine.execute(made.sql).fetchall(), key=repr))
    with conn.cursor() as cur:
        cur.execute(f'SET search_path TO "{schema}"')
        own = sorted(cur.execute(sql.encode()).fetchall(), key=repr)
    return found[0], found[1], own


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("operator", ["LIKE", "ILIKE", "NOT LIKE"])
def test_where_like_is_postgresql_s(
    pattern: str,
    operator: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    sql = f"SELECT COUNT(*) FROM codes WHERE code {operator} {_quoted(pattern)}"
    on_duckdb, on_postgres, own = _counts(sql, duck, postgres)
    assert on_duckdb == on_postgres == own  # one row per person: the counts are exact


@pytest.mark.parametrize("pattern", PATTERNS)
def test_filter_and_keys_are_postgresql_s(
    pattern: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    filtered = f"SELECT COUNT(*) FILTER (WHERE code LIKE {_quoted(pattern)}) FROM codes"
    on_duckdb, on_postgres, own = _counts(filtered, duck, postgres)
    assert on_duckdb == on_postgres == own
    keyed = f"SELECT code LIKE {_quoted(pattern)} AS k, COUNT(*) FROM codes GROUP BY 1"
    on_duckdb, on_postgres, own = _counts(keyed, duck, postgres)
    assert {k: n for k, n in on_duckdb if n} == {k: n for k, n in on_postgres if n}
    assert {k: n for k, n in on_duckdb if n} == dict(own)  # (the domain's empty groups)


def test_post_processing_reads_the_escape_as_postgresql() -> None:
    """HAVING over a released key (post-processing on DuckDB): the escape is PostgreSQL's."""
    made = plan(
        "SELECT code, COUNT(*) FROM codes GROUP BY code HAVING code LIKE '%\\%%'",
        catalog("main"),
        PlanRequest(1.0, delta=1e-6),
    )
    assert "ESCAPE '\\'" in made.post_sql
    released = duckdb.connect()
    released.execute("CREATE TABLE released (k0 VARCHAR, a0 BIGINT)")
    released.execute("INSERT INTO released VALUES ('a%b', 1), ('ab', 1), ('a\\b', 1)")
    assert released.execute(made.post_sql).fetchall() == [("a%b", 1)]
