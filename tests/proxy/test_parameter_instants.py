"""A timestamp with time zone parameter compared with a date or timestamp column, and a
Grafana-style RFC 3339 text compared with one, bound as PostgreSQL reads them in a
session whose TimeZone is not UTC: a declared timestamptz (psycopg's aware datetime,
JDBC's OffsetDateTime) is an instant, compared with each date's midnight or local time in
the session's zone; a text of no declared type takes the column's type, a date or a
timestamp ignoring the offset, as does a declared date. dpproxy's bounded exact count on
DuckDB and PostgreSQL must be PostgreSQL's own, with the same parameter."""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterator

import duckdb
import psycopg
import pytest

from proxy import parameters
from proxy.parameter_type_rules import catalog_column_oids
from proxy.protocol import values
from rewriter import PlanRequest, plan
from tests.postgres_schema import scratch_schema
from tests.rewriter.scratch import insert
from tests.rewriter.test_time_filters import CREATE, catalog, rows

ZONES = ("America/New_York", "Asia/Kolkata")
#: (SQL, declared type, format, value)
CASES = [
    ("SELECT COUNT(*) FROM moments WHERE d >= $1", values.TIMESTAMPTZ, 0,
     b"2024-03-10 20:00:00+00"),
    ("SELECT COUNT(*) FROM moments WHERE d < $1", values.TIMESTAMPTZ, 1,
     struct.pack("!q", 763_329_600_000_000)),  # 2024-03-10 20:00 UTC
    ("SELECT COUNT(*) FROM moments WHERE ts >= $1", values.TIMESTAMPTZ, 0,
     b"2024-11-03 05:30:00+00"),
    ("SELECT COUNT(*) FROM moments WHERE d BETWEEN $1 AND $2", 0, 0,
     b"2024-03-10T00:00:00Z"),
    ("SELECT COUNT(*) FROM moments WHERE ts BETWEEN $1 AND $2", 0, 0,
     b"2024-03-10T02:30:00+05:30"),
    ("SELECT COUNT(*) FROM moments WHERE d >= $1", values.DATE, 0,
     b"2024-03-10T23:00:00-05"),  # a date's input reads the date alone
]  # fmt: skip
END = b"2024-11-03T23:59:59Z"


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(CREATE.format(schema=f'"{schema}"'))
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".moments VALUES (%s, %s, %s::date, %s::timestamp, '
                "%s::timestamptz)",
                rows(),
            )
        yield conn, schema


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize(("sql", "declared", "fmt", "data"), CASES)
def test_a_moment_parameter_compares_as_postgresql_compares_it(
    sql: str,
    declared: int,
    fmt: int,
    data: bytes,
    zone: str,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    conn, schema = postgres
    count = sql.count("$")
    statement = parameters.prepare(sql, [declared] * count, catalog_column_oids(catalog("main")))
    sent = [data, END][:count]
    bound = parameters.bind(statement, [fmt] * count, sent)
    duck = duckdb.connect()
    duck.execute("SET TimeZone = 'Asia/Tokyo'")
    duck.execute(CREATE.format(schema="main"))
    insert(duck, "main.moments", rows())
    answers = []
    for dialect in ("duckdb", "postgres"):
        made = plan(
            bound,
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, time_zone=zone),
        )
        engine = duck if dialect == "duckdb" else conn
        (row,) = engine.execute(made.sql).fetchall()
        answers.append(int(str(row[0])))
    with psycopg.connect(conn.info.dsn, autocommit=True) as direct:
        direct.execute(f"SET TimeZone = '{zone}'")
        direct.execute(f'SET search_path TO "{schema}"')
        if fmt:  # binary: microseconds after 2000-01-01 UTC
            instant = dt.datetime(2000, 1, 1, tzinfo=dt.UTC) + dt.timedelta(
                microseconds=struct.unpack("!q", data)[0]
            )
            texts = [instant.isoformat()]
        else:
            texts = [s.decode() for s in sent]
        written = sql
        for number in range(count, 0, -1):  # as constants: an untyped one, or a timestamptz
            typed = {values.TIMESTAMPTZ: "::timestamptz", values.DATE: "::date"}.get(declared, "")
            written = written.replace(f"${number}", f"'{texts[number - 1]}'{typed}")
        (own,) = direct.execute(written).fetchall()
    assert answers == [own[0], own[0]], bound
