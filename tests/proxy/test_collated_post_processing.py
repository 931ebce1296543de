"""Post-processing orders and compares text as PostgreSQL does under the database's
collation (proxy.collated_runs): ORDER BY, comparisons, min/max, greatest/least, windows
and NULLs over released keys, compared with PostgreSQL's own answers in a database whose
default collation is ICU's en-US; released groups are never merged; DuckDB's byte order
stays DuckDB's."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import psycopg
import pytest

from proxy.postprocess import PostProcessor
from rewriter import (
    Catalog,
    ColumnPolicy,
    ColumnType,
    PlanRequest,
    TablePolicy,
    build_catalog,
    plan,
)
from tests.collated_database import TEXTS, TIES, icu_database
from tests.rewriter.noise import ZeroNoise

Rows = list[tuple[str | None, ...]]


def catalog(keys: list[str]) -> Catalog:
    """A table ``t`` whose text column ``k`` has the public domain ``keys``: every key is
    released."""
    return build_catalog(
        {"t": {"id": ColumnType.INTEGER, "k": ColumnType.TEXT}},
        {
            "t": TablePolicy(
                privacy_unit="id", max_rows_per_unit=1, columns={"k": ColumnPolicy(domain=keys)}
            )
        },
        schema="main",
    )


def answer(processor: PostProcessor, keys: list[str], sql: str) -> Rows:
    """dpproxy's answer to ``sql`` over released keys, each counted once (no noise)."""
    query_plan = plan(sql, catalog(keys), PlanRequest(1.0))
    released = query_plan.release([(k, 1) for k in keys], ZeroNoise())
    return list(processor.run(released, query_plan.post_sql).rows)


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """A connection to a database whose default collation is ICU's en-US, with a table
    ``keys`` of TEXTS."""
    with icu_database(pg_dsn) as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE keys (k text)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO keys VALUES (%s)", [(k,) for k in TEXTS])
        yield conn


