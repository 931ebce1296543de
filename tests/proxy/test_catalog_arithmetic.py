"""Arithmetic in catalog queries (SELECT 7/2, SELECT 1/0, SELECT oid/2 FROM pg_class) as
PostgreSQL computes it: values, types and errors compared with the real PostgreSQL 15,
through the real CatalogResponder (its CatalogDatabase and catalog engine process).

Before, 7/2 was 3.5 (a double precision), 1/0 Infinity, and 2147483647 + 1 "dpproxy
cannot answer this catalog query" with DuckDB's text; of the 505 statements of
catalog_arithmetic_cases, 43% were answered as PostgreSQL answers them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import psycopg
import pytest

from proxy.catalog import CatalogResponder
from proxy.catalog.translate import (
    CatalogRefused,
    SessionValues,
    catalog_tree,
    remembered_translation,
    translate,
)
from proxy.responders import SessionContext
from proxy.seam import QueryError
from tests.proxy.catalog_arithmetic_cases import (
    Answer,
    cases,
    catalog_answer,
    catalog_session,
    postgres_answer,
    same_value,
)

Connection = psycopg.Connection[tuple[object, ...]]
INT4, INT8, NUMERIC, FLOAT4, FLOAT8 = 23, 20, 1700, 700, 701

#: Numeric values computed when the query runs (not constants) are DECIMAL(38, 20) in
#: DuckDB: the same value as PostgreSQL's, shown with 20 decimals (docs/catalog.md).
SAME_VALUE_ONLY = {
    "SELECT x / 2 FROM (SELECT 7.0 AS x) t",
    "SELECT x::numeric / 2 FROM (SELECT 7 AS x) t",
    "SELECT (1/3::float8)::numeric",
    "SELECT 100.0 * count(*) / 7 FROM pg_type WHERE typname IN ('int2', 'int4', 'int8')",
    "SELECT count(*) / 2.0 FROM pg_type WHERE typname IN ('int2', 'int4', 'int8')",
}
#: What dpproxy answers otherwise than PostgreSQL, as docs/catalog.md says.
DIFFERENT = {
    # oid is a bigint in the catalog: arithmetic on it works (PostgreSQL has none).
    "SELECT oid / 2 FROM pg_type WHERE typname = 'int4'": Answer("11", INT8),
    "SELECT -oid / 5 FROM pg_type WHERE typname = 'text'": Answer("-5", INT8),
    "SELECT oid % 7 FROM pg_type WHERE typname = 'int4'": Answer("2", INT8),
    "SELECT oid / 0 FROM pg_type WHERE typname = 'int4'": Answer(
        sqlstate="22012", message="division by zero"
    ),
    # Aggregates have DuckDB's types (sum of integers a numeric, of numerics a double).
    "SELECT sum(x) / 2 FROM (VALUES (7), (8)) v(x)": Answer("7", NUMERIC),
    "SELECT max(x) / 2 FROM (VALUES (7.5), (8.5)) v(x)": Answer("4.25", FLOAT8),
    # Numeric values of more than 38 digits are refused.
    "SELECT 1::numeric / 3e-30": Answer(
        sqlstate="0A000",
        message="dpproxy's catalog computes numeric values of at most 38 digits (this one has 60)",
    ),
    "SELECT 1e400 * 1": Answer(
        sqlstate="0A000",
        message="dpproxy's catalog computes numeric values of at most 38 digits (this one has 401)",
    ),
}


@pytest.fixture(scope="module")
def catalog() -> Iterator[tuple[CatalogResponder, SessionContext]]:
    with catalog_session() as asked:
        yield asked


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[Connection]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def ask(catalog: tuple[CatalogResponder, SessionContext], sql: str) -> Answer:
    responder, context = catalog
    return catalog_answer(responder, context, sql)


@pytest.mark.parametrize(
    "sql", [sql for sql in cases() if sql not in SAME_VALUE_ONLY and sql not in DIFFERENT]
)
def test_answered_as_postgresql_answers(
    catalog: tuple[CatalogResponder, SessionContext], postgres: Connection, sql: str
) -> None:
    assert ask(catalog, sql) == postgres_answer(postgres, sql)


@pytest.mark.parametrize("sql", sorted(SAME_VALUE_ONLY))
def test_numerics_computed_when_the_query_runs_have_postgresql_values(
    catalog: tuple[CatalogResponder, SessionContext], postgres: Connection, sql: str
) -> None:
    ours, theirs = ask(catalog, sql), postgres_answer(postgres, sql)
    assert same_value(theirs, ours), (ours, theirs)
    assert ours.value is not None and len(ours.value.split(".")[1]) == 20


@pytest.mark.parametrize("sql", sorted(DIFFERENT))
def test_known_differences_are_as_documented(
    catalog: tuple[CatalogResponder, SessionContext], sql: str
) -> None:
    assert ask(catalog, sql) == DIFFERENT[sql]


def test_the_reported_cases(catalog: tuple[CatalogResponder, SessionContext]) -> None:
    """The table of the report, with PostgreSQL 15's answers written out."""
    expected = {
        "SELECT 7/2": Answer("3", INT4),
        "SELECT -7/2": Answer("-3", INT4),
        "SELECT 7.0/2": Answer("3.5000000000000000", NUMERIC),
        "SELECT 1/0": Answer(sqlstate="22012", message="division by zero"),
        "SELECT 1.0/0": Answer(sqlstate="22012", message="division by zero"),
        "SELECT 1.0::float8/0": Answer(sqlstate="22012", message="division by zero"),
        "SELECT 5 % 0": Answer(sqlstate="22012", message="division by zero"),
        "SELECT 2147483647+1": Answer(sqlstate="22003", message="integer out of range"),
        "SELECT 9223372036854775807 + 1": Answer(sqlstate="22003", message="bigint out of range"),
        "SELECT 40000::smallint": Answer(sqlstate="22003", message="smallint out of range"),
        "SELECT 2147483648::int": Answer(sqlstate="22003", message="integer out of range"),
        "SELECT typlen / 3 FROM pg_type WHERE typname = 'int8'": Answer("2", INT4),
    }
    assert {sql: ask(catalog, sql) for sql in expected} == expected


