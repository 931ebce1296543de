"""A timestamp parameter bound as PostgreSQL reads it, in a session whose TimeZone is not
UTC: a timestamp with time zone (inferred from the column it is compared with, or declared)
is the instant its text or binary value says, whatever the session's zone; a timestamp's
text with an offset is its local time (PostgreSQL ignores the offset). dpproxy's bounded
exact count on DuckDB and PostgreSQL must be PostgreSQL's own, with the same parameter."""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterator

import psycopg
import pytest

from proxy import parameters
from proxy.parameter_type_rules import catalog_column_oids
from proxy.protocol import values
from rewriter import PlanRequest, plan
from tests.postgres_schema import scratch_schema
from tests.rewriter.zoned_events import CREATE, catalog, duckdb_events, fill_postgres

INSTANTS = [dt.datetime(2024, 1, 1, 11), dt.datetime(2024, 1, 1, 16)]  # naive: UTC
ZONE = "America/New_York"
SQL = "SELECT COUNT(*) FROM events WHERE ts >= $1"
#: (declared type, format, value): each is 10:00 UTC but the naive text, 12:00 in New York.
CASES = [
    (0, 0, b"2024-01-01 12:00:00+02"),
    (values.TIMESTAMPTZ, 0, b"2024-01-01 12:00:00+02"),
    (values.TIMESTAMPTZ, 1, struct.pack("!q", 757_418_400_000_000)),  # 2024-01-01 10:00 UTC
    (0, 0, b"2024-01-01 12:00:00"),  # a local time of New York: 17:00 UTC
]


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(CREATE.format(schema=f'"{schema}"'))
        fill_postgres(conn, schema, INSTANTS)
        conn.execute(f"SET TimeZone = '{ZONE}'")
        yield conn, schema


@pytest.mark.parametrize(("declared", "fmt", "data"), CASES)
def test_a_moment_parameter_is_the_moment_postgresql_reads(
    declared: int,
    fmt: int,
    data: bytes,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    conn, schema = postgres
    statement = parameters.prepare(SQL, [declared], catalog_column_oids(catalog("main")))
    assert statement.parameter_types == (values.TIMESTAMPTZ,)
    bound = parameters.bind(statement, [fmt], [data])
    duck = duckdb_events(INSTANTS)
    answers = []
    for dialect, engine in (("duckdb", duck), ("postgres", conn)):
        made = plan(
            bound,
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, time_zone=ZONE),
        )
        (row,) = engine.execute(made.sql).fetchall()
        answers.append(int(row[0]))
    with conn.cursor(binary=bool(fmt)) as cur:
        cur.execute(f'SET search_path TO "{schema}"')
        text = data.decode() if not fmt else dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC)
        (own,) = cur.execute(SQL.replace("$1", "%s"), (text,)).fetchall()
    assert answers == [own[0], own[0]]