def postgres_rows(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> Rows:
    """PostgreSQL's answer, every value as text (as dpproxy sends them)."""
    return [tuple(None if v is None else str(v) for v in row) for row in conn.execute(sql.encode())]


INNER = "(SELECT k, COUNT(*) AS n FROM t GROUP BY k) s"
#: (dpproxy's query over released keys, PostgreSQL's query over the same keys).
SAME = [
    ("SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY k", "SELECT k, 1 FROM keys ORDER BY k"),
    (
        "SELECT k, COUNT(*) FROM t GROUP BY 1 ORDER BY 1 DESC",
        "SELECT k, 1 FROM keys ORDER BY 1 DESC",
    ),
    (
        "SELECT k, COUNT(*) FROM t GROUP BY k HAVING k < 'b' ORDER BY k",
        "SELECT k, 1 FROM keys WHERE k < 'b' ORDER BY k",
    ),
    (
        f"SELECT s.k FROM {INNER} WHERE s.k BETWEEN 'a' AND 'E' ORDER BY s.k DESC",
        "SELECT k FROM keys WHERE k BETWEEN 'a' AND 'E' ORDER BY k DESC",
    ),
    (
        f"SELECT s.k FROM {INNER} WHERE s.k >= 'Z' ORDER BY 1",
        "SELECT k FROM keys WHERE k >= 'Z' ORDER BY 1",
    ),
    (f"SELECT max(s.k), min(s.k) FROM {INNER}", "SELECT max(k), min(k) FROM keys"),
    (
        f"SELECT max(s.k), min(s.k) FROM {INNER} WHERE s.k < 'n'",
        "SELECT max(k), min(k) FROM keys WHERE k < 'n'",
    ),
    (
        f"SELECT s.k, greatest(s.k, 'M'), least(s.k, 'm', 'B') FROM {INNER} ORDER BY s.k",
        "SELECT k, greatest(k, 'M'), least(k, 'm', 'B') FROM keys ORDER BY k",
    ),
    (
        f"SELECT s.k, rank() OVER (ORDER BY s.k DESC) AS r FROM {INNER} ORDER BY r",
        "SELECT k, rank() OVER (ORDER BY k DESC) AS r FROM keys ORDER BY r",
    ),
    (
        f"SELECT s.k, max(s.k) OVER (ORDER BY s.n, s.k ROWS BETWEEN UNBOUNDED PRECEDING AND "
        f"CURRENT ROW) FROM {INNER} ORDER BY s.k",
        "SELECT k, max(k) OVER (ORDER BY 1, k ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
        "FROM keys ORDER BY k",
    ),
    # NULLs: last going up, first going down, as asked.
    (
        f"SELECT nullif(s.k, 'b') AS k FROM {INNER} ORDER BY 1",
        "SELECT nullif(k, 'b') FROM keys ORDER BY 1",
    ),
    (
        f"SELECT nullif(s.k, 'b') AS k FROM {INNER} ORDER BY 1 DESC",
        "SELECT nullif(k, 'b') FROM keys ORDER BY 1 DESC",
    ),
    (
        f"SELECT nullif(s.k, 'b') AS k FROM {INNER} ORDER BY 1 NULLS FIRST",
        "SELECT nullif(k, 'b') FROM keys ORDER BY 1 NULLS FIRST",
    ),
    (
        f"SELECT nullif(s.k, 'b') AS k FROM {INNER} ORDER BY 1 DESC NULLS LAST",
        "SELECT nullif(k, 'b') FROM keys ORDER BY 1 DESC NULLS LAST",
    ),
    # Case variants stay apart, in groups, DISTINCT and equality.
    (
        f"SELECT lower(s.k) AS l, COUNT(*) FROM {INNER} GROUP BY 1 ORDER BY 1",
        "SELECT lower(k) AS l, COUNT(*) FROM keys GROUP BY 1 ORDER BY 1",
    ),
    (f"SELECT DISTINCT s.k FROM {INNER} ORDER BY 1", "SELECT DISTINCT k FROM keys ORDER BY 1"),
    (
        f"SELECT s.k, s.k = 'b', s.k IN ('B', 'é') FROM {INNER} ORDER BY 1",
        "SELECT k, k = 'b', k IN ('B', 'é') FROM keys ORDER BY 1",
    ),
]


@pytest.mark.parametrize(("ours", "theirs"), SAME)
def test_post_processing_orders_text_as_postgres(
    postgres: psycopg.Connection[tuple[object, ...]], ours: str, theirs: str
) -> None:
    expected = postgres_rows(postgres, theirs)
    got = answer(PostProcessor("en_us"), TEXTS, ours)
    if "= 'b'" in ours:  # booleans: PostgreSQL's t and f
        expected = [
            tuple({"True": "t", "False": "f"}.get(v or "", v) for v in row) for row in expected
        ]
    assert got == expected


def test_byte_order_differed(postgres: psycopg.Connection[tuple[object, ...]]) -> None:
    """What the tester found: b, B and 'a b' came back as B, a b, b."""
    keys = ["b", "B", "a b"]
    sql = "SELECT k, COUNT(*) FROM t GROUP BY 1 ORDER BY 1"
    assert [row[0] for row in answer(PostProcessor(), keys, sql)] == ["B", "a b", "b"]
    assert [row[0] for row in answer(PostProcessor("en_us"), keys, sql)] == ["a b", "b", "B"]
    theirs = postgres.execute("SELECT k FROM unnest(%s::text[]) AS k ORDER BY k", [keys])
    assert [row[0] for row in theirs] == ["a b", "b", "B"]


@pytest.mark.parametrize("tie", TIES)
def test_texts_equal_under_the_collation_are_never_merged(tie: tuple[str, str]) -> None:
    """Two released keys that ICU finds equal but whose bytes differ: DuckDB's collation
    would merge them in GROUP BY and DISTINCT and find them equal; PostgreSQL keeps them
    apart. Such a post-query orders text by bytes instead."""
    keys = [*TEXTS, *(text for text in tie if text not in TEXTS)]
    processor = PostProcessor("en_us")
    grouped = answer(processor, keys, f"SELECT s.k, COUNT(*) FROM {INNER} GROUP BY 1 ORDER BY 1")
    assert [row[0] for row in grouped] == sorted(keys, key=lambda k: k.encode())
    assert all(row[1] == "1" for row in grouped)
    distinct = answer(processor, keys, f"SELECT DISTINCT s.k FROM {INNER}")
    assert sorted(row[0] or "" for row in distinct) == sorted(keys)
    equal = answer(processor, keys, f"SELECT COUNT(*) FROM {INNER} WHERE s.k = '{tie[0]}'")
    assert equal == [("1",)]
    # A tie with a quoted text of the query only.
    alone = [k for k in keys if k != tie[1]]
    matched = answer(processor, alone, f"SELECT s.k FROM {INNER} WHERE s.k = '{tie[1]}'")
    assert matched == []
    # Without the tie, the same keys order under the collation.
    ordered = answer(processor, alone, "SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY k")
    assert [row[0] for row in ordered] != sorted(alone, key=lambda k: k.encode())


def test_duckdb_post_processing_orders_as_duckdb() -> None:
    """Without a collation (the DuckDB backend), post-processing orders as DuckDB does."""
    conn = duckdb.connect(":memory:")
    conn.execute("CREATE TABLE keys (k VARCHAR)")
    conn.executemany("INSERT INTO keys VALUES (?)", [[k] for k in TEXTS])
    for ours, theirs in SAME[:8]:
        expected = [
            tuple(None if v is None else str(v) for v in row)
            for row in conn.execute(theirs).fetchall()
        ]
        assert answer(PostProcessor(), TEXTS, ours) == expected, ours