def test_columns_divide_by_the_type_duckdb_binds(
    catalog: tuple[CatalogResponder, SessionContext],
) -> None:
    _, rows = _rows(catalog, "SELECT oid, oid / 2, -oid / 2 FROM pg_class ORDER BY oid LIMIT 3")
    assert rows and all(half == str(int(o) // 2) for o, half, _ in rows)
    assert all(negative == str(-(int(o) // 2)) for o, _, negative in rows)  # toward zero


def test_nested_divisions_of_unknown_types_are_bounded(
    catalog: tuple[CatalogResponder, SessionContext],
) -> None:
    """DuckDB binds pg_div's arguments once per overload it tries: each nesting level
    multiplies the time, so a few are answered and more refused (54001)."""
    nested = "x"
    for _ in range(8):
        nested = f"({nested}) / 2"
    started = time.monotonic()
    answer = ask(catalog, f"SELECT {nested} FROM (SELECT 100000 AS x) t")
    assert answer == Answer(str(100000 // 256), INT4)
    assert time.monotonic() - started < 2
    refused = ask(catalog, f"SELECT ({nested}) / 2 FROM (SELECT 100000 AS x) t")
    assert refused.sqlstate == "54001"


def test_aggregates_are_not_divided_as_integers(
    catalog: tuple[CatalogResponder, SessionContext],
) -> None:
    """DuckDB binds a typed macro's aggregate argument as the first overload's type (it
    divided sum(7.5 + 8.25) as an integer, 8): aggregates divide by DuckDB's //."""
    assert ask(catalog, "SELECT sum(x) / 2 FROM (VALUES (7.5), (8.25)) v(x)").value == "7.875"
    assert ask(catalog, "SELECT generate_series(5, 7) / 2").value == "2"


def test_translations_are_remembered_with_their_parameters() -> None:
    session = SessionValues("alice", "demo", "PostgreSQL 15.0 (dpproxy test)", {})
    sql = "SELECT $1 / 2"
    seven = remembered_translation(sql, session, ["7"])
    assert seven is not None and "//" in seven.sql
    with pytest.raises(CatalogRefused, match='invalid input syntax for type integer: "7.5"'):
        remembered_translation(sql, session, ["7.5"])
    assert remembered_translation(sql, session, ["7"]) == seven
    # catalog_tree remembers parsed statements; the translation (which folds -7 into one
    # constant and marks nodes with their types) works on a copy.
    for sql in ("SELECT -7/2", "SELECT -(1.0/3) * 2", "SELECT 1e-308::float8 * 1e-308"):
        tree = catalog_tree(sql, "alice")
        assert tree is not None
        before = tree.sql(dialect="postgres")
        first = translate(sql, session)
        assert first is not None and translate(sql, session) == first
        assert tree.sql(dialect="postgres") == before
        assert not any(key.startswith("pg_") for node in tree.walk() for key in node.meta)


def test_parameters_through_the_responder(
    catalog: tuple[CatalogResponder, SessionContext],
) -> None:
    responder, context = catalog
    sql = "SELECT $1 / 2"
    first = asyncio.run(responder.answer_with_parameters(sql, context, ["7"]))
    assert first is not None and first.rows == (("3",),)
    with pytest.raises(QueryError) as refused:
        asyncio.run(responder.answer_with_parameters(sql, context, ["7.5"]))
    assert refused.value.sqlstate == "22P02"
    again = asyncio.run(responder.answer_with_parameters(sql, context, ["-9"]))
    assert again is not None and again.rows == (("-4",),)


def _rows(
    catalog: tuple[CatalogResponder, SessionContext], sql: str
) -> tuple[tuple[int, ...], list[tuple[str | None, ...]]]:
    responder, context = catalog
    result = asyncio.run(responder.answer(sql, context))
    assert result is not None and result.columns is not None
    return tuple(c.type_oid for c in result.columns), [tuple(row) for row in result.rows]
