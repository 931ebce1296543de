"""GROUP BY buckets of seconds since 1970 (rewriter.passes.epoch_keys): Grafana's
``$__timeGroup``, ``floor(extract(epoch from c)/N)*N``.

The calendar of test_to_char_keys (every day from 1999-12-20 to 2026-01-10 with a
timestamp at a different time of each day, its microseconds too, plus 0001-01-01 and
9999-12-31 23:59:59.999999, one person each): dpproxy's bounded exact answer on DuckDB and
on PostgreSQL must be PostgreSQL's own answer, bucket for bucket; the rows outside the
years 1 to 9999 are NULL.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import duckdb
import psycopg
import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.postgres_schema import scratch_schema
from tests.rewriter.test_to_char_keys import OUTSIDE, catalog, duck, postgres, rows
from tests.rewriter.zoned_events import catalog as zoned_catalog

__all__ = ["duck", "postgres"]  # the fixtures, used by name

KEYS = [
    "floor(extract(epoch from d)/86400)*86400",
    "floor(EXTRACT(EPOCH FROM d) / 604800) * 604800",
    "floor(extract(epoch from ts)/1)*1",
    "floor(extract(epoch from ts)/60)*60",
    "floor(extract(epoch from ts)/300)*300",
    "floor(extract(epoch from ts)/3600)*3600",
    "86400 * floor(date_part('epoch', ts) / 86400)",
    "floor(extract(epoch from CAST(ts AS TIMESTAMP)) / 7)",
    "floor(extract(epoch from ts) / 31557600) * 31557600",
]


def _own(
    sql: str, postgres: tuple[psycopg.Connection[tuple[object, ...]], str]
) -> dict[object, object]:
    conn, schema = postgres
    found = conn.execute(sql.replace("calendar", f'"{schema}".calendar')).fetchall()
    return {None if k is None else int(k): n for k, n in found}


@pytest.mark.parametrize("key", KEYS)
def test_buckets_are_postgresql_s_own(
    key: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    conn, schema = postgres
    # Not 9999-12-31 23:59:59.999999: PostgreSQL rounds its numeric quotient there (below).
    sql = f"SELECT {key} AS k, COUNT(*) FROM calendar WHERE person <> {len(rows())} GROUP BY 1"
    answers: dict[str, dict[object, object]] = {}
    for dialect, engine in (("duckdb", duck), ("postgres", conn)):
        made = plan(
            sql,
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, delta=1e-6),
        )
        assert made.released_columns[0] == ("k0", "BIGINT")
        answers[dialect] = {row[0]: row[1] for row in engine.execute(made.sql).fetchall()}
    assert answers["duckdb"].pop(None) == len(OUTSIDE)  # DuckDB's table holds them
    assert answers["duckdb"] == answers["postgres"] == _own(sql, postgres)
    assert sum(int(str(n)) for n in answers["postgres"].values()) == len(rows()) - 1


@pytest.fixture(scope="module")
def edges(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    """A microsecond before and at bucket boundaries, before and after 1970."""
    moments = []
    for day in (dt.datetime(1969, 12, 31), dt.datetime(2024, 3, 1), dt.datetime(2500, 1, 1)):
        for second in (0, 60, 300, 3600):
            at = day + dt.timedelta(seconds=second)
            moments += [at, at - dt.timedelta(microseconds=1), at + dt.timedelta(microseconds=1)]
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(f'CREATE TABLE "{schema}".calendar (person BIGINT, d DATE, ts TIMESTAMP)')
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".calendar VALUES (%s, %s, %s)',
                [(i, m.date(), m) for i, m in enumerate(moments)],
            )
        yield conn, schema


@pytest.mark.parametrize("seconds", [1, 60, 300, 3600, 86400, 7])
def test_a_microsecond_before_a_boundary_is_in_the_bucket_before(
    seconds: int, edges: tuple[psycopg.Connection[tuple[object, ...]], str]
) -> None:
    conn, schema = edges
    sql = f"SELECT floor(extract(epoch from ts)/{seconds})*{seconds} AS k, COUNT(*) FROM calendar"
    sql += " GROUP BY 1"
    duck_conn = duckdb.connect(":memory:")
    duck_conn.execute("CREATE TABLE calendar (person BIGINT, d DATE, ts TIMESTAMP)")
    duck_conn.executemany(
        "INSERT INTO calendar VALUES (?, ?, ?)",
        conn.execute(f'SELECT * FROM "{schema}".calendar').fetchall(),
    )
    answers = {}
    for dialect, engine in (("duckdb", duck_conn), ("postgres", conn)):
        made = plan(
            sql,
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, delta=1e-6),
        )
        answers[dialect] = {row[0]: row[1] for row in engine.execute(made.sql).fetchall()}
    assert answers["duckdb"] == answers["postgres"] == _own(sql, edges)


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("extract(epoch from ts)", "other fields fail on some values or differ"),
        ("floor(extract(epoch from ts) / 2.5) * 2.5", "whole number of seconds|other fields fail"),
        ("floor(extract(epoch from ts) / 0) * 0", "whole number of seconds|other fields fail"),
        ("floor(extract(epoch from ts) / 60) * 30", "whole number of seconds|other fields fail"),
        ("floor(extract(epoch from person) / 60)", "date or timestamp column|privacy unit"),
    ],
)
def test_other_epochs_are_refused(key: str, words: str) -> None:
    with pytest.raises(Rejected, match=words):
        plan(
            f"SELECT COUNT(*) FROM calendar GROUP BY {key}",
            catalog("main"),
            PlanRequest(1.0, delta=1e-6),
        )


def test_the_epoch_of_a_timestamp_with_time_zone_is_refused_saying_what_works() -> None:
    with pytest.raises(Rejected, match="time zone is not supported") as caught:
        plan(
            "SELECT COUNT(*) FROM events GROUP BY floor(extract(epoch from ts)/60)*60",
            zoned_catalog("main"),
            PlanRequest(1.0, delta=1e-6),
        )
    assert caught.value.hint is not None and "CAST(ts AS TIMESTAMP)" in caught.value.hint


def test_far_from_1970_a_microsecond_before_a_boundary_is_where_the_bucket_says(
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    """The documented difference: PostgreSQL's numeric quotient has 16 significant
    digits, so 9999-12-31 23:59:59.999999 / 300 seconds rounds up into the next bucket
    there; dpproxy keeps it in its own bucket (the exact floor), on both engines."""
    conn, schema = postgres
    sql = (
        "SELECT floor(extract(epoch from ts)/300)*300 AS k, COUNT(*) FROM calendar "
        f"WHERE person = {len(rows())} GROUP BY 1"
    )
    for dialect, engine in (("duckdb", duck), ("postgres", conn)):
        made = plan(
            sql,
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, delta=1e-6),
        )
        assert [row[0] for row in engine.execute(made.sql).fetchall()] == [253402300500]
    assert _own(sql, postgres) == {253402300800: 1}
