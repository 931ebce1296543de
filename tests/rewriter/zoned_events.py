"""A table of events with a timestamp with time zone, the same in DuckDB and PostgreSQL,
for the tests of rewriter.zones: one row per person, so that a bounded count is the
exact count."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import duckdb
import psycopg

from rewriter import Catalog, ColumnPolicy, ColumnType, ColumnTypes, TablePolicy, build_catalog
from tests.rewriter.scratch import insert

COLUMNS = ColumnTypes(
    {
        "events": {
            "event_id": ColumnType.INTEGER,
            "pid": ColumnType.INTEGER,
            "ts": ColumnType.TIMESTAMP,
        }
    },
    {"events": frozenset({"ts"})},
)
#: Bounds as instants in UTC: the years 2020 to 2029.
POLICY = TablePolicy(
    privacy_unit="pid",
    max_rows_per_unit=1,
    max_groups_per_unit=1,
    columns={"ts": ColumnPolicy(lower="2020-01-01", upper="2029-12-31")},
)
CREATE = "CREATE TABLE {schema}.events (event_id BIGINT, pid BIGINT, ts TIMESTAMPTZ)"
#: The zones the engines' own connections compute in: neither is any analyst's zone.
DUCKDB_ENGINE_ZONE = "Asia/Tokyo"
POSTGRES_ENGINE_ZONE = "Pacific/Auckland"


def catalog(schema: str) -> Catalog:
    return build_catalog(COLUMNS, {"events": POLICY}, schema=schema)


Moment = dt.datetime | str | None  # naive: UTC; a text as both engines read it ('infinity')


def utc_text(moment: Moment) -> str | None:
    """An instant (naive: UTC) as text both engines read as that instant."""
    if moment is None or isinstance(moment, str):
        return moment
    return moment.isoformat(sep=" ", timespec="microseconds") + "+00"


def rows_of(instants: Sequence[Moment]) -> list[tuple[int, int, str | None]]:
    return [(i, i, utc_text(moment)) for i, moment in enumerate(instants, start=1)]


def duckdb_events(instants: Sequence[Moment]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB whose own TimeZone is DUCKDB_ENGINE_ZONE, holding the events."""
    conn = duckdb.connect()
    conn.execute(f"SET TimeZone = '{DUCKDB_ENGINE_ZONE}'")
    conn.execute(CREATE.format(schema="main"))
    fill_duckdb(conn, instants)
    return conn


def fill_duckdb(conn: duckdb.DuckDBPyConnection, instants: Sequence[Moment]) -> None:
    conn.execute("DELETE FROM main.events")
    insert(conn, "main.events", rows_of(instants))  # the texts cast to TIMESTAMPTZ


def fill_postgres(
    conn: psycopg.Connection[tuple[object, ...]],
    schema: str,
    instants: Sequence[Moment],
) -> None:
    with conn.cursor() as cur:
        cur.execute(f'DELETE FROM "{schema}".events')
        rows = rows_of(instants)
        if rows:
            cur.executemany(f'INSERT INTO "{schema}".events VALUES (%s, %s, %s::timestamptz)', rows)
